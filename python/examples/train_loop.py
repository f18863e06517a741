#!/usr/bin/env python3
"""train_loop.py - attach a training loop to a dps-collector: stream the
per-example gradients to it (Producer) and project each update onto its latest
private subspace (Subscriber): g <- V^T V g.

Model: multinomial logistic regression, W of shape (C, p+1): a gradient has
d = C*(p+1) entries.  Data: Fashion-MNIST from Debian's dataset-fashion-mnist
(d = 10*785 = 7850) when installed, else (or with --synthetic) 4 tight
synthetic classes (d = 4*50 = 200).  numpy by default; --torch computes on
PyTorch tensors (python3-torch) and sends the tensors themselves.

Each step: per-example gradients, clipped to norm --clip, go to the collector
(each row is one unit of privacy there); the step's gradient is their mean
plus N(0, (sigma*clip/batch)^2) noise per coordinate, projected onto the latest
released basis V before W -= lr * g.  Before training, a warm-up streams
gradients of the initial model until the first basis arrives.

Privacy spent: every epoch the collector closes is charged in its ledger,
whoever sent the rows.  At the end the example prints the collector's total
(a status query) and this run's share (the total at the end minus the total
at the start: the epochs closed while it ran, rows of any other producer in
them included); rows of ours still in the open epoch are charged when it
closes.  What one basis cost (its rho_epoch) is not what the run cost.

A collector that ran an earlier job still holds that job's last basis and
sends it to every new subscriber.  The example asks for bases from the epoch
that was open when it started on (--from-epoch, default that epoch) and warns
if the first basis it gets predates the run (--from-epoch 0 takes the
collector's latest basis, whatever made it).

Honest scope: the basis is a DP release, so projecting onto it is
post-processing (no further privacy cost).  The gradient noise here is
illustrative: there is no DP-SGD accountant (sampling, composition over
steps), so the trained weights carry NO stated privacy guarantee.  What to
expect: on the synthetic classes the gradients lie near a 4-dim subspace, the
basis keeps about half of the noisy gradient (a random one would keep
sqrt(k/d) = 14%) and the loss falls.  On Fashion-MNIST the per-example
gradients are not near a 9-dim subspace at the scale of a bucket (m rows):
the buckets disagree, the private basis is close to random (it keeps about
sqrt(9/7850) = 3%) and the loss barely moves.

Start a local collector first (plaintext only on ipc:// and loopback):
  dps-collector --d 200 --k 4 --t 60 --m 32 --state-dir /tmp/dps-train --cap-rho 20 \
      --insecure-plaintext --ingest ipc:///tmp/dps.in --publish ipc:///tmp/dps.pub --status ipc:///tmp/dps.st
  (Fashion-MNIST: --d 7850 --k 9 --t 60 --m 40 instead of the first line's sizes)
then:  PYTHONPATH=build/python python3 python/examples/train_loop.py --plaintext [--synthetic]
With CURVE (a collector with --server-key and --authorized-keys; keys from dps-keygen):
  train_loop.py --ingest tcp://HOST:7780 --publish tcp://HOST:7781 --status tcp://HOST:7782 \
      --server-key keys/collector.key --key keys/trainer.key_secret
"""
import argparse
import gzip
import os
import sys
import time

import numpy as np

from dpsubspace import Producer, Subscriber, UnconfirmedBatchesError, load_keypair, load_public_key
from dpsubspace.status import query_status

FASHION = "/usr/share/datasets/fashion-mnist"


def load_data(synthetic, rng, noise_sd=0.05):
    """(X_train, y_train, X_test, y_test, C) with a bias column appended to X."""
    if not synthetic and os.path.exists(os.path.join(FASHION, "train-images-idx3-ubyte.gz")):
        def idx(name, offset):
            with gzip.open(os.path.join(FASHION, name)) as f:
                return np.frombuffer(f.read(), np.uint8, offset=offset)
        X = idx("train-images-idx3-ubyte.gz", 16).reshape(-1, 784).astype(np.float32) / 255.0
        y = idx("train-labels-idx1-ubyte.gz", 8).astype(np.int64)
        Xt = idx("t10k-images-idx3-ubyte.gz", 16).reshape(-1, 784).astype(np.float32)[:2000] / 255.0
        yt = idx("t10k-labels-idx1-ubyte.gz", 8).astype(np.int64)[:2000]
        C, src = 10, "Fashion-MNIST"
    else:  # C tight classes: per-example gradients (p - e_y) x^T cluster near C directions (k = C)
        C, p, n = 4, 49, 22000
        means = rng.standard_normal((C, p))
        labels = rng.integers(0, C, n)
        feats = (means[labels] + noise_sd * rng.standard_normal((n, p))).astype(np.float32)
        X, y, Xt, yt = feats[:20000], labels[:20000], feats[20000:], labels[20000:]
        src = "synthetic data"
    bias = lambda A: np.hstack([A, np.ones((len(A), 1), np.float32)])  # noqa: E731
    return bias(X), y, bias(Xt), yt, C, src


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ingest", default="ipc:///tmp/dps.in", help="collector's ingest endpoint (--ingest)")
    ap.add_argument("--publish", default="ipc:///tmp/dps.pub", help="collector's publish endpoint (--publish)")
    ap.add_argument("--status", default="ipc:///tmp/dps.st", help="collector's status endpoint (--status)")
    ap.add_argument("--server-key", help="the collector's .key file (CURVE)")
    ap.add_argument("--key", help="our .key_secret (CURVE); its .key in the collector's --authorized-keys")
    ap.add_argument("--plaintext", action="store_true", help="no CURVE (ipc:// or loopback only)")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--batch", type=int, default=64, help="examples per step (rows sent per step)")
    ap.add_argument("--lr", type=float, default=0.5)
    ap.add_argument("--clip", type=float, default=1.0, help="per-example gradient norm bound")
    ap.add_argument("--sigma", type=float, default=1.0, help="noise multiplier (illustrative, see above)")
    ap.add_argument("--synthetic", action="store_true", help="synthetic data even if Fashion-MNIST is installed")
    ap.add_argument("--torch", action="store_true", help="compute with PyTorch tensors")
    ap.add_argument("--seed", type=int, default=0, help="seed of the data order and the illustrative noise")
    ap.add_argument("--from-epoch", type=int, default=None,
                    help="use bases of this epoch on (default: the collector's open epoch at the start, so that "
                         "no earlier job's basis is used; 0: any, the collector's latest included)")
    a = ap.parse_args()
    if a.plaintext:
        sec = dict(plaintext=True)
    elif a.server_key and a.key:
        pub, secret = load_keypair(a.key)
        sec = dict(server_public_key=load_public_key(a.server_key), public_key=pub, secret_key=secret)
    else:
        sys.exit("train_loop.py: give --plaintext (local collector) or --server-key and --key (CURVE)")
    if a.torch:
        import torch  # python3-torch
    rng = np.random.default_rng(a.seed)
    X, y, Xt, yt, C, src = load_data(a.synthetic, rng)
    p1 = X.shape[1]
    d = C * p1
    try:
        st = query_status(a.status, 3000, **sec)
    except TimeoutError:
        sys.exit(f"train_loop.py: no collector answers on {a.status}; start one (see --help)")
    if st["d"] != d:
        sys.exit(f"train_loop.py: the collector has d = {st['d']} but {src} needs d = {d}: restart it with --d {d}"
                 " (see --help)")
    print(f"{src}: {len(X)} examples, {C} classes, d = {d}; collector k = {st['k']}, "
          f"epoch = {st['epoch_rows']} rows ({'torch' if a.torch else 'numpy'})")
    start = st  # the collector when this run started: its open epoch and what it had spent
    from_epoch = start["epoch"] if a.from_epoch is None else a.from_epoch
    print(f"collector at the start: epoch {start['epoch']} open ({start['rows_in_epoch']} rows in it), "
          f"total spent so far rho {start['rho_spent']:g}; using bases of epoch {from_epoch} on")

    if a.torch:
        T = lambda A: torch.from_numpy(np.ascontiguousarray(A))  # noqa: E731
        X, Xt, y, yt = T(X), T(Xt), T(y), T(yt)
        W = torch.zeros(C, p1)
        softmax = lambda Z: torch.softmax(Z, dim=1)  # noqa: E731
        onehot = lambda v: torch.nn.functional.one_hot(v, C).float()  # noqa: E731
        to_np = lambda t: t.detach().cpu().numpy()  # noqa: E731
        gen = torch.Generator().manual_seed(a.seed)
        noise = lambda n, s: s * torch.randn(n, generator=gen)  # noqa: E731
    else:
        T = lambda A: A  # noqa: E731
        W = np.zeros((C, p1), np.float32)

        def softmax(Z):
            E = np.exp(Z - Z.max(axis=1, keepdims=True))
            return E / E.sum(axis=1, keepdims=True)
        onehot = lambda v: np.eye(C, dtype=np.float32)[v]  # noqa: E731
        to_np = lambda t: t  # noqa: E731
        noise = lambda n, s: (s * rng.standard_normal(n)).astype(np.float32)  # noqa: E731

    def loss_acc(W):
        P = softmax(Xt @ W.T)
        loss = -np.log(np.maximum(to_np(P)[np.arange(len(yt)), to_np(yt)], 1e-12)).mean()
        return float(loss), float((to_np(P).argmax(1) == to_np(yt)).mean())

    def clipped_grads(W):
        """Per-example gradients of a random batch, each clipped to norm <= clip: (B, d)."""
        idx = T(rng.integers(0, len(X), a.batch))
        xb, yb = X[idx], y[idx]
        G = ((softmax(xb @ W.T) - onehot(yb))[:, :, None] * xb[:, None, :]).reshape(a.batch, d)
        scale = np.minimum(1.0, a.clip / np.maximum(to_np(G * G).sum(axis=1) ** 0.5, 1e-12)).astype(np.float32)
        return G * T(scale)[:, None]

    producer = Producer(a.ingest, d, batch_rows=a.batch, status_endpoint=a.status, **sec)
    sub = Subscriber(a.publish, from_epoch=from_epoch, **sec)
    if not producer.wait_ready(5000):
        sys.exit(f"train_loop.py: no handshake with the collector on {a.ingest}")
    # A collector that has published before sends its latest snapshot on subscribing: take it (or skip it, by
    # --from-epoch) before our own rows can close an epoch, so that "the first basis" means the same every run.
    end = time.monotonic() + 2
    while start["last_snapshot_seq"] and not sub.last_seq and time.monotonic() < end:
        sub.update()
        time.sleep(0.01)
    # Warm-up: stream gradients at the initial model until the first private basis exists
    # (a collector that already has one sends it on subscribing).
    sent, end = 0, time.monotonic() + 120
    while sub.latest is None and time.monotonic() < end:
        producer.send(clipped_grads(W))
        sent += a.batch
        sub.update()
        time.sleep(0.01)
    if sub.latest is None:
        sys.exit("train_loop.py: no released snapshot within 120 s (is the collector closing epochs?)")
    loss, acc = loss_acc(W)
    print(f"warm-up: {sent} rows sent before the first basis (epoch {sub.latest.epoch})")
    if sub.latest.epoch < start["epoch"]:
        print(f"WARNING: the first basis (epoch {sub.latest.epoch}) predates this run, which started during "
              f"epoch {start['epoch']}: it was learned from rows sent before, by another job or an earlier run",
              file=sys.stderr, flush=True)
    elif sub.latest.epoch == start["epoch"] and start["rows_in_epoch"]:
        print(f"note: the first basis (epoch {sub.latest.epoch}) also used the {start['rows_in_epoch']} rows that "
              f"were in that epoch before this run started")
    print(f"step    0  test loss {loss:.4f}  accuracy {acc:.3f}")
    for step in range(1, a.steps + 1):
        G = clipped_grads(W)
        producer.send(G)                                        # rows to the collector
        g = to_np(G.mean(0) + noise(d, a.sigma * a.clip / a.batch))  # the noisy clipped gradient
        sub.update()                                            # take new snapshots, never blocks
        g_low = sub.project(g).astype(np.float32)               # V^T V g: post-processing
        kept = np.linalg.norm(g_low) / max(np.linalg.norm(g), 1e-12)
        W = W - a.lr * T(g_low).reshape(C, p1)
        if step % 10 == 0 or step == a.steps:
            loss, acc = loss_acc(W)
            print(f"step {step:4d}  test loss {loss:.4f}  accuracy {acc:.3f}  basis: epoch {sub.latest.epoch}"
                  f" (keeps {100 * kept:.0f}% of the noisy gradient's norm)", flush=True)
    try:
        producer.close()  # flush and drain: the collector confirms every batch
    except UnconfirmedBatchesError as e:
        sys.exit(f"train_loop.py: {e}")
    s = sub.latest
    if s is not None:
        print(f"last basis used: epoch {s.epoch}, which cost rho {s.rho_epoch:g} by itself ({s.describe()})")
    sub.close()
    end = query_status(a.status, 3000, **sec)
    eps = lambda st: f"eps {st['eps_spent']:.3g} at delta {st['delta_target']:g}"  # noqa: E731
    print(f"privacy, the collector's ledger total: rho {end['rho_spent']:g} ({eps(end)}) after "
          f"{end['epoch']} epochs")
    closed = (f"epochs {start['epoch']} to {end['epoch'] - 1} closed while it ran" if end["epoch"] > start["epoch"]
              else "no epoch closed while it ran")
    print(f"privacy, this run's share: rho {end['rho_spent'] - start['rho_spent']:g} ({closed}; "
          f"{producer.rows_sent} rows sent by it; rows of other producers in those epochs are included)")
    if end["rows_in_epoch"]:
        print(f"  not yet charged: {end['rows_in_epoch']} rows in the open epoch {end['epoch']}, charged when "
              f"it closes")


if __name__ == "__main__":
    main()
