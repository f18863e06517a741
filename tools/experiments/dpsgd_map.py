#!/usr/bin/python3
"""dpsgd_map.py - where does a private subspace make DP-SGD better?  The
win/loss map over the private data's size n and the total eps.

A CELL is (model, n, eps): Fashion-MNIST, a private training set of the
first n examples of a fixed public permutation of the training split (seed
PERMUTATION_SEED), the last VALIDATION examples of that permutation as the
validation set (every hyper-parameter choice is made on it), the official
test split only for the final report; eps at delta 1e-5, the basis releases
included.  Models (dpsgd_train.MODELS): the tanh CNN (26 010 parameters)
and a 784-512-10 tanh MLP (407 050; 401 920 in one 512 x 784 matrix: wide
enough that a dense covariance is out of reach and the power iteration is
at random level at these budgets, the layer the Kronecker-factored basis
is for; a CNN as wide would take hours a run on 2 cores).

ARMS (dpsgd_train.py): dpsgd (plain DP-SGD), gep-P and proj-P on the
model's private basis P (every release is used, WEAK or not: the CSV
counts the WEAK ones, against the captured energy), gep-noisy (the free basis from released noisy
gradients), gep-random (a lower bound), gep-oracle (NOT private: an upper
bound).

TUNING.  Every arm gets the same TRIALS hyper-parameter trials from GRID,
a Latin-hypercube design seeded by the cell (every value of every key
tried, the keys shuffled independently): trial i's common part (step,
clip, batch rate, epochs) is the same for every arm, and the GEP arms take their
own part (k, the residual clip, and for a private basis its share of the
budget) from a second design.  A trial trains once (seed 0) and is
scored on validation accuracy; the arm's best trial is then trained with
the FINAL_SEEDS seeds and scored on the test split (the final model's
accuracy, never the best epoch's).  Paired by seed, each arm's final
accuracy minus plain DP-SGD's cancels what the seed does to both (initial
weights, sampling, noise).

  run     train the cells given (resumes: a cell's CSV keeps every run, and
          a run in it is not redone), one CSV per cell under OUT
  report  the summary CSV (one line per cell and arm), the README's table
          and the heatmap PNG of (best private-subspace arm - plain DP-SGD)

LONG: a cell is 9 runs per arm; run it in shards (`--shard 0/2` and
`--shard 1/2` with `--threads 1` on 2 cores), each cell's CSV committed as
it completes.
"""
import argparse
import csv
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import numpy as np  # noqa: E402
from dpsgd_train import MODELS, PRIVATE_BASES, arm_parts, keep_freed_memory, parse_shard, train  # noqa: E402

DELTA = 1e-5
NS = (1000, 2000, 5000, 60000)
EPSILONS = (0.5, 1.0, 3.0)
VALIDATION = 5000
PERMUTATION_SEED = 20261127
TRIALS = 6
TUNE_SEED = 0
FINAL_SEEDS = (1, 2, 3)
RELEASES = 5     # basis updates per run (private, oracle)
BASIS_RATE = 0.5  # a private or oracle basis's Poisson sample rate
# The private basis of each model: the mechanism that kept the most held-out energy on its gradients
PRIVATE = {"cnn": "kron", "mlp": "kron"}
# The grid.  step = lr * clip: with every gradient clipped (small clip) the update's size is lr * clip,
# so lr is drawn through it.  rate = batch / n: the batch as a share of the private set (larger batches
# lower the noise over the clip at a given eps).  Placed by a first pass (n 1 000, eps 0.5 and 1, four arms,
# the grid of steps up to 0.4): steps of 0.1 and more diverged in most trials, the best were 0.05 at the largest batch.
GRID = dict(step=(0.0125, 0.025, 0.05, 0.1), clip=(0.1, 1.0), rate=(1 / 16, 1 / 8, 1 / 4), epochs=(10, 20, 40))
GRID_LARGE = dict(GRID, rate=(1 / 64, 1 / 32, 1 / 16), epochs=(5, 10))  # n = 60 000: the lengths that fit
GRID_GEP = dict(k=(10, 20, 40), residual_clip=(0.25, 0.5), share=(0.05, 0.1, 0.2))
FIELDS = ["phase", "model", "n", "eps", "arm", "trial", "seed", "step", "lr", "clip", "batch", "epochs", "k",
          "residual_clip", "share", "val_acc", "test_acc", "eps_spent", "sigma", "noise_to_clip", "params",
          "rho_basis", "basis_releases", "weak_releases", "steps", "train_loss", "captured", "captured_topk", "kept", "snr",
          "snr_embedding", "snr_residual", "private", "wall_s"]


def arms(model):
    p = PRIVATE[model]
    return ("dpsgd", "gep-noisy", "gep-random", "gep-oracle", f"gep-{p}", f"proj-{p}")


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def private_n(n):
    """The private set's size: n, or all the training split but the validation set."""
    return min(n, 60000 - VALIDATION)


def _design(rng, grid):
    """TRIALS points of a Latin-hypercube design over the grid: each key's
    values tiled to TRIALS entries and shuffled on its own, so every value of
    every key is tried (about equally often) and the keys vary independently."""
    cols = {}
    for key, vals in grid.items():
        tiled = list(vals) * math.ceil(TRIALS / len(vals))
        cols[key] = [tiled[i] for i in rng.permutation(len(tiled))[:TRIALS]]
    return [{key: col[t] for key, col in cols.items()} for t in range(TRIALS)]


def trial_hp(model, n, eps, arm, trial):
    """Trial `trial`'s hyper-parameters for an arm of a cell (a dict): the
    common part from the cell's first design, the GEP part from its second
    (the same for every arm of the cell)."""
    cell = [NS.index(n), EPSILONS.index(eps), list(MODELS).index(model)]
    hp = _design(np.random.default_rng([PERMUTATION_SEED, *cell, 0]), GRID_LARGE if n > 5000 else GRID)[trial]
    hp.update(_design(np.random.default_rng([PERMUTATION_SEED, *cell, 1]), GRID_GEP)[trial])
    hp["batch"] = int(round(hp.pop("rate") * private_n(n)))
    hp["lr"] = hp["step"] / hp["clip"]
    mode, basis = arm_parts(arm)
    if basis not in PRIVATE_BASES:
        hp["share"] = ""
    if mode == "dpsgd":
        hp.update(k="", residual_clip="", share="")
    return hp


def load_cell_data(n, torch):
    from gradients_common import DATA_DIR
    from gradients_make import load_fmnist
    data = load_fmnist(DATA_DIR)
    xtr, ytr = data["train"]
    perm = np.random.default_rng(PERMUTATION_SEED).permutation(len(xtr))
    priv, val = perm[:private_n(n)], perm[len(perm) - VALIDATION:]
    t = torch.from_numpy
    return ((t(xtr[priv].copy()), t(ytr[priv].copy())), (t(xtr[val].copy()), t(ytr[val].copy())),
            tuple(t(a.copy()) for a in data["test"]))


def cell_path(out, model, n, eps):
    return os.path.join(out, f"{model}-n{n}-eps{eps:g}.csv")


def read_rows(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return list(csv.DictReader(f))


def append_row(path, row):
    if not os.path.exists(path):
        with open(path + ".new", "w", newline="") as f:
            csv.DictWriter(f, FIELDS).writeheader()
        os.replace(path + ".new", path)
    with open(path, newline="") as f:  # the file's own columns (one written before a column was added has fewer)
        fields = next(csv.reader(f))
    with open(path, "a", newline="") as f:
        csv.DictWriter(f, fields, extrasaction="ignore").writerow(row)


def best_trial(rows, arm):
    """The arm's tuned trial: the highest validation accuracy (ties: the lower trial)."""
    tune = [r for r in rows if r["phase"] == "tune" and r["arm"] == arm]
    if len(tune) < TRIALS:
        return None
    return int(max(tune, key=lambda r: (float(r["val_acc"]), -int(r["trial"])))["trial"])


def run_cell(model, n, eps, out, arm_list, torch, dp):
    path = cell_path(out, model, n, eps)
    data = None
    for arm in arm_list:
        for phase in ("tune", "final"):
            rows = read_rows(path)
            if phase == "tune":
                todo = [(t, TUNE_SEED) for t in range(TRIALS)
                        if not any(r["phase"] == "tune" and r["arm"] == arm and int(r["trial"]) == t for r in rows)]
            else:
                best = best_trial(rows, arm)
                todo = [(best, s) for s in FINAL_SEEDS
                        if not any(r["phase"] == "final" and r["arm"] == arm and int(r["seed"]) == s for r in rows)]
            for trial, seed in todo:
                data = data or load_cell_data(n, torch)
                hp = trial_hp(model, n, eps, arm, trial)
                log(f"{model} n {n} eps {eps:g} {arm} {phase} trial {trial} seed {seed}: "
                    + " ".join(f"{k_} {v}" for k_, v in hp.items() if v != ""))
                train_hp = {k_: v for k_, v in hp.items() if v != ""}
                train_hp.update(releases=RELEASES, basis_rate=BASIS_RATE)
                evals = {"val": data[1]} if phase == "tune" else {"val": data[1], "test": data[2]}
                res, _ = train(model, arm, eps, seed, train_hp, data[0], evals, torch, dp, delta=DELTA,
                               energy_set=data[1])
                row = dict(res, **hp, phase=phase, n=n, eps=eps, trial=trial)
                append_row(path, row)
                log(f"  -> val {res['val_acc']:.4f}" + (f" test {res['test_acc']:.4f}" if phase == "final" else "")
                    + f", eps spent {res['eps_spent']:.3f}, sigma {res['sigma']}, noise/clip {res['noise_to_clip']}, "
                    f"captured {res['captured']} (top-k {res['captured_topk']}), {res['wall_s']} s")
    log(f"cell done: {path}")


def parse_list(s, kind, name, allowed):
    try:
        vals = [kind(v) for v in s.split(",")]
    except ValueError:
        sys.exit(f"dpsgd_map.py: --{name} {s!r} is not a comma-separated list")
    bad = [v for v in vals if v not in allowed]
    if bad:
        sys.exit(f"dpsgd_map.py: --{name}: {', '.join(map(str, bad))} not in the map "
                 f"({', '.join(map(str, allowed))})")
    return vals


def cmd_run(a):
    models = parse_list(a.model, str, "model", tuple(PRIVATE))
    ns = parse_list(a.n, int, "n", NS)
    epss = parse_list(a.eps, float, "eps", EPSILONS)
    shard, shards = parse_shard(a.shard, "dpsgd_map.py")
    keep_freed_memory()
    import torch
    import dpsubspace as dp
    torch.set_num_threads(a.threads)
    os.makedirs(a.out, exist_ok=True)
    cells = [(m, n, e) for m in models for n in ns for e in epss]
    for i, (m, n, e) in enumerate(cells):
        if i % shards != shard:
            continue
        arm_list = arms(m) if not a.arms else parse_list(a.arms, str, "arms", arms(m))
        run_cell(m, n, e, a.out, arm_list, torch, dp)
    return 0


def summarise(out):
    """One dict per (cell, arm) with a complete final phase."""
    lines = []
    for name in sorted(os.listdir(out)):
        if not name.endswith(".csv") or name == "summary.csv":
            continue
        rows = read_rows(os.path.join(out, name))
        if not rows:
            continue
        model, n, eps = rows[0]["model"], int(rows[0]["n"]), float(rows[0]["eps"])
        final = [r for r in rows if r["phase"] == "final"]
        base = {int(r["seed"]): float(r["test_acc"]) for r in final if r["arm"] == "dpsgd"}
        for arm in arms(model):
            fin = [r for r in final if r["arm"] == arm]
            if len(fin) < len(FINAL_SEEDS):
                continue
            acc = [float(r["test_acc"]) for r in fin]
            diff = [float(r["test_acc"]) - base[int(r["seed"])] for r in fin if int(r["seed"]) in base]
            tune = [r for r in rows if r["phase"] == "tune" and r["arm"] == arm]
            r0 = fin[0]
            lines.append(dict(
                model=model, n=n, eps=eps, arm=arm, test_mean=round(float(np.mean(acc)), 4),
                test_sd=round(float(np.std(acc, ddof=1)), 4),
                diff_mean=round(float(np.mean(diff)), 4) if len(diff) == len(acc) else "",
                diff_sd=round(float(np.std(diff, ddof=1)), 4) if len(diff) == len(acc) and len(diff) > 1 else "",
                best_val=max(float(r["val_acc"]) for r in tune), trial=r0["trial"], lr=r0["lr"], clip=r0["clip"],
                batch=r0["batch"], epochs=r0["epochs"], k=r0["k"], residual_clip=r0["residual_clip"],
                share=r0["share"], noise_to_clip=r0["noise_to_clip"], sigma=r0["sigma"],
                captured=round(float(np.mean([float(r["captured"]) for r in fin])), 4)
                if r0["captured"] not in ("", "nan") else "",
                captured_topk=round(float(np.mean([float(r["captured_topk"]) for r in fin])), 4),
                wall_s=round(sum(float(r["wall_s"]) for r in rows if r["arm"] == arm), 1),
                kept=max(int(r["kept"]) for r in fin) if r0["kept"] != "" else "", private=r0["private"]))
    return lines


def cmd_report(a):
    if not os.path.isdir(a.out):
        sys.exit(f"dpsgd_map.py: {a.out}: no such directory (dpsgd_map.py run writes its CSVs there)")
    lines = summarise(a.out)
    if not lines:
        sys.exit(f"dpsgd_map.py: {a.out} has no cell with a complete final phase yet")
    path = os.path.join(a.out, "summary.csv")
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, list(lines[0]))
        w.writeheader()
        w.writerows(lines)
    print(f"wrote {path}")
    print("| model | n | eps | noise/clip | arm | test acc (3 seeds) | minus DP-SGD, paired | captured (top-k) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in lines:
        diff = f"{r['diff_mean']:+.3f} ± {r['diff_sd']:.3f}" if r["arm"] != "dpsgd" and r["diff_sd"] != "" else ""
        cap = f"{r['captured']} ({r['captured_topk']})" if r["captured"] != "" else f"- ({r['captured_topk']})"
        print(f"| {r['model']} | {r['n']} | {r['eps']:g} | {r['noise_to_clip']} | {r['arm']} | "
              f"{r['test_mean']:.3f} ± {r['test_sd']:.3f} | {diff} | {cap} |")
    planner_check(lines)
    if a.png:
        heatmap(lines, a.png)
    return 0


def planner_check(lines):
    """dpsubspace.torch.plan's recommendation in each cell with plain DP-SGD's
    and a private arm's final runs (plain DP-SGD's tuned batch and epochs,
    the private arm's tuned k and share), against the arm that won there:
    the best private arm if its paired difference is above two standard
    errors (2 sd / sqrt(seeds)), else plain DP-SGD (a tie goes to the
    simpler arm).  Prints one line a cell and the count."""
    import torch
    from dpsubspace import torch as dpt
    agree = cells = 0
    for model in PRIVATE:
        for n in NS:
            for e in EPSILONS:
                base = [r for r in lines if (r["model"], r["n"], r["eps"], r["arm"]) == (model, n, e, "dpsgd")]
                priv = best_private(lines, model, n, e)
                mine = [r for r in lines if (r["model"], r["n"], r["eps"]) == (model, n, e)
                        and r["arm"] in (f"gep-{PRIVATE[model]}", f"proj-{PRIVATE[model]}")]
                if not base or not priv or not mine:
                    continue
                b, m = base[0], max(mine, key=lambda r: r["test_mean"])
                plan = dpt.plan(MODELS[model](torch), private_n(n), int(b["batch"]), float(b["epochs"]), e, DELTA,
                                k=int(m["k"]), share=float(m["share"]), basis_rate=BASIS_RATE, releases=RELEASES)
                margin = 2 * (priv["diff_sd"] or 0) / math.sqrt(len(FINAL_SEEDS))
                won = priv["arm"] if priv["diff_mean"] > margin else "dpsgd"
                picked = "dpsgd" if plan.recommendation == "dpsgd" else f"gep-{plan.mechanism}"
                ok = (picked == "dpsgd") == (won == "dpsgd")
                agree += ok
                cells += 1
                print(f"planner {model} n {n} eps {e:g}: noise-to-clip {plan.noise_to_clip:.2f}, predicted kept "
                      f"{plan.kept:.2f} -> {picked}; won: {won} ({'agrees' if ok else 'DISAGREES'})")
    print(f"the planner picked the arm that won in {agree} of {cells} cells")


def best_private(lines, model, n, eps):
    """The private-subspace arm with the highest mean paired difference in a cell, or None."""
    cand = [r for r in lines if r["model"] == model and r["n"] == n and r["eps"] == eps
            and r["arm"] != "dpsgd" and r["private"] == "yes" and r["arm"] != "gep-random" and r["diff_mean"] != ""]
    return max(cand, key=lambda r: r["diff_mean"]) if cand else None


def heatmap(lines, png):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    models = [m for m in PRIVATE if any(r["model"] == m for r in lines)]
    fig, axes = plt.subplots(1, len(models), figsize=(7 * len(models), 5.4), squeeze=False)
    for ax, model in zip(axes[0], models):
        M = np.full((len(NS), len(EPSILONS)), np.nan)
        for i, n in enumerate(NS):
            for j, e in enumerate(EPSILONS):
                b = best_private(lines, model, n, e)
                if b:
                    M[i, j] = b["diff_mean"]
                    name = b["arm"] + (" = DP-SGD\n(no direction kept)" if b["kept"] == 0 else "")
                    oracle = [r for r in lines if (r["model"], r["n"], r["eps"], r["arm"]) == (model, n, e, "gep-oracle")]
                    ax.text(j, i, f"{b['diff_mean']:+.3f} ± {b['diff_sd']:.3f}\n{name}" +
                            (f"\noracle*: {oracle[0]['diff_mean']:+.3f}" if oracle else ""),
                            ha="center", va="center", fontsize=7)
                else:
                    ax.text(j, i, "not run", ha="center", va="center", fontsize=8, color="grey")
        lim = max(0.02, float(np.nanmax(np.abs(M)))) if np.isfinite(M).any() else 0.02
        im = ax.imshow(M, cmap="RdBu", vmin=-lim, vmax=lim, aspect="auto")
        ax.set_xticks(range(len(EPSILONS)))
        ax.set_xticklabels([f"{e:g}" for e in EPSILONS])
        ax.set_yticks(range(len(NS)))
        ax.set_yticklabels([f"{private_n(n)}" for n in NS])
        ax.set_xlabel("total eps (delta 1e-5), basis releases included\n"
                      "* oracle: GEP on the NON-private top-k, an upper bound")
        ax.set_ylabel("private training examples n")
        ax.set_title(f"{model}: best private-subspace arm minus plain DP-SGD\n"
                     "(test accuracy, paired by seed, mean ± sd of 3 seeds; each arm tuned alike)", fontsize=9)
        fig.colorbar(im, ax=ax)
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    print(f"wrote {png}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    default_out = os.path.join(HERE, "results", "dpsgd-map")
    r = sub.add_parser("run", help="train the cells given, one CSV per cell in OUT (resumes)")
    r.add_argument("--model", default=",".join(PRIVATE), help="comma-separated models (default: %(default)s)")
    r.add_argument("--n", default=",".join(map(str, NS)), help="comma-separated n (default: %(default)s)")
    r.add_argument("--eps", default=",".join(f"{e:g}" for e in EPSILONS),
                   help="comma-separated total eps (default: %(default)s)")
    r.add_argument("--arms", help="comma-separated arms (default: every arm of the model)")
    r.add_argument("--out", default=default_out, help="the cells' CSVs (default: %(default)s)")
    r.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    r.add_argument("--shard", help="I/N: only every N-th cell, from the I-th")
    p = sub.add_parser("report", help="summary CSV, table and heatmap of the cells done")
    p.add_argument("--out", default=default_out, help="the cells' CSVs (default: %(default)s)")
    p.add_argument("--png", help="write the heatmap here")
    a = ap.parse_args(argv)
    return cmd_run(a) if a.cmd == "run" else cmd_report(a)


if __name__ == "__main__":
    sys.exit(main())
