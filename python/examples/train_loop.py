#!/usr/bin/env python3
"""train_loop.py - DP-SGD with GEP (dpsubspace.torch) on a basis that a
dps-collector releases, with a stated (eps, delta) for the whole run.

Model: a PyTorch logistic regression (nn.Linear; d = its parameter count):
Fashion-MNIST from Debian's dataset-fashion-mnist (784 -> 10, d = 7 850), or
with --synthetic 4 tight synthetic classes (49 -> 4, d = 200).

Each step draws a Poisson batch (rate batch/n), and DPOptimizer makes the
private gradient: GEP, the per-example gradient's embedding on the latest
basis and its residual clipped and noised apart, added back.  The basis
(dpsubspace.torch.CollectorBasis): at step 0 and every --basis-every steps
the loop draws its OWN Poisson sample of the examples (rate 0.9 t m / n),
sends their clipped gradients to the collector as exactly one epoch of t m
rows -- in slots drawn uniformly at random, zero rows in the others (a sample
larger than that is cut to a random t m of its rows) -- and waits for that
epoch's snapshot.

THE GUARANTEE of the run, printed at the end as (eps, delta): the steps are
Poisson-subsampled Gaussian mechanisms (noise multiplier calibrated so that
the whole run meets --eps at --delta); each basis release is one collector
epoch (--aggregator gaussian or power) made of our sample alone; adding one
example puts it in one free slot drawn at random (every other row keeps its
slot), so the epoch changes in one slot: rho_epoch-zCDP by the collector's
own replace-one statement, for every block of a power epoch too
(dpsubspace.torch.CollectorBasis has the argument).  The accountant
(dpsubspace.Accountant) adds the steps and rho_epoch per release at each
Renyi order.  Assumed: the collector is this run's alone (its open epoch is
empty at the start, which is checked, and no other producer sends while it
runs), its rho_epoch is --basis-rho (checked against every snapshot) and its
aggregator gaussian or power (checked); the data, one example per person;
the initial weights and every setting public; the collector's status
counters and log (its rows_zero reveals the sample's size) seen by the run's
owner only.  The collector's
ledger total is printed beside it: it counts the same releases under
replace-one, and any other job's.

Start a local collector first (plaintext only on ipc:// and loopback):
  dps-collector --d 200 --k 4 --t 60 --m 8 --aggregator gaussian --rho 0.05 --state-dir /tmp/dps-train \
      --cap-rho 20 --insecure-plaintext --ingest ipc:///tmp/dps.in --publish ipc:///tmp/dps.pub --status ipc:///tmp/dps.st
  (Fashion-MNIST: --d 7850 --k 10 --t 100 --m 50 instead of the first line's sizes)
then:  PYTHONPATH=build/python /usr/bin/python3 python/examples/train_loop.py --plaintext --basis-rho 0.05 [--synthetic]
With CURVE (a collector with --server-key and --authorized-keys; keys from dps-keygen):
  train_loop.py --ingest tcp://HOST:7780 --publish tcp://HOST:7781 --status tcp://HOST:7782 \
      --server-key keys/collector.key --key keys/trainer.key_secret
"""
import argparse
import gzip
import math
import os
import sys

import numpy as np
import torch

import dpsubspace as dp
from dpsubspace import Producer, Subscriber, UnconfirmedBatchesError, load_keypair, load_public_key
from dpsubspace import torch as dpt
from dpsubspace.status import query_status

FASHION = "/usr/share/datasets/fashion-mnist"


def load_data(synthetic, rng, noise_sd=0.05):
    """(X_train, y_train, X_test, y_test, classes, source) as torch tensors."""
    if not synthetic and os.path.exists(os.path.join(FASHION, "train-images-idx3-ubyte.gz")):
        def idx(name, offset):
            with gzip.open(os.path.join(FASHION, name)) as f:
                return np.frombuffer(f.read(), np.uint8, offset=offset)
        X = idx("train-images-idx3-ubyte.gz", 16).reshape(-1, 784).astype(np.float32) / 255.0
        y = idx("train-labels-idx1-ubyte.gz", 8).astype(np.int64)
        Xt = idx("t10k-images-idx3-ubyte.gz", 16).reshape(-1, 784).astype(np.float32)[:2000] / 255.0
        yt = idx("t10k-labels-idx1-ubyte.gz", 8).astype(np.int64)[:2000]
        C, src = 10, "Fashion-MNIST"
    else:  # C tight classes: per-example gradients cluster near C directions
        C, p, n = 4, 49, 22000
        means = rng.standard_normal((C, p))
        labels = rng.integers(0, C, n)
        feats = (means[labels] + noise_sd * rng.standard_normal((n, p))).astype(np.float32)
        X, y, Xt, yt = feats[:20000], labels[:20000], feats[20000:], labels[20000:]
        src = "synthetic data"
    T = torch.from_numpy
    return T(np.ascontiguousarray(X)), T(y), T(np.ascontiguousarray(Xt)), T(yt), C, src


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ingest", default="ipc:///tmp/dps.in", help="collector's ingest endpoint (--ingest)")
    ap.add_argument("--publish", default="ipc:///tmp/dps.pub", help="collector's publish endpoint (--publish)")
    ap.add_argument("--status", default="ipc:///tmp/dps.st", help="collector's status endpoint (--status)")
    ap.add_argument("--server-key", help="the collector's .key file (CURVE)")
    ap.add_argument("--key", help="our .key_secret (CURVE); its .key in the collector's --authorized-keys")
    ap.add_argument("--plaintext", action="store_true", help="no CURVE (ipc:// or loopback only)")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--batch", type=int, default=256, help="expected examples per step (Poisson rate batch/n)")
    ap.add_argument("--lr", type=float, default=2.0)
    ap.add_argument("--clip", type=float, default=1.0, help="C, the per-example gradient norm bound")
    ap.add_argument("--eps", type=float, default=8.0, help="the whole run's eps (steps and basis releases)")
    ap.add_argument("--delta", type=float, default=1e-5, help="the whole run's delta")
    ap.add_argument("--basis-every", type=int, default=50, help="steps between basis releases (one at step 0)")
    ap.add_argument("--basis-rho", type=float, required=True,
                    help="the collector's --rho (checked against each snapshot): each release costs that")
    ap.add_argument("--synthetic", action="store_true", help="synthetic data even if Fashion-MNIST is installed")
    ap.add_argument("--seed", type=int, default=None,
                    help="reproducible noise and sampling (NOT private; default: the secure generator)")
    a = ap.parse_args()
    if a.plaintext:
        sec = dict(plaintext=True)
    elif a.server_key and a.key:
        pub, secret = load_keypair(a.key)
        sec = dict(server_public_key=load_public_key(a.server_key), public_key=pub, secret_key=secret)
    else:
        sys.exit("train_loop.py: give --plaintext (local collector) or --server-key and --key (CURVE)")
    if a.basis_every < 1 or a.steps < 1 or a.batch < 1 or not a.basis_rho > 0:
        sys.exit("train_loop.py: --steps, --batch and --basis-every must be >= 1, --basis-rho > 0")
    torch.manual_seed(0 if a.seed is None else a.seed)  # the initial weights (public)
    X, Y, Xt, Yt, C, src = load_data(a.synthetic, np.random.default_rng(0 if a.seed is None else a.seed))
    model = torch.nn.Linear(X.shape[1], C)
    d = sum(p.numel() for p in model.parameters())
    try:
        st = query_status(a.status, 3000, **sec)
    except TimeoutError:
        sys.exit(f"train_loop.py: no collector answers on {a.status}; start one (see --help)")
    if st["d"] != d:
        sys.exit(f"train_loop.py: the collector has d = {st['d']} but the model on {src} has d = {d}: restart it "
                 f"with --d {d} (see --help)")
    start = st
    print(f"{src}: {len(X)} examples, {C} classes, d = {d}; collector k = {st['k']}, "
          f"epoch = {st['epoch_rows']} rows")
    print(f"collector at the start: epoch {start['epoch']} open ({start['rows_in_epoch']} rows in it), "
          f"total spent so far rho {start['rho_total']:g}")
    if start["rows_in_epoch"]:
        sys.exit("train_loop.py: the collector's open epoch already holds rows of another producer; the guarantee "
                 "needs epochs of this run's samples alone (wait for it to close, or use a collector of your own)")
    n, q = len(X), a.batch / len(X)
    releases = math.ceil(a.steps / a.basis_every)
    try:
        sigma = dp.noise_multiplier(a.eps, a.delta, q, a.steps, rho=releases * a.basis_rho)
    except ValueError as e:
        sys.exit(f"train_loop.py: --eps {a.eps:g} cannot hold {releases} basis releases at rho {a.basis_rho:g} "
                 f"each ({e}): lower the collector's --rho, raise --basis-every or --eps")
    print(f"plan: {a.steps} steps at q = {q:.4g} with noise multiplier {sigma:.4g}, {releases} basis releases at "
          f"rho {a.basis_rho:g}: (eps {a.eps:g}, delta {a.delta:g}) for the whole run")

    producer = Producer(a.ingest, d, batch_rows=512, status_endpoint=a.status, **sec)
    sub = Subscriber(a.publish, from_epoch=start["epoch"], **sec)
    if not producer.wait_ready(5000):
        sys.exit(f"train_loop.py: no handshake with the collector on {a.ingest}")
    acct = dp.Accountant()
    basis = dpt.CollectorBasis(producer, sub, X, Y, st["epoch_rows"], a.basis_every, a.basis_rho,
                               first_epoch=start["epoch"])
    loss_fn = torch.nn.functional.cross_entropy
    opt = dpt.DPOptimizer(model, torch.optim.SGD(model.parameters(), lr=a.lr), loss_fn, noise_multiplier=sigma,
                          max_grad_norm=a.clip, sample_rate=q, dataset_size=n, mode="gep", basis=basis,
                          accountant=acct, seed=a.seed)

    def test():
        with torch.no_grad():
            out = model(Xt)
            return float(loss_fn(out, Yt)), float((out.argmax(1) == Yt).float().mean())

    loss, acc = test()
    print(f"step    0  test loss {loss:.4f}  accuracy {acc:.3f}")
    for step, idx in enumerate(dpt.poisson_batches(n, q, a.steps, opt.noise), start=1):
        ix = torch.as_tensor(idx)
        opt.zero_grad()
        try:
            opt.backward(X[ix], Y[ix])
        except (TimeoutError, RuntimeError) as e:  # the collector did not give our epoch's basis
            sys.exit(f"train_loop.py: {e}")
        opt.step()
        if step == 1:
            print(f"warm-up: {st['epoch_rows']} rows sent before the first basis (epoch {sub.latest.epoch})")
        if step % 10 == 0 or step == a.steps:
            loss, acc = test()
            used = "none yet (plain DP-SGD steps)" if basis.V is None else f"epoch {sub.latest.epoch}"
            print(f"step {step:4d}  test loss {loss:.4f}  accuracy {acc:.3f}  basis: {used}  "
                  f"eps so far {acct.get_epsilon(a.delta):.3f}", flush=True)
    try:
        producer.close()  # flush and drain: the collector confirms every batch
    except UnconfirmedBatchesError as e:
        sys.exit(f"train_loop.py: {e}")
    sub.close()
    eps = acct.get_epsilon(a.delta)
    print(f"privacy, this run: (eps {eps:.4g}, delta {a.delta:g}) for the whole run: {a.steps} steps "
          f"(q {q:.4g}, sigma {sigma:.4g}) and {basis.releases} basis releases at rho {a.basis_rho:g} each "
          f"({basis.cut} samples cut to one epoch); {acct.method} accountant")
    end = query_status(a.status, 3000, **sec)
    eps_c = lambda st: f"eps {st['eps_total']:.3g} at delta {st['delta_target']:g}"  # noqa: E731
    print(f"privacy, the collector's ledger total: rho {end['rho_total']:g} ({eps_c(end)}) after "
          f"{end['epoch']} epochs (replace-one, every job's releases)")
    closed = (f"epochs {start['epoch']} to {end['epoch'] - 1} closed while it ran" if end["epoch"] > start["epoch"]
              else "no epoch closed while it ran")
    print(f"privacy, this run's share: rho {end['rho_total'] - start['rho_total']:g} ({closed}; "
          f"{producer.rows_sent} rows sent by it)")


if __name__ == "__main__":
    main()
