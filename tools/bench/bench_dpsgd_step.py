#!/usr/bin/python3
"""bench_dpsgd_step.py - the time of one training step of the tanh CNN of
tools/experiments/dpsgd.py (26 010 parameters) on Fashion-MNIST at batch 256,
CPU: the non-private step (the reference, measured in the same run), the
PrivacyEngine's plain DP-SGD step and its GEP step (FixedBasis, k = 10),
each as `optimizer.zero_grad(); criterion(model(x), y).backward();
optimizer.step()` on the same fixed batch; and each one's peak RSS.

    /usr/bin/python3 tools/bench/bench_dpsgd_step.py [--threads 2] [--rounds 5] [--steps 10]

Every (round, mode) runs in its own process (so each peak RSS is that mode's
alone), the modes interleaved round by round; a process times `steps` steps
after 3 of warm-up and reports their median.  Prints each round and the
median over rounds of each mode's time and of the ratios
DP-SGD / non-private and GEP / DP-SGD (ratios taken within a round).
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MODES = ("nonprivate", "dpsgd", "gep")


def one(mode, threads, steps, batch):
    import numpy as np
    import torch
    sys.path.insert(0, os.path.join(HERE, "..", "experiments"))
    from dpsgd import tanh_cnn
    from gradients_common import DATA_DIR
    from gradients_make import load_fmnist
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    xtr, ytr = load_fmnist(DATA_DIR)["train"]
    x, y = torch.from_numpy(xtr[:batch].copy()), torch.from_numpy(ytr[:batch].copy())
    model = tanh_cnn(torch)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    criterion = torch.nn.CrossEntropyLoss()
    if mode != "nonprivate":
        from dpsubspace.torch import FixedBasis, PrivacyEngine
        loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.from_numpy(xtr), torch.from_numpy(ytr)),
                                             batch_size=batch)
        d = sum(p.numel() for p in model.parameters())
        V = np.linalg.qr(np.random.default_rng(0).standard_normal((d, 10)))[0].T if mode == "gep" else None
        model, optimizer, _ = PrivacyEngine().make_private(
            module=model, optimizer=optimizer, data_loader=loader, noise_multiplier=1.0, max_grad_norm=1.0,
            subspace=FixedBasis(V) if mode == "gep" else None)
    times = []
    for i in range(steps + 3):
        t = time.perf_counter()
        optimizer.zero_grad()
        criterion(model(x), y).backward()
        optimizer.step()
        if i >= 3:
            times.append(time.perf_counter() - t)
    return {"mode": mode, "median_s": statistics.median(times),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--one", choices=MODES, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print(json.dumps(one(a.one, a.threads, a.steps, a.batch)))
        return
    import torch
    print(f"torch {torch.__version__}, {a.threads} threads, batch {a.batch}, median of {a.steps} steps a process, "
          f"{a.rounds} rounds", flush=True)
    rows = []
    for r in range(a.rounds):
        got = {}
        for mode in MODES:
            out = subprocess.run([sys.executable, __file__, "--one", mode, "--threads", str(a.threads), "--steps",
                                  str(a.steps), "--batch", str(a.batch)], capture_output=True, text=True, check=True)
            got[mode] = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append(got)
        print(f"round {r + 1}: " + "  ".join(f"{m} {got[m]['median_s'] * 1e3:.1f} ms ({got[m]['peak_rss_mb']:.0f} MB)"
                                             for m in MODES)
              + f"  dpsgd/nonprivate {got['dpsgd']['median_s'] / got['nonprivate']['median_s']:.2f}"
              f"  gep/dpsgd {got['gep']['median_s'] / got['dpsgd']['median_s']:.2f}", flush=True)
    med = lambda f: statistics.median(f(g) for g in rows)  # noqa: E731
    print("| mode | step ms (median of rounds) | peak RSS MB |")
    print("|---|---|---|")
    for m in MODES:
        print(f"| {m} | {med(lambda g: g[m]['median_s']) * 1e3:.1f} | {med(lambda g: g[m]['peak_rss_mb']):.0f} |")
    lo = lambda f: (min(f(g) for g in rows), max(f(g) for g in rows))  # noqa: E731
    r1 = lambda g: g["dpsgd"]["median_s"] / g["nonprivate"]["median_s"]  # noqa: E731
    r2 = lambda g: g["gep"]["median_s"] / g["dpsgd"]["median_s"]  # noqa: E731
    print(f"DP-SGD / non-private: {med(r1):.2f} (rounds {lo(r1)[0]:.2f}-{lo(r1)[1]:.2f});  "
          f"GEP / DP-SGD: {med(r2):.2f} (rounds {lo(r2)[0]:.2f}-{lo(r2)[1]:.2f})")


if __name__ == "__main__":
    main()
