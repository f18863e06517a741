#!/usr/bin/python3
"""The covariance experiment of Amin, Dick, Kulesza, Munoz Medina, Vassilvitskii
(NeurIPS 2019), sec. 4 / Figure 1, on scikit-learn's wine and digits data.

For each data set X (n x d): centre every feature (subtract its mean), then
normalise every row to unit L2 norm (the paper's setting: columns of norm <= 1;
a zero row stays zero).  C = X^T X.  For eps in {0.01, 0.1, 0.2, 0.5, 1, 2, 4}
and 50 repetitions (--quick: 5) run

  it-u     iterative eigenvector sampling, all d eigenvectors, eps/2 on the
           eigenvalues, uniform split            (pure eps-DP)
  ad       the same, adaptive split (Cor. 1)      (pure eps-DP)
  laplace  Laplace mechanism on the upper triangle (pure eps-DP)
  gauss    analytic Gaussian mechanism, delta in {1e-16, 1e-10, 1e-3}
           ((eps, delta)-DP)

and report the normalised Frobenius error ||C_hat - C||_F / ||C||_F (the
all-zero matrix scores 1), and also ||C_hat - C||_F / n, the normalisation
the paper's sec. 4 text gives (column err_n; equal when C is near rank one).  Writes raw.csv, summary.csv (mean and standard
error per point), covariance.png and covariance.log to out/covariance/ (or
out/covariance-quick/).  The centring uses the data's own means: like the
paper, the preprocessing is treated as public.

--no-center skips the centring (the paper calls C "unnormalized and
uncentered"; its sec. 4 does not say whether the features were centred).
--standardize also scales every feature to unit variance before the row
normalisation (not the paper's stated preprocessing; without it wine's C is
dominated by one feature, proline, and is close to rank one).
"""
import argparse
import csv
import io
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
DEFAULT_BUILD = os.path.join(REPO, "build-exp")
EPS = [0.01, 0.1, 0.2, 0.5, 1, 2, 4]
DELTAS = [1e-16, 1e-10, 1e-3]


def find_binary(path, build_dir=DEFAULT_BUILD):
    if path:
        return path
    exe = os.path.join(build_dir, "tools", "experiments", "dps-cov-eval")
    if not os.access(exe, os.X_OK):
        print(f"building dps-cov-eval in {build_dir} ...", flush=True)
        subprocess.run(["cmake", "-S", REPO, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release"], check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run(["cmake", "--build", build_dir, "-j2", "--target", "dps-cov-eval"], check=True,
                       stdout=subprocess.DEVNULL)
    if not os.access(exe, os.X_OK):
        sys.exit(f"dps-cov-eval not found at {exe}")
    return exe


def ensure_sklearn():
    """scikit-learn is an experiments-only dependency: tools/setup --experiments."""
    try:
        import sklearn  # noqa: F401
    except ImportError:
        subprocess.run([os.path.join(REPO, "tools", "setup"), "--experiments"], check=True)


def load(name, standardize, center=True):
    from sklearn.datasets import load_digits, load_wine
    X = (load_wine if name == "wine" else load_digits)().data.astype(np.float64)
    if center:
        X = X - X.mean(axis=0)
    if standardize:
        sd = X.std(axis=0)
        sd[sd == 0] = 1
        X = X / sd
    nr = np.linalg.norm(X, axis=1)
    nr[nr == 0] = 1
    return (X / nr[:, None]).astype(np.float32)


def summarise(rows):
    groups = {}
    for r in rows:
        key = (r["dataset"], r["method"] + (":" + r["delta"] if r["delta"] else ""), float(r["eps"]))
        groups.setdefault(key, []).append((float(r["err"]), float(r["err_n"])))
    out = []
    for (ds, m, e), v in sorted(groups.items()):
        v = np.asarray(v)
        out.append({"dataset": ds, "method": m, "eps": e, "reps": len(v), "mean_err": v[:, 0].mean(),
                    "se": v[:, 0].std(ddof=1) / np.sqrt(len(v)) if len(v) > 1 else float("nan"),
                    "median_err": float(np.median(v[:, 0])), "mean_err_n": v[:, 1].mean()})
    return out


def plot(summary, path, datasets, title_extra):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(datasets), figsize=(6 * len(datasets), 4.2))
    axes = np.atleast_1d(axes)
    styles = {"it-u": ("IT-U (pure)", "C0", "-o"), "ad": ("AD (pure)", "C1", "-s"),
              "laplace": ("Laplace (pure)", "C2", "-^")}
    for i, dl in enumerate(DELTAS):
        styles[f"gauss:{dl:g}"] = (f"Gauss delta={dl:g}", f"C{3 + i}", "--x")
    for ax, ds in zip(axes, datasets):
        for m, (lab, col, st) in styles.items():
            pts = sorted((s["eps"], s["mean_err"]) for s in summary if s["dataset"] == ds and s["method"] == m)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], st, color=col, label=lab, ms=4)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.axhline(1.0, color="gray", lw=0.8, ls=":")
        ax.set_xlabel("eps")
        ax.set_ylabel("||C_hat - C||_F / ||C||_F")
        ax.set_title(f"{ds}{title_extra}")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="5 repetitions instead of 50")
    ap.add_argument("--reps", type=int, help="override the number of repetitions")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--standardize", action="store_true", help="scale features to unit variance first")
    ap.add_argument("--no-center", action="store_true", help="do not centre the features")
    ap.add_argument("--out", help="output directory (default out/covariance[-quick][-std])")
    ap.add_argument("--bin", help="path of dps-cov-eval (default: build-exp/, built if missing)")
    a = ap.parse_args()
    reps = a.reps or (5 if a.quick else 50)
    out = a.out or os.path.join(REPO, "out", "covariance" + ("-quick" if a.quick else "") +
                                ("-std" if a.standardize else "") + ("-nocenter" if a.no_center else ""))
    os.makedirs(out, exist_ok=True)
    ensure_sklearn()
    exe = find_binary(a.bin)
    t0 = time.time()
    rows = []
    datasets = ["wine", "digits"]
    with open(os.path.join(out, "covariance.log"), "w") as log:
        for ds in datasets:
            X = load(ds, a.standardize, not a.no_center)
            npy = os.path.join(out, f"{ds}.npy")
            np.save(npy, X)
            cmd = [exe, "--in", npy, "--reps", str(reps), "--seed", str(a.seed),
                   "--eps", ",".join(f"{e:g}" for e in EPS), "--deltas", ",".join(f"{d:g}" for d in DELTAS)]
            t1 = time.time()
            p = subprocess.run(cmd, capture_output=True, text=True)
            log.write(f"$ {' '.join(cmd)}\n{p.stderr}")
            if p.returncode != 0:
                sys.stderr.write(p.stderr)
                sys.exit(f"{' '.join(cmd)} exited with {p.returncode}")
            for r in csv.DictReader(io.StringIO(p.stdout)):
                r["dataset"] = ds
                rows.append(r)
            msg = f"{ds}: n={X.shape[0]} d={X.shape[1]}, {reps} reps, {time.time() - t1:.1f} s"
            print(msg, flush=True)
            log.write(f"# {msg}\n")
        log.write(f"# total {time.time() - t0:.1f} s\n")
    fields = ["dataset", "method", "eps", "delta", "rep", "err", "err_n", "seconds", "proposals"]
    with open(os.path.join(out, "raw.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for r in rows:
            w.writerow({k: r[k] for k in fields})
    summary = summarise(rows)
    with open(os.path.join(out, "summary.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(summary[0].keys()))
        w.writeheader()
        for s in summary:
            w.writerow({k: (f"{v:.4g}" if isinstance(v, float) else v) for k, v in s.items()})
    extra = (" standardized" if a.standardize else "") + (" not centred" if a.no_center else "")
    plot(summary, os.path.join(out, "covariance.png"), datasets, f" ({extra.strip()})" if extra else "")
    # the table for README.md: mean error per method (rows) and eps (columns)
    for ds in datasets:
        for col, what in (("mean_err", "||C_hat - C||_F / ||C||_F"), ("mean_err_n", "||C_hat - C||_F / n")):
            print(f"\n{ds}{extra}: mean of {what}, {reps} reps\n")
            print("| method | " + " | ".join(f"eps {e:g}" for e in EPS) + " |")
            print("|---|" + "---|" * len(EPS))
            for m in ["it-u", "ad", "laplace"] + [f"gauss:{d:g}" for d in DELTAS]:
                vals = {s["eps"]: s[col] for s in summary if s["dataset"] == ds and s["method"] == m}
                print(f"| {m} | " + " | ".join(f"{vals.get(e, float('nan')):.3g}" for e in EPS) + " |")
    print(f"\nwrote {out}/raw.csv, summary.csv, covariance.png ({time.time() - t0:.1f} s)")


if __name__ == "__main__":
    main()
