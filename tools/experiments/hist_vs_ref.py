#!/usr/bin/python3
"""Histogram aggregator (Singhal-Steinke DPASE) vs the reference-point
aggregator (SS_Agg + WFC) on the paper's generator, subspace only.

Three sweeps, 10 repetitions each (k = 4, t = 125, n = 250k, q = 10k,
rho = 2 per release, delta = 1e-5; histogram: eps = sqrt(2 rho) = 2):
  A  d in {100, 400, 1000, 4000}, tau = 10 d (Figure 2's setting), default width
  B  d = 400, tau/d in {10, 1e2, ..., 1e6}, default width
  C  d = 400, tau/d in {1e3, 1e4, 1e5}, cell side l = F sqrt(k/d) for
     F in {0.03, 0.1, 0.25, 0.5, 1, 2}: how the default F = 0.25 was chosen
Writes out/hist-vs-ref/{raw.csv, summary.csv, pairs.csv, hist-vs-ref.png, log.txt}.
The "pairs" diagnostic (not private, first repetition): for 20 pairs of
buckets of the same epoch, ||y_a - y_b||_1 / l and the probability that the
two items share a cell.

Usage: /usr/bin/python3 tools/experiments/hist_vs_ref.py [--bin PATH] [--reps R]
"""
import argparse
import csv
import io
import os
import re
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import REPO, DEFAULT_BUILD, trimmed_mean, fnum  # noqa: E402

OUT = os.path.join(REPO, "out", "hist-vs-ref")


def find_bin(path):
    if path:
        return path
    exe = os.path.join(DEFAULT_BUILD, "tools", "experiments", "dps-histvsref")
    if not os.access(exe, os.X_OK):
        print(f"building dps-histvsref in {DEFAULT_BUILD} ...", flush=True)
        subprocess.run(["cmake", "-S", REPO, "-B", DEFAULT_BUILD, "-DCMAKE_BUILD_TYPE=Release"], check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run(["cmake", "--build", DEFAULT_BUILD, "-j2", "--target", "dps-histvsref"], check=True,
                       stdout=subprocess.DEVNULL)
    return exe


PAIR_RE = re.compile(r"# pairs d=(\d+) k=(\d+) tau/d=(\S+) width_frac=(\S+) l=(\S+): mean \|\|y_a - y_b\|\|_1 / l = "
                     r"(\S+), mean P\[same cell\] = (\S+) over")


def run(exe, args, log):
    cmd = [exe] + [str(a) for a in args]
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, check=True)
    log.write(f"$ {' '.join(cmd)}  ({time.time() - t0:.1f} s)\n{p.stderr}")
    rows = list(csv.DictReader(io.StringIO(p.stdout)))
    pairs = [dict(zip(["d", "k", "tau_over_d", "width_frac", "l", "l1_over_l", "p_same"], m.groups()))
             for m in PAIR_RE.finditer(p.stderr)]
    return rows, pairs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin")
    ap.add_argument("--reps", type=int, default=10)
    a = ap.parse_args()
    exe = find_bin(a.bin)
    os.makedirs(OUT, exist_ok=True)
    points = []
    for d in (100, 400, 1000, 4000):
        points.append(("A", d, 10, 0.25))
    for tod in (10, 1e2, 1e3, 1e4, 1e5, 1e6):
        points.append(("B", 400, tod, 0.25))
    for tod in (1e3, 1e4, 1e5):
        for f in (0.03, 0.1, 0.25, 0.5, 1, 2):
            points.append(("C", 400, tod, f))
    raw, pairs, t0 = [], [], time.time()
    with open(os.path.join(OUT, "log.txt"), "w") as log:
        for sweep, d, tod, f in points:
            rows, pr = run(exe, ["--d", d, "--tau-over-d", tod, "--width-frac", f, "--reps", a.reps, "--pairs", 20,
                                 "--seed", 1], log)
            for r in rows:
                r["sweep"] = sweep
                r["point_frac"] = f
            for p in pr:
                p["sweep"] = sweep
            raw += rows
            pairs += pr
            print(f"{sweep} d={d} tau/d={tod:g} F={f:g}: done ({time.time() - t0:.0f} s)", flush=True)
        log.write(f"total {time.time() - t0:.1f} s\n")
    keys = ["sweep", "point_frac", "d", "k", "tau_over_d", "width_frac", "rep", "aggregator", "sin", "status", "w_hat", "radius",
            "seconds"]
    with open(os.path.join(OUT, "raw.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(raw)
    with open(os.path.join(OUT, "pairs.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["sweep", "d", "k", "tau_over_d", "width_frac", "l", "l1_over_l", "p_same"])
        w.writeheader()
        w.writerows(pairs)
    # summary: per (sweep, d, tau/d, F, aggregator): fail rate, trimmed mean and median of sin over releases
    summ = []
    for sweep, d, tod, f in points:
        pr = [p for p in pairs if p["sweep"] == sweep and int(p["d"]) == d and float(p["tau_over_d"]) == tod
              and float(p["width_frac"]) == f]
        for agg in ("reference", "histogram"):
            rs = [r for r in raw if r["sweep"] == sweep and int(r["d"]) == d and float(r["tau_over_d"]) == tod
                  and r["aggregator"] == agg and r["point_frac"] == f]
            sins = [fnum(r["sin"]) for r in rs if r["status"] == "ok"]
            summ.append({"sweep": sweep, "d": d, "tau_over_d": tod, "width_frac": f if agg == "histogram" else "",
                         "aggregator": agg, "reps": len(rs),
                         "fail_rate": sum(r["status"] != "ok" for r in rs) / max(1, len(rs)),
                         "sin_trimmed_mean": trimmed_mean(sins), "sin_median": float(np.median(sins)) if sins else
                         float("nan"),
                         "seconds_mean": float(np.mean([fnum(r["seconds"]) for r in rs])),
                         "pair_l1_over_l": pr[0]["l1_over_l"] if pr and agg == "histogram" else "",
                         "pair_p_same_cell": pr[0]["p_same"] if pr and agg == "histogram" else ""})
    with open(os.path.join(OUT, "summary.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(summ[0].keys()))
        w.writeheader()
        w.writerows(summ)
    plot(summ)
    print(f"wrote {OUT}/ in {time.time() - t0:.0f} s")


def plot(summ):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(1, 3, figsize=(15, 4.2))

    def sel(sweep, agg, **kw):
        return [s for s in summ if s["sweep"] == sweep and s["aggregator"] == agg
                and all(s[k] == v for k, v in kw.items())]

    for agg, mk in (("reference", "o-"), ("histogram", "s-")):
        S = sel("A", agg)
        x = [np.sqrt(s["d"]) for s in S]
        ax[0].plot(x, [s["sin_trimmed_mean"] for s in S], mk, label=f"{agg}: sin (released)")
        ax[0].plot(x, [s["fail_rate"] for s in S], mk.replace("-", ":"), alpha=0.6, label=f"{agg}: FAIL rate")
        S = sel("B", agg)
        x = [s["tau_over_d"] for s in S]
        ax[1].plot(x, [s["sin_trimmed_mean"] for s in S], mk, label=f"{agg}: sin (released)")
        ax[1].plot(x, [s["fail_rate"] for s in S], mk.replace("-", ":"), alpha=0.6, label=f"{agg}: FAIL rate")
    for tod, c in ((1e3, "C0"), (1e4, "C1"), (1e5, "C2")):
        S = sel("C", "histogram", tau_over_d=tod)
        x = [s["width_frac"] for s in S]
        ax[2].plot(x, [s["sin_trimmed_mean"] for s in S], "s-", color=c, label=f"tau/d={tod:g}: sin")
        ax[2].plot(x, [s["fail_rate"] for s in S], "s:", color=c, alpha=0.6, label=f"tau/d={tod:g}: FAIL rate")
    ax[0].set_xlabel("sqrt(d)  (tau = 10 d)")
    ax[1].set_xlabel("tau / d  (d = 400)")
    ax[1].set_xscale("log")
    ax[2].set_xlabel("cell side / sqrt(k/d)  (histogram, d = 400)")
    ax[2].set_xscale("log")
    for x_ in ax:
        x_.set_yscale("symlog", linthresh=1e-4)
        x_.set_ylim(0, 1.5)
        x_.set_ylabel("sin(largest angle) to truth / FAIL rate")
        x_.legend(fontsize=7)
        x_.grid(alpha=0.3)
    ax[0].set_title("Figure 2 data: histogram fails at every d")
    ax[1].set_title("nearly exact subspaces: where the histogram works")
    ax[2].set_title("choice of the cell side")
    fig.suptitle("histogram (SS21 DPASE, eps = sqrt(2 rho) = 2) vs reference aggregator (rho = 2), "
                 "k = 4, t = 125, q = 40, delta = 1e-5; trimmed mean over releases")
    fig.tight_layout()
    fig.savefig(os.path.join(OUT, "hist-vs-ref.png"), dpi=110)


if __name__ == "__main__":
    main()
