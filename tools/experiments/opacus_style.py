#!/usr/bin/python3
"""opacus_style.py - Tramer-Boneh's Fashion-MNIST run written as an Opacus
user writes it (the tutorial's PrivacyEngine.make_private_with_epsilon and
the ordinary training loop), with the one line that differs from Opacus
marked below.  The tanh CNN (26 010 parameters), SGD lr 4 momentum 0.9,
batch 2048 (Poisson-sampled, q = 1/len(loader)), max_grad_norm 0.1, eps 3
at delta 1e-5 over 40 epochs: Tramer-Boneh 2021 report 86.0% test accuracy
for this model at this budget.  The test accuracy is the FINAL model's.

    /usr/bin/python3 tools/experiments/opacus_style.py [--epochs 40] [--eps 3]
        [--n-train 60000] [--threads 2] [--csv FILE]

Prints a line per epoch (test accuracy, eps so far, wall time) and, with
--csv, appends one row of results.
"""
import argparse
import csv
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torch  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from dpsubspace.torch import PrivacyEngine  # noqa: E402  (Opacus: from opacus import PrivacyEngine)


def tanh_cnn():
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(1, 16, 8, 2, padding=3), nn.Tanh(), nn.MaxPool2d(2, 1),
                         nn.Conv2d(16, 32, 4, 2), nn.Tanh(), nn.MaxPool2d(2, 1), nn.Flatten(),
                         nn.Linear(32 * 4 * 4, 32), nn.Tanh(), nn.Linear(32, 10))


def load(n_train):
    from gradients_common import DATA_DIR
    from gradients_make import load_fmnist
    data = load_fmnist(DATA_DIR)
    (xtr, ytr), (xte, yte) = data["train"], data["test"]
    return (TensorDataset(torch.from_numpy(xtr[:n_train].copy()), torch.from_numpy(ytr[:n_train].copy())),
            TensorDataset(torch.from_numpy(xte.copy()), torch.from_numpy(yte.copy())))


def accuracy(model, loader):
    model.eval()
    right = total = 0
    with torch.no_grad():
        for x, y in loader:
            right += int((model(x).argmax(1) == y).sum())
            total += len(y)
    model.train()
    return right / total


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--eps", type=float, default=3.0)
    ap.add_argument("--delta", type=float, default=1e-5)
    ap.add_argument("--n-train", type=int, default=60000)
    ap.add_argument("--batch", type=int, default=2048)
    ap.add_argument("--lr", type=float, default=4.0)
    ap.add_argument("--clip", type=float, default=0.1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0, help="the initial weights' seed (public); the noise and the "
                    "sampling are from the secure generator")
    ap.add_argument("--csv", help="append a row of results to this CSV")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    t0 = time.time()

    train, test = load(a.n_train)
    train_loader = DataLoader(train, batch_size=a.batch, shuffle=True)
    test_loader = DataLoader(test, batch_size=4096)
    model = tanh_cnn()
    optimizer = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    criterion = torch.nn.CrossEntropyLoss()

    privacy_engine = PrivacyEngine()
    model, optimizer, train_loader = privacy_engine.make_private_with_epsilon(
        module=model, optimizer=optimizer, data_loader=train_loader,
        target_epsilon=a.eps, target_delta=a.delta, epochs=a.epochs, max_grad_norm=a.clip)
    print(f"noise multiplier {optimizer.noise_multiplier:.4f} for (eps {a.eps:g}, delta {a.delta:g}) over "
          f"{a.epochs} epochs of {len(train_loader)} steps", flush=True)

    for epoch in range(1, a.epochs + 1):
        for x, y in train_loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
        acc = accuracy(model, test_loader)
        print(f"epoch {epoch:3d}  test accuracy {acc:.4f}  eps {privacy_engine.get_epsilon(a.delta):.3f}  "
              f"{time.time() - t0:.0f} s", flush=True)

    eps = privacy_engine.get_epsilon(a.delta)
    wall = time.time() - t0
    print(f"final model: test accuracy {acc:.4f} at (eps {eps:.3f}, delta {a.delta:g}); {wall:.0f} s on "
          f"{a.threads} threads", flush=True)
    if a.csv:
        new = not os.path.exists(a.csv)
        with open(a.csv, "a", newline="") as f:
            w = csv.writer(f)
            if new:
                w.writerow(["epochs", "eps_target", "eps_spent", "delta", "noise_multiplier", "n_train", "batch",
                            "lr", "clip", "seed", "test_acc", "wall_s", "threads"])
            w.writerow([a.epochs, a.eps, round(eps, 4), a.delta, round(optimizer.noise_multiplier, 4), a.n_train,
                        a.batch, a.lr, a.clip, a.seed, round(acc, 4), round(wall), a.threads])


if __name__ == "__main__":
    main()
