#!/usr/bin/python3
"""DP-RGrad evaluation: relative error ||L - M||_F / ||M||_F against n.

Runs dps-rgrad-exp (rgrad.c) for every (d, r, n, rho, mode): rho in
{0.1, 1, 10} (the whole fit's zCDP rho; batch mode splits it 0.3 init +
0.7/iters per iteration, streaming gives every disjoint part the full rho),
and the non-private reference (spectral init + the same gradient steps, no
clipping, no noise).  Writes out/rgrad[-quick]/raw.csv, summary.csv (median
and quartiles over the repetitions; a FAIL of the init, or a configuration
the library refuses (too few observations for the groups), counts as error 1,
the error of L = 0; "fails" counts both), rgrad.png and rgrad.log.

  /usr/bin/python3 tools/experiments/rgrad.py --quick   # ~1 min
  /usr/bin/python3 tools/experiments/rgrad.py           # LONG (~15-20 min)
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


def find_binary(path, build_dir):
    if path:
        return path
    exe = os.path.join(build_dir, "tools", "experiments", "dps-rgrad-exp")
    if not os.access(exe, os.X_OK):
        print(f"building dps-rgrad-exp in {build_dir} ...", flush=True)
        subprocess.run(["cmake", "-S", REPO, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release"], check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run(["cmake", "--build", build_dir, "-j2", "--target", "dps-rgrad-exp"], check=True,
                       stdout=subprocess.DEVNULL)
    return exe


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="d = 20, r = 2, 3 repetitions")
    ap.add_argument("--bin", help="path of dps-rgrad-exp (default: build it in build-exp/)")
    ap.add_argument("--build-dir", default=os.path.join(REPO, "build-exp"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--replot", action="store_true", help="redo summary and PNG from raw.csv")
    a = ap.parse_args()
    out = os.path.join(REPO, "out", "rgrad-quick" if a.quick else "rgrad")
    os.makedirs(out, exist_ok=True)
    if a.quick:
        shapes, ns, reps = [(20, 2)], [5000, 10000, 20000, 40000, 80000], 3
    else:
        shapes, ns, reps = [(20, 2), (20, 3), (50, 2), (50, 3)], [5000, 10000, 20000, 40000, 80000], 5
    rhos = [0.1, 1.0, 10.0]
    raw = os.path.join(out, "raw.csv")
    t0 = time.time()
    if not a.replot:
        exe = find_binary(a.bin, a.build_dir)
        with open(raw, "w") as f, open(os.path.join(out, "rgrad.log"), "w") as log:
            first = True
            for d, r in shapes:
                for n in ns:
                    runs = [(0.0, False)] + [(rho, s) for rho in rhos for s in (False, True)]
                    for rho, streaming in runs:
                        cmd = [exe, "--d1", d, "--d2", d, "--r", r, "--n", n, "--rho", rho, "--reps", reps,
                               "--seed", a.seed] + (["--streaming"] if streaming else []) + \
                              ([] if first else ["--no-header"])
                        p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, check=True)
                        f.write(p.stdout)
                        f.flush()
                        log.write(p.stderr)
                        first = False
                    print(f"d={d} r={r} n={n} done ({time.time() - t0:.0f} s)", flush=True)
            log.write(f"# total {time.time() - t0:.1f} s\n")
    rows = list(csv.DictReader(open(raw)))
    groups = {}
    for row in rows:
        key = (int(row["d1"]), int(row["r"]), int(row["n"]), float(row["rho"]), row["mode"])
        err = float(row["err_rel"]) if row["status"] == "ok" else 1.0
        groups.setdefault(key, []).append((err, row["status"]))
    with open(os.path.join(out, "summary.csv"), "w") as f:
        w = csv.writer(f)
        w.writerow(["d", "r", "n", "rho", "mode", "median_err_rel", "q25", "q75", "fails", "reps"])
        for key in sorted(groups):
            e = np.array([x[0] for x in groups[key]])
            fails = sum(1 for x in groups[key] if x[1] != "ok")
            w.writerow(list(key) + ["%.4g" % np.median(e), "%.4g" % np.quantile(e, 0.25),
                                    "%.4g" % np.quantile(e, 0.75), fails, len(e)])
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    shapes_seen = sorted({(k[0], k[1]) for k in groups})
    fig, axes = plt.subplots(1, len(shapes_seen), figsize=(5 * len(shapes_seen), 4), squeeze=False)
    for ax, (d, r) in zip(axes[0], shapes_seen):
        for rho, mode, style in [(0.0, "nonprivate", "k-")] + \
                [(rho, m, c + ("-" if m == "batch" else "--")) for rho, c in zip(rhos, "bgr")
                 for m in ("batch", "streaming")]:
            pts = sorted((k[2], np.median([x[0] for x in v])) for k, v in groups.items()
                         if k[0] == d and k[1] == r and k[3] == rho and k[4] == mode)
            if pts:
                label = "non-private" if mode == "nonprivate" else f"rho={rho:g} {mode}"
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, marker="o", ms=3, label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("n (observations)")
        ax.set_ylabel("||L - M||_F / ||M||_F (median)")
        ax.set_title(f"d1 = d2 = {d}, r = {r}")
        ax.axhline(1.0, color="grey", lw=0.5)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "rgrad.png"), dpi=120)
    print(f"wrote {out}/raw.csv summary.csv rgrad.png ({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
