#!/usr/bin/python3
"""kron_levels.py - is a kron release's noise level what it keeps?  The level's prediction against the measure.

For each model, release size n, rank k_g and rho: one kron release (SubspaceEstimator(mechanism="kron"), the
weight tensors shaped out x in as kron_table.SHAPES, the biases as dense groups, k_g = min(K, d_g)) of the first
n training rows of DATA/MODEL-e1-train.npy, with two noise seeds, and the same release at rho 1e6 (its noise
negligible: the mechanism's noise-free basis).  The level is about the sine to the noise-free basis, so one minus
its square predicts the share of the noise-free basis's held-out energy that the release keeps (noise_level.c).
Measured on the 2 000 held-out rows: each kron group's captured energy on its own block over the noise-free
release's ("kept"), against 1 - level_g^2 ("predicted"); and for the whole release, the groups that enter its
level (k_g < d_g) summed the same way, against 1 - level^2 and its WEAK flag (level >= DPS_NOISE_LEVEL_WEAK 0.75,
i.e. predicted < 0.4375).  Writes the CSV (--csv) and prints a markdown table and the counts: mean |predicted -
kept|, and WEAK against "kept < 0.4375".

    PYTHONPATH=build/python tools/experiments/kron_levels.py --data DATA [--models cnn,mlp] [--n 1000,2500,5000]
        [--k 10,40] [--rhos 0.01,0.03,0.1] [--csv tools/experiments/results/kron-levels.csv]
"""
import argparse
import csv
import json
import os
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from kron_table import SHAPES  # noqa: E402

NOISE_FREE = 1e6
SEEDS = (1, 2)


def shapes_of(model):
    """kron_table's shape string as group_shapes: (r, c) or None per group."""
    return [tuple(int(v) for v in s.split("x")) if "x" in s else None for s in SHAPES[model].split(",")]


def captured_per_group(H, V, starts):
    """Each group's held-out energy on its own block of the basis V."""
    out = []
    for g in range(len(starts) - 1):
        a, b = starts[g], starts[g + 1]
        B = V[:, a:b]
        B = B[np.linalg.norm(B, axis=1) > 0]
        out.append(float(((H[:, a:b] @ B.T.astype(np.float64)) ** 2).sum()))
    return np.array(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--data", required=True, help="directory of gradients.py make's rows (MODEL-e1-*.npy, .json)")
    p.add_argument("--models", default="cnn,mlp")
    p.add_argument("--n", default="1000,2500,5000", help="release sizes: the first n training rows")
    p.add_argument("--k", default="10,40", help="k_g values (capped at each group's width)")
    p.add_argument("--rhos", default="0.01,0.03,0.1")
    p.add_argument("--csv", help="write the rows here too")
    a = p.parse_args(argv)
    import dpsubspace as dp
    from dpsubspace.subscriber import NOISE_LEVEL_WEAK as WEAK
    models = a.models.split(",")
    for model in models:
        if model not in SHAPES:
            p.error(f"--models: {model!r} has no kron shapes (kron_table.SHAPES: {', '.join(SHAPES)})")
        for f in (f"{model}-e1.json", f"{model}-e1-train.npy", f"{model}-e1-heldout.npy"):
            if not os.path.exists(os.path.join(a.data, f)):
                p.error(f"{os.path.join(a.data, f)}: no such file (gradients.py make --model {model} --heldout 2000 "
                        f"--out {a.data})")
    try:
        ns, ks, rhos = ([kind(v) for v in arg.split(",")] for kind, arg in ((int, a.n), (int, a.k), (float, a.rhos)))
    except ValueError as e:
        p.error(f"--n, --k and --rhos are comma-separated numbers: {e}")
    if min(ns) < 1 or min(ks) < 1 or min(rhos) <= 0:
        p.error("--n and --k must be >= 1 and --rhos > 0")
    rows = []
    print("| model | n | k_g | rho | seed | group | level | predicted | kept | WEAK |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for model in models:
        meta = json.load(open(os.path.join(a.data, f"{model}-e1.json")))
        sizes, shapes = meta["param_sizes"], shapes_of(model)
        if len(sizes) != len(shapes):
            sys.exit(f"kron_levels.py: {model}: {len(sizes)} tensors in the data, {len(shapes)} shapes")
        starts = np.cumsum([0] + sizes)
        X = np.load(os.path.join(a.data, f"{model}-e1-train.npy"), mmap_mode="r")
        H = np.load(os.path.join(a.data, f"{model}-e1-heldout.npy")).astype(np.float64)
        H /= np.maximum(np.linalg.norm(H, axis=1, keepdims=True), 1e-30)
        for n in ns:
            if n > X.shape[0]:
                sys.exit(f"kron_levels.py: --n {n}: {model}'s data has {X.shape[0]} training rows")
            Xn = np.array(X[:n], dtype=np.float32)
            for K in ks:
                gk = [min(K, s) for s in sizes]
                kw = dict(mechanism="kron", groups=sizes, group_components=gk, group_shapes=shapes)
                free = captured_per_group(H, dp.SubspaceEstimator(sum(gk), rho=NOISE_FREE, seed=1, **kw)
                                          .fit(Xn).releases_[-1].basis, starts)
                enter = [g for g in range(len(sizes)) if gk[g] < sizes[g]]
                for rho in rhos:
                    for seed in SEEDS:
                        r = dp.SubspaceEstimator(sum(gk), rho=rho, seed=seed, **kw).fit(Xn).releases_[-1]
                        cap = captured_per_group(H, r.basis, starts)
                        lines = [(f"{shapes[g][0]}x{shapes[g][1]}", r.group_noise_level[g], cap[g] / free[g],
                                  r.group_weak[g]) for g in range(len(sizes)) if shapes[g]]
                        lines.append(("all", r.noise_level, cap[enter].sum() / free[enter].sum(), r.weak))
                        for group, lv, kept, weak in lines:
                            row = dict(model=model, n=n, k_g=K, rho=rho, seed=seed, group=group,
                                       level=round(lv, 4), predicted=round(1 - lv * lv, 4), kept=round(kept, 4),
                                       weak=int(weak))
                            rows.append(row)
                            print(f"| {model} | {n} | {K} | {rho:g} | {seed} | {group} | {lv:.3f} | "
                                  f"{1 - lv * lv:+.2f} | {kept:.2f} | {'W' if weak else '-'} |", flush=True)
    if a.csv:
        with open(a.csv, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    for what in ("group", "all"):
        sel = [r for r in rows if (r["group"] == "all") == (what == "all")]
        err = [r["predicted"] - r["kept"] for r in sel]
        should = [r["kept"] < 1 - WEAK ** 2 for r in sel]
        agree = sum(bool(r["weak"]) == s for r, s in zip(sel, should))
        print(f"{'kron groups' if what == 'group' else 'releases'}: {len(sel)}; predicted - kept: mean "
              f"{np.mean(err):+.3f}, mean |.| {np.mean(np.abs(err)):.3f}, range {min(err):+.2f} .. {max(err):+.2f}; "
              f"WEAK agrees with kept < {1 - WEAK ** 2:.4f} in {agree} of {len(sel)} "
              f"(WEAK but kept more: {sum(bool(r['weak']) and not s for r, s in zip(sel, should))}; "
              f"kept less, not WEAK: {sum(s and not r['weak'] for r, s in zip(sel, should))})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
