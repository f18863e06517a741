#!/usr/bin/python3
"""dpsgd.py - does a private subspace help DP-SGD?  (issue 12 item 5)

Fashion-MNIST, the tanh CNN of Papernot et al. 2021 / Tramer-Boneh 2021
(26 010 parameters), trained with dpsubspace.torch at a total (eps, 1e-5)
that INCLUDES the basis releases; one row per way of getting the gradient,
an arm of dpsgd_train.py (which says what each is): dpsgd, gep-oracle,
gep-noisy, gep-power, gep-groups, proj-power, gep-random.

Hyper-parameters are Tramer-Boneh's published ones for this model and data
(SGD, momentum 0.9, lr 4, batch 2048, C 0.1), the same for every row, and
GEP's (k, C_r = C/2, the basis's share of the budget) fixed beforehand: no
row is tuned on this data, so every row had the same tuning budget (none).
sigma is calibrated per row so that the steps plus the basis releases spend
exactly the target eps (dpsubspace.noise_multiplier).  The test accuracy is
the FINAL model's, never the best epoch's.

Settings: smoke (in tools/check: 5 000 examples, 60 steps, two rows;
asserts only what must hold; ~35 s), quick (12 min on 2 cores shared with two other runs: eps 4, one seed,
2 epochs, the rows dpsgd, gep-oracle, gep-noisy, gep-power), full (LONG,
2-6 min a run, 84 runs, about 3.5 hours as two processes on 2 cores:
`--threads 1 --shard 0/2` and `--shard 1/2`; eps 1, 2, 4, 8, 3 seeds, 5
epochs, every row; appends to the CSV and skips what is done, so it can be
stopped and resumed; seed 0 of every eps first).  `report` turns a CSV into
the README's table (mean and spread) and a PNG.
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
from dpsgd_train import arm_parts, keep_freed_memory, parse_shard, train  # noqa: E402

ROWS = ("dpsgd", "gep-oracle", "gep-noisy", "gep-power", "gep-groups", "proj-power", "gep-random")
FIELDS = ["setting", "row", "eps_target", "seed", "eps_spent", "delta", "sigma", "rho_basis", "basis_releases",
          "epochs", "steps", "n_train", "k", "test_acc", "train_loss", "captured", "captured_topk", "wall_s",
          "snr", "snr_embedding", "snr_residual", "private", "note", "model"]
SETTINGS = {
    "smoke": dict(eps=[4.0], seeds=1, epochs=None, steps=60, n_train=5000, batch=256, rows=["dpsgd", "gep-power"],
                  basis_every_epochs=None, basis_releases=2, basis_rate=0.5, test_rows=1000),
    "quick": dict(eps=[4.0], seeds=1, epochs=2, steps=None, n_train=60000, batch=2048,
                  rows=["dpsgd", "gep-oracle", "gep-noisy", "gep-power"],
                  basis_every_epochs=1, basis_releases=None, basis_rate=0.5, oracle_rate=0.1, test_rows=10000),
    "full": dict(eps=[1.0, 2.0, 4.0, 8.0], seeds=3, epochs=5, steps=None, n_train=60000, batch=2048, rows=list(ROWS),
                 basis_every_epochs=1, basis_releases=None, basis_rate=0.5, oracle_rate=0.25, test_rows=10000),
}
DELTA = 1e-5
LR, CLIP = 4.0, 0.1   # Tramer-Boneh 2021, Fashion-MNIST CNN (SGD, momentum dpsgd_train.MOMENTUM)
K = 10
MODEL = "cnn"  # or "logreg" (--model): 784 -> 10, d = 7 850, where a private basis is affordable
GEP = dict(embedding_clip=1.0, residual_clip=0.5, embedding_share=None)  # C_e, C_r as fractions of C; a (None: the rule)
BASIS_SHARE = 0.1  # of the budget in rho units, for rows whose basis costs privacy
# The private basis's sample rate, chosen from the privacy arithmetic alone (PrivateBasis.rho_for_share): at a fixed cost
# the basis's signal over its noise goes as (rows) sqrt(rho); with 5 releases at 10% of the budget that
# is 1 054 / 1 588 / 1 680 / 1 731 at rate 0.05 / 0.25 / 0.5 / 1 for eps 1, and 2 890 / 7 957 / 10 341 /
# 12 241 for eps 8: amplification by sampling does not pay for the rows it leaves out, so the rate is
# high; 0.5 is within 3-15% of all rows at half the per-example gradients.


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def run_one(cfg, setting, row, eps, seed, data, torch, dp):
    """Train one model (dpsgd_train.train at this file's fixed settings);
    returns the CSV row (a dict) and the optimizer."""
    mode, _ = arm_parts(row)
    hp = dict(lr=LR, batch=cfg["batch"], epochs=cfg["epochs"], steps=cfg["steps"], clip=CLIP, k=K,
              share=BASIS_SHARE, embedding_clip=GEP["embedding_clip"], residual_clip=GEP["residual_clip"],
              embedding_share=GEP["embedding_share"], every_epochs=cfg["basis_every_epochs"],
              releases=cfg["basis_releases"],
              basis_rate=cfg.get("oracle_rate", cfg["basis_rate"]) if row == "gep-oracle" else cfg["basis_rate"])
    res, opt = train(MODEL, row, eps, seed, hp, data[0], {"test": data[1]}, torch, dp, delta=DELTA, log=log)
    out = dict(res, setting=setting, row=row,
               note=" ".join(([f"kept {res['kept']} directions"] if row == "gep-noisy" else []) +
                             ([f"C_e {GEP['embedding_clip']:g}C C_r {GEP['residual_clip']:g}C a "
                               f"{GEP['embedding_share'] or 'rule'}"] if mode != "dpsgd" else [])))
    return out, opt


def load(cfg, torch):
    from gradients_make import load_fmnist
    from gradients_common import DATA_DIR
    data = load_fmnist(DATA_DIR)
    xtr, ytr = data["train"]
    xte, yte = data["test"]
    n, m = cfg["n_train"], cfg["test_rows"]
    return ((torch.from_numpy(xtr[:n].copy()), torch.from_numpy(ytr[:n].copy())),
            (torch.from_numpy(xte[:m].copy()), torch.from_numpy(yte[:m].copy())))


def cmd_run(a):
    global K, MODEL
    K, MODEL = a.k, a.model
    GEP.update(embedding_clip=a.embedding_clip, residual_clip=a.residual_clip, embedding_share=a.embedding_share)
    if not (GEP["embedding_clip"] > 0 and GEP["residual_clip"] > 0) or \
            (a.embedding_share is not None and not 0 < a.embedding_share < 1):
        sys.exit("dpsgd.py: --embedding-clip and --residual-clip must be > 0, --embedding-share in (0, 1)")
    keep_freed_memory()
    import torch
    import dpsubspace as dp
    torch.set_num_threads(a.threads)
    cfg = dict(SETTINGS[a.setting])
    if a.eps:
        try:
            cfg["eps"] = [float(e) for e in a.eps.split(",")]
        except ValueError:
            sys.exit(f"dpsgd.py: --eps {a.eps!r} is not a comma-separated list of numbers")
        if not all(e > 0 and math.isfinite(e) for e in cfg["eps"]):
            sys.exit(f"dpsgd.py: every --eps must be positive and finite, got {a.eps}")
    if a.rows:
        bad = [r for r in a.rows.split(",") if r not in ROWS]
        if bad:
            sys.exit(f"dpsgd.py: unknown rows {', '.join(bad)}; choose from {', '.join(ROWS)}")
        cfg["rows"] = a.rows.split(",")
    if a.seeds:
        cfg["seeds"] = a.seeds
    if a.epochs:
        cfg["epochs"], cfg["steps"] = a.epochs, None
    shard, shards = parse_shard(a.shard, "dpsgd.py")
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, f"dpsgd-{a.setting}.csv")
    done = set()
    if a.setting == "smoke" and os.path.exists(path):
        os.remove(path)  # a test: every run anew
    if os.path.exists(path):
        with open(path) as f:
            done = {(r["row"], float(r["eps_target"]), int(r["seed"])) for r in csv.DictReader(f)}
    if not os.path.exists(path):  # the header before any run, so that shards never both write it
        with open(path + ".new", "w", newline="") as f:
            csv.DictWriter(f, FIELDS).writeheader()
        os.replace(path + ".new", path)
    data = load(cfg, torch)
    failures, checks = [], 0
    plan = [(seed, eps, row) for seed in range(cfg["seeds"])  # every eps of seed 0 first: a partial run covers them
            for eps in cfg["eps"] for row in cfg["rows"]]
    for i, (seed, eps, row) in enumerate(plan):
        if (row, eps, seed) in done or i % shards != shard:
            continue
        log(f"{row} eps {eps:g} seed {seed} ({a.setting})")
        out, opt = run_one(cfg, a.setting, row, eps, seed, data, torch, dp)
        log(f"  -> test acc {out['test_acc']:.4f}, eps spent {out['eps_spent']:.3f}, sigma {out['sigma']}, "
            f"captured {out['captured']} (top-{K} {out['captured_topk']}), {out['wall_s']} s")
        with open(path, newline="") as f:  # append in the file's own columns (an older CSV may have fewer)
            fields = next(csv.reader(f))
        with open(path, "a", newline="") as f:  # one short line: whole even with another shard appending
            csv.DictWriter(f, fields, extrasaction="ignore").writerow(out)
        if a.setting == "smoke":
            n, fails = smoke_checks(out, opt, torch)
            checks += n
            failures += fails
    if a.setting == "smoke":
        print(f"{checks - len(failures)} passed, {len(failures)} failed")
        for f_ in failures:
            print("FAIL:", f_)
        return 1 if failures else 0
    log(f"done: {path}")
    return 0


def smoke_checks(out, opt, torch):
    """What must hold in any run (3 checks for plain DP-SGD, 5 with a basis): the accountant's eps is the
    target (sigma was calibrated to 0.1%: eps within 1% of it, never above by
    more); the losses are finite; the basis in use is orthonormal; the model
    learned something (test accuracy above chance, 0.1, by 10 sd of a
    chance-level classifier on 1 000 examples: 0.1 + 10 * sqrt(0.09 / 1000)).
    Returns (checks made, failures)."""
    fails = []
    if not (out["eps_spent"] <= out["eps_target"] * 1.001 and out["eps_spent"] >= out["eps_target"] * 0.99):
        fails.append(f"{out['row']}: eps spent {out['eps_spent']} vs target {out['eps_target']}")
    if not math.isfinite(out["train_loss"]):
        fails.append(f"{out['row']}: train loss {out['train_loss']}")
    V = getattr(opt.basis, "V", None)
    if V is not None and not torch.allclose(V @ V.T, torch.eye(V.shape[0]), atol=1e-4):
        fails.append(f"{out['row']}: basis not orthonormal")
    if out["row"] != "dpsgd" and V is None:
        fails.append(f"{out['row']}: no basis was released")
    if not out["test_acc"] > 0.1 + 10 * math.sqrt(0.09 / 1000):
        fails.append(f"{out['row']}: test accuracy {out['test_acc']} at chance level")
    return (3 if out["row"] == "dpsgd" else 5), fails


def cmd_report(a):
    if not os.path.exists(a.csv):
        sys.exit(f"dpsgd.py: {a.csv}: no such file (dpsgd.py run writes OUT/dpsgd-SETTING.csv)")
    with open(a.csv) as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f"dpsgd.py: {a.csv} has no runs")
    eps_list = sorted({float(r["eps_target"]) for r in rows})
    names = [r for r in ROWS if any(x["row"] == r for x in rows)]
    lines = ["| row | " + " | ".join(f"eps {e:g}" for e in eps_list) + " | captured (top-10) | wall s |",
             "|---|" + "---|" * (len(eps_list) + 2)]
    stats = {}
    for name in names:
        cells = []
        for e in eps_list:
            acc = [float(r["test_acc"]) for r in rows if r["row"] == name and float(r["eps_target"]) == e]
            stats[(name, e)] = acc
            if acc:
                cells.append(f"{np.mean(acc):.3f} ± {np.std(acc):.3f} (n={len(acc)})" if len(acc) > 1
                             else f"{acc[0]:.3f} (n=1)")
            else:
                cells.append("")
        mine = [r for r in rows if r["row"] == name]
        cap = [float(r["captured"]) for r in mine if r["captured"] not in ("", "nan")]
        top = [float(r["captured_topk"]) for r in mine]
        wall = np.mean([float(r["wall_s"]) for r in mine])
        cap_s = f"{np.mean(cap):.3f} ({np.mean(top):.3f})" if cap else f"- ({np.mean(top):.3f})"
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {cap_s} | {wall:.0f} |")
    # paired by seed: each row's accuracy minus plain DP-SGD's in the same (eps, seed), which cancels
    # what the seed does to both (the initial weights are the seed's; the noise and sampling too)
    base = {(float(r["eps_target"]), int(r["seed"])): float(r["test_acc"]) for r in rows if r["row"] == "dpsgd"}
    diffs = {}
    if base:
        lines += ["", "accuracy minus plain DP-SGD's, paired by seed (mean ± sd over seeds):", "",
                  "| row | " + " | ".join(f"eps {e:g}" for e in eps_list) + " |", "|---|" + "---|" * len(eps_list)]
        for name in names:
            if name == "dpsgd":
                continue
            cells = []
            for e in eps_list:
                dif = [float(r["test_acc"]) - base[(e, int(r["seed"]))] for r in rows
                       if r["row"] == name and float(r["eps_target"]) == e and (e, int(r["seed"])) in base]
                diffs[(name, e)] = dif
                cells.append(f"{np.mean(dif):+.3f} ± {np.std(dif):.3f} (n={len(dif)})" if len(dif) > 1
                             else f"{dif[0]:+.3f} (n=1)" if dif else "")
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    print("\n".join(lines))
    if a.png:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        # left: accuracy, rows far below the others (projection only) left out so that the ones that
        # learn stay readable (named under the axis); right: the difference from plain DP-SGD, paired by seed
        fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.8))
        best = max(np.mean(v) for v in stats.values() if v)
        low = [n for n in names if max((np.mean(stats[(n, e)]) for e in eps_list if stats[(n, e)]), default=0)
               < best - 0.3]
        for name in names:
            es = [e for e in eps_list if stats[(name, e)]]
            if name not in low:
                ax.errorbar(es, [np.mean(stats[(name, e)]) for e in es], yerr=[np.std(stats[(name, e)]) for e in es],
                            marker="o", capsize=3, label=name, color=f"C{ROWS.index(name)}")
            de = [e for e in eps_list if diffs.get((name, e))]
            if name != "dpsgd" and name not in low and de:
                bx.errorbar(de, [np.mean(diffs[(name, e)]) for e in de], yerr=[np.std(diffs[(name, e)]) for e in de],
                            marker="o", capsize=3, label=name, color=f"C{ROWS.index(name)}")  # one colour a row
        bx.axhline(0, color="black", lw=1)
        for axis in (ax, bx):
            axis.set_xscale("log", base=2)
            axis.set_xticks(eps_list)
            axis.set_xticklabels([f"{e:g}" for e in eps_list])
            axis.set_xlabel("total eps (delta = 1e-5), basis releases included" +
                            (f"\nnot shown (below {best - 0.3:.2f}): {', '.join(low)}" if low else ""))
            axis.grid(alpha=0.3)
            axis.legend(fontsize=8)
        ax.set_ylabel("test accuracy of the final model (mean, sd over seeds)")
        bx.set_ylabel("minus plain DP-SGD's, same seed")
        fig.suptitle("Fashion-MNIST, tanh CNN: DP-SGD with and without private subspaces")
        fig.tight_layout()
        fig.savefig(a.png, dpi=120)
        print(f"wrote {a.png}")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="train and append to OUT/dpsgd-SETTING.csv (resumes)")
    r.add_argument("--setting", choices=sorted(SETTINGS), default="quick")
    r.add_argument("--out", default=os.path.join(HERE, "out", "dpsgd"))
    r.add_argument("--eps", help="comma-separated total eps values (default: the setting's)")
    r.add_argument("--rows", help=f"comma-separated rows of {', '.join(ROWS)} (default: the setting's)")
    r.add_argument("--seeds", type=int, help="seeds 0..N-1 (default: the setting's)")
    r.add_argument("--epochs", type=float, help="epochs (default: the setting's)")
    r.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    r.add_argument("--shard", help="I/N: run only every N-th run of the plan, from the I-th (N processes, "
                   "e.g. 0/2 and 1/2 with --threads 1 on 2 cores, share one CSV)")
    r.add_argument("--model", choices=["cnn", "logreg"], default="cnn",
                   help="the tanh CNN (default) or logistic regression (give another --out: the CSV does not key on it)")
    r.add_argument("--k", type=int, default=K, help=f"basis dimension (default {K}; the CSV does not key on it: "
                   "give another --out for another k)")
    r.add_argument("--embedding-clip", type=float, default=GEP["embedding_clip"],
                   help="GEP's C_e as a fraction of C (default %(default)s; another --out for another value)")
    r.add_argument("--residual-clip", type=float, default=GEP["residual_clip"],
                   help="GEP's C_r as a fraction of C (default %(default)s; another --out for another value)")
    r.add_argument("--embedding-share", type=float, default=None,
                   help="GEP's a, the embedding's share of each step's privacy (default: DPOptimizer's rule)")
    p = sub.add_parser("report", help="the table (mean ± sd over seeds) and a PNG from a CSV")
    p.add_argument("csv")
    p.add_argument("--png", help="write the plot here")
    a = ap.parse_args(argv)
    return cmd_run(a) if a.cmd == "run" else cmd_report(a)


if __name__ == "__main__":
    sys.exit(main())
