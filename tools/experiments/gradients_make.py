"""gradients_make.py - `gradients.py make`: train a model non-privately on
Fashion-MNIST and write per-example gradients (python3-torch, functorch vmap
of grad), in batches and chunks so that memory stays bounded."""
import gzip
import json
import os
import time

import numpy as np

from gradients_common import MODELS, Fail, human, log

# ---------------------------------------------------------------- make (torch)

def load_idx(path):
    if not os.path.exists(path):
        raise Fail(f"{path}: missing (install dataset-fashion-mnist: tools/setup, or give --data)")
    with gzip.open(path, "rb") as f:
        raw = f.read()
    magic = int.from_bytes(raw[0:4], "big")
    ndim = magic & 0xFF
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load_fmnist(data_dir):
    out = {}
    for split, stem in (("train", "train"), ("test", "t10k")):
        x = load_idx(os.path.join(data_dir, f"{stem}-images-idx3-ubyte.gz"))
        y = load_idx(os.path.join(data_dir, f"{stem}-labels-idx1-ubyte.gz"))
        x = x.astype(np.float32) / 255.0
        out[split] = (x.reshape(-1, 1, 28, 28), y.astype(np.int64))
    return out


def build_model(name, torch):
    nn = torch.nn
    if name == "logreg":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 10))
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    if name == "cnn":   # 416 + 12 832 + 32 832 + 650 = 46 730 parameters
        return nn.Sequential(nn.Conv2d(1, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(16, 32, 5), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Flatten(), nn.Linear(512, 64), nn.ReLU(), nn.Linear(64, 10))
    raise Fail(f"unknown model {name!r} (logreg, mlp or cnn)")


def per_example_fn(model, torch):
    """Returns f(params, x, y) -> list of per-example gradient tensors (batch first)."""
    try:                                   # torch >= 2.0
        from torch.func import functional_call, grad, vmap
    except ImportError:                    # torch 1.13 (Debian bookworm): functorch
        from functorch import grad, vmap
        from torch.nn.utils.stateless import functional_call
    names = [n for n, _ in model.named_parameters()]
    F = torch.nn.functional

    def loss(params, x, y):
        out = functional_call(model, dict(zip(names, params)), (x.unsqueeze(0),))
        return F.cross_entropy(out, y.unsqueeze(0))

    return vmap(grad(loss), in_dims=(None, 0, 0))


def write_rows(path, fn, params, x, y, d, batch, torch, label):
    """Per-example gradients of (x, y), normalised to unit norm, into a float32 .npy."""
    n = len(y)
    out = np.lib.format.open_memmap(path + ".part", mode="w+", dtype=np.float32, shape=(n, d))
    t0 = time.time()
    last = t0
    zero = 0
    for s in range(0, n, batch):
        xb = torch.from_numpy(x[s:s + batch])
        yb = torch.from_numpy(y[s:s + batch])
        g = fn(params, xb, yb)
        g = torch.cat([t.reshape(t.shape[0], -1) for t in g], dim=1).detach().numpy().astype(np.float32)
        nrm = np.linalg.norm(g, axis=1, keepdims=True)
        zero += int(np.sum(nrm == 0))
        out[s:s + len(g)] = g / np.where(nrm > 0, nrm, 1.0)
        now = time.time()
        if now - last > 5 or s + batch >= n:
            log(f"  {label}: {min(s + batch, n)}/{n} rows, {now - t0:.1f} s")
            last = now
    out.flush()
    del out
    os.replace(path + ".part", path)
    return zero


def cmd_make(a):
    try:
        import torch
    except ImportError:
        raise Fail("python3-torch is missing (tools/setup --experiments)")
    if a.model not in MODELS:
        raise Fail(f"unknown model {a.model!r} (logreg, mlp or cnn)")
    try:
        epochs = sorted({int(e) for e in a.checkpoint_epochs.split(",")})
    except ValueError:
        raise Fail(f"--checkpoint-epochs {a.checkpoint_epochs!r}: want integers separated by commas, e.g. 0,1")
    if epochs[0] < 0 or a.rows < 1 or a.heldout < 1 or a.batch < 1:
        raise Fail("--checkpoint-epochs, --rows, --heldout and --batch must be positive (epochs >= 0)")
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    data = load_fmnist(a.data)
    xtr, ytr = data["train"]
    xte, yte = data["test"]
    if a.rows > len(ytr) or a.heldout > len(yte):
        raise Fail(f"--rows <= {len(ytr)} (training split) and --heldout <= {len(yte)} (test split)")
    model = build_model(a.model, torch)
    sizes = [int(p.numel()) for p in model.parameters()]
    names = [n for n, _ in model.named_parameters()]
    d = sum(sizes)
    assert d == MODELS[a.model], (d, MODELS[a.model])
    per_ckpt = 4 * d * (a.rows + a.heldout)
    ram = 4 * d * a.batch * 3    # the batch's gradients, their float32 copy and the normalised rows
    log(f"make: {a.model} d={d}, {a.rows} training + {a.heldout} held-out rows per checkpoint, "
        f"checkpoints at epochs {epochs}: {human(per_ckpt)} on disk per checkpoint "
        f"({human(per_ckpt * len(epochs))} in all) under {a.out}; RAM ~{human(ram + 200e6)} "
        f"(batches of {a.batch} per-example gradients + the data set)")
    os.makedirs(a.out, exist_ok=True)
    rng = np.random.default_rng(a.seed)
    pick_tr = np.sort(rng.choice(len(ytr), a.rows, replace=False))
    pick_te = np.sort(rng.choice(len(yte), a.heldout, replace=False))
    if a.optimizer == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
        opt_desc = f"SGD lr {a.lr} momentum {a.momentum} batch {a.train_batch}"
    elif a.optimizer == "adam":
        opt = torch.optim.Adam(model.parameters(), lr=a.lr)
        opt_desc = f"Adam lr {a.lr} batch {a.train_batch}"
    else:
        raise Fail(f"unknown optimizer {a.optimizer!r} (sgd or adam)")
    gen = torch.Generator().manual_seed(a.seed)
    F = torch.nn.functional
    xtr_t, ytr_t = torch.from_numpy(xtr), torch.from_numpy(ytr)
    xte_t, yte_t = torch.from_numpy(xte), torch.from_numpy(yte)
    epoch = 0
    written = []
    for target in epochs:
        while epoch < target:
            t0 = time.time()
            model.train()
            perm = torch.randperm(len(ytr), generator=gen)
            for i, s in enumerate(range(0, len(ytr), a.train_batch)):
                idx = perm[s:s + a.train_batch]
                opt.zero_grad()
                F.cross_entropy(model(xtr_t[idx]), ytr_t[idx]).backward()
                opt.step()
            epoch += 1
            with torch.no_grad():
                acc = (model(xte_t).argmax(1) == yte_t).float().mean().item()
            log(f"  trained epoch {epoch}: test accuracy {acc:.4f}, {time.time() - t0:.1f} s")
        with torch.no_grad():
            acc = (model(xte_t).argmax(1) == yte_t).float().mean().item()
        stem = os.path.join(a.out, f"{a.model}-e{epoch}")
        params = [p.detach() for p in model.parameters()]
        fn = per_example_fn(model, torch)
        t0 = time.time()
        z1 = write_rows(stem + "-train.npy", fn, params, xtr[pick_tr], ytr[pick_tr], d, a.batch, torch,
                        f"{a.model} epoch {epoch} train")
        z2 = write_rows(stem + "-heldout.npy", fn, params, xte[pick_te], yte[pick_te], d, a.batch, torch,
                        f"{a.model} epoch {epoch} held-out")
        meta = {"model": a.model, "d": d, "checkpoint_epoch": epoch, "test_accuracy": round(acc, 4),
                "param_names": names, "param_sizes": sizes, "seed": a.seed,
                "rows": a.rows, "heldout": a.heldout, "zero_rows": z1 + z2,
                "train_file": os.path.basename(stem + "-train.npy"),
                "heldout_file": os.path.basename(stem + "-heldout.npy"),
                "train_source": "Fashion-MNIST training split (seeded sample)",
                "heldout_source": "Fashion-MNIST test split (seeded sample)",
                "optimizer": opt_desc, "pixels": "[0, 1] (byte / 255)",
                "rows_normalised": "unit L2 norm (zero gradients stay zero)",
                "seconds": round(time.time() - t0, 1)}
        with open(stem + ".json", "w") as f:
            json.dump(meta, f, indent=1)
        written.append(stem)
        print(f"{stem}-train.npy {stem}-heldout.npy {stem}.json  (d={d}, test accuracy {acc:.4f}, "
              f"{time.time() - t0:.1f} s)")
    return 0
