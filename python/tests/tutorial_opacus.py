#!/usr/bin/python3
"""tutorial_opacus.py - Opacus' tutorial training loop, as written for Opacus
(PrivacyEngine(), make_private_with_epsilon(...), the ordinary loop,
privacy_engine.get_epsilon(delta)), on 3 000 Fashion-MNIST examples with the
CNN of Opacus' MNIST example (Papernot et al. 2021's tanh CNN).  The one line
that differs from the Opacus version is the import of PrivacyEngine.
Prints the run's numbers as one JSON line (test_engine.py reads it).
Data: Debian's dataset-fashion-mnist; torchvision is not needed."""
import gzip
import json
import os

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset

from dpsubspace.torch import PrivacyEngine  # Opacus: from opacus import PrivacyEngine

DATA = "/usr/share/datasets/fashion-mnist"
N_TRAIN, N_TEST = 3000, 1000
EPOCHS = 3
BATCH_SIZE = 256
LR = 2.0
MAX_GRAD_NORM = 1.0
EPSILON = 8.0
DELTA = 1e-5


def load(stem, n):
    with gzip.open(os.path.join(DATA, f"{stem}-images-idx3-ubyte.gz")) as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)[:n]
    with gzip.open(os.path.join(DATA, f"{stem}-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8)[:n]
    x = (x.astype(np.float32) / 255.0 - 0.2860) / 0.3530
    return TensorDataset(torch.from_numpy(x), torch.from_numpy(y.astype(np.int64)))


class SampleConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 8, 2, padding=3)
        self.conv2 = nn.Conv2d(16, 32, 4, 2)
        self.fc1 = nn.Linear(32 * 4 * 4, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        x = torch.tanh(self.conv1(x))
        x = nn.functional.max_pool2d(x, 2, 1)
        x = torch.tanh(self.conv2(x))
        x = nn.functional.max_pool2d(x, 2, 1)
        x = x.flatten(1)
        x = torch.tanh(self.fc1(x))
        return self.fc2(x)


def test(model, loader):
    model.eval()
    criterion = nn.CrossEntropyLoss(reduction="sum")
    total, n = 0.0, 0
    with torch.no_grad():
        for images, target in loader:
            total += criterion(model(images), target).item()
            n += len(target)
    return total / n


def main():
    torch.manual_seed(0)
    torch.set_num_threads(2)
    train_loader = DataLoader(load("train", N_TRAIN), batch_size=BATCH_SIZE)
    test_loader = DataLoader(load("t10k", N_TEST), batch_size=1000)
    model = SampleConvNet()
    optimizer = optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    before = test(model, test_loader)

    privacy_engine = PrivacyEngine()
    model, optimizer, train_loader = privacy_engine.make_private_with_epsilon(
        module=model,
        optimizer=optimizer,
        data_loader=train_loader,
        epochs=EPOCHS,
        target_epsilon=EPSILON,
        target_delta=DELTA,
        max_grad_norm=MAX_GRAD_NORM,
    )
    print(f"Using sigma={optimizer.noise_multiplier:.4f} and C={MAX_GRAD_NORM}")

    criterion = nn.CrossEntropyLoss()
    losses = []
    for epoch in range(1, EPOCHS + 1):
        model.train()
        for images, target in train_loader:
            optimizer.zero_grad()
            output = model(images)
            loss = criterion(output, target)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        epsilon = privacy_engine.get_epsilon(DELTA)
        print(f"Train Epoch: {epoch} \tLoss: {np.mean(losses[-len(train_loader):]):.6f} "
              f"(ε = {epsilon:.2f}, δ = {DELTA})")
    after = test(model, test_loader)
    print(json.dumps(dict(test_loss_before=before, test_loss_after=after, epsilon=privacy_engine.get_epsilon(DELTA),
                          target_epsilon=EPSILON, train_losses=losses)))


if __name__ == "__main__":
    main()
