#!/usr/bin/python3
"""Reproduce the three panels of Figure 2 of Tsfadia, "Differentially private
subspace estimation without distributional assumptions", sec. 6: private mean
estimation of n = 250k points near a k-dim subspace with rho = 2, delta = 1e-5,
t = 125, q = 10k, by

  est    EstSubspace (this library's streaming estimator, rho/2) + Gaussian mean (rho/2), projected;
  ag     Analyze Gauss (DTTZ14, zCDP variant, rho/2) + Gaussian mean (rho/2), projected;
  gauss  the Gaussian mechanism alone (rho).

Each point is `dps-fig2` run for one (d, k, tau/d) with R repetitions; the
plotted value is the trimmed mean of the l2 errors between the 0.1 and 0.9
quantiles (the paper's statistic).

  --quick  a few minutes on 2 cores (default).
  --full   the paper's settings, 30 repetitions, panel 1 up to d = 1e5:
           A LONG EXPERIMENT (about 1.5-2 hours on 2 cores; Analyze Gauss at
           d = 1e4 alone is ~5 s per repetition and is run 30 times for each
           point of panels 2 and 3).

Outputs in --out (default out/fig2-quick or out/fig2-full under the repo):
raw.csv (one line per panel, point, repetition and method), summary.csv
(trimmed means, failure counts), fig2.png, fig2.log (failures and notes).
Seeds: panel p uses seed base --seed + p - 1 (default 1, 2, 3); tune.py uses a
different base.
"""
import argparse
import csv
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

METHODS = ["est", "ag", "gauss"]
LABEL = {"est": "EstSubspace (this library)", "ag": "Analyze Gauss [DTTZ14]", "gauss": "Gaussian mechanism only"}
STYLE = {"est": dict(color="C0", marker="o"), "ag": dict(color="C3", marker="s"), "gauss": dict(color="C2", marker="^")}

# (panel, title, x name, list of (d, k, tau_over_d))
def settings(mode):
    if mode == "quick":
        reps = 10
        # sqrt(d) = 10, 20, 40, 60, 100, 160 (Analyze Gauss skipped at 25600 > --ag-max-d)
        p1 = [(d, 4, 10.0) for d in (100, 400, 1600, 3600, 10000, 25600)]
        p2 = [(1000, k, 10.0) for k in (1, 2, 4, 8)]
        p3 = [(1000, 4, x) for x in (0.01, 0.1, 1.0, 10.0, 100.0)]
    else:
        reps = 30
        # x axis is sqrt(d): sqrt(d) = 10, 25, 50, 75, 100, 150, 200, 250, 316
        p1 = [(d, 4, 10.0) for d in (100, 625, 2500, 5625, 10000, 22500, 40000, 62500, 100000)]
        # the paper does not list its k values: 1, 2, 4, 8, 16 (our choice)
        p2 = [(10000, k, 10.0) for k in (1, 2, 4, 8, 16)]
        p3 = [(10000, 4, x) for x in (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0)]
    return reps, [
        (1, "k = 4, tau = 10d, varying d", "sqrt(d)", p1),
        (2, "d = %d, tau = 10d, varying k" % p2[0][0], "k", p2),
        (3, "d = %d, k = 4, varying tau" % p3[0][0], "tau / d", p3),
    ]


def xval(panel, d, k, tod):
    return math.sqrt(d) if panel == 1 else (k if panel == 2 else tod)


def summarise(raw):
    """raw: list of dicts with panel and the dps-fig2 columns -> summary rows."""
    groups = {}
    for r in raw:
        key = (int(r["panel"]), int(r["d"]), int(r["k"]), float(r["tau_over_d"]), r["method"])
        groups.setdefault(key, []).append(r)
    out = []
    for (panel, d, k, tod, m), rs in sorted(groups.items()):
        ran = [r for r in rs if r["status"] in ("ok", "fail")]
        errs = [common.fnum(r["err_mean"]) for r in ran]
        sins = [common.fnum(r["sin_subspace"]) for r in ran if r["status"] == "ok"]
        out.append(dict(
            panel=panel, x=xval(panel, d, k, tod), d=d, k=k, tau_over_d=tod, method=m, reps=len(rs),
            trimmed_err=common.trimmed_mean(errs), median_err=float(np.median(errs)) if errs else float("nan"),
            q10_err=float(np.quantile(errs, 0.1)) if errs else float("nan"),
            q90_err=float(np.quantile(errs, 0.9)) if errs else float("nan"),
            trimmed_sin=common.trimmed_mean(sins) if m != "gauss" else float("nan"),
            fails=sum(r["status"] == "fail" for r in rs),
            skipped=sum(r["status"] == "skipped" for r in rs),
            errors=sum(r["status"].startswith("error") for r in rs),
            mean_seconds=float(np.mean([common.fnum(r["seconds"]) for r in ran])) if ran else float("nan"),
        ))
    return out


def plot(summary, panels, path, reps, mode):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    for ax, (panel, title, xname, pts) in zip(axes, panels):
        for m in METHODS:
            rs = sorted((s for s in summary if s["panel"] == panel and s["method"] == m and s["skipped"] < s["reps"]),
                        key=lambda s: s["x"])
            if not rs:
                continue
            x = np.array([s["x"] for s in rs])
            y = np.array([s["trimmed_err"] for s in rs])
            lo = np.array([s["q10_err"] for s in rs])
            hi = np.array([s["q90_err"] for s in rs])
            ax.plot(x, y, label=LABEL[m], **STYLE[m])
            ax.fill_between(x, lo, hi, color=STYLE[m]["color"], alpha=0.12, linewidth=0)
            for s in rs:
                if s["fails"]:
                    ax.annotate("%d FAIL" % s["fails"], (s["x"], s["trimmed_err"]), textcoords="offset points",
                                xytext=(4, 6), fontsize=7, color=STYLE[m]["color"])
        # reference: Gaussian mechanism on rho, E||N(0, s^2 I_d)|| ~ s sqrt(d), s = (2/n)/sqrt(2 rho)
        if panel == 1:
            ds = np.array(sorted(p[0] for p in pts), dtype=float)
            n, rho = 250 * 4, 2.0
            ax.plot(np.sqrt(ds), (2 / n) / math.sqrt(2 * rho) * np.sqrt(ds), ":", color="C2", lw=1,
                    label="Gauss theory sigma*sqrt(d)")
            ax.plot(np.sqrt(ds), np.full_like(ds, (2 / n) / math.sqrt(rho) * math.sqrt(4)), ":", color="C0", lw=1,
                    label="exact subspace: sigma'*sqrt(k)")
        ax.set_yscale("log")
        if panel == 3:
            ax.set_xscale("log")
        if panel == 2:
            ax.set_xscale("log", base=2)
            ax.set_xticks([p[1] for p in pts])
            ax.set_xticklabels([str(p[1]) for p in pts])
        ax.set_xlabel(xname)
        ax.set_ylabel("l2 error of the private mean")
        ax.set_title("(%d) %s" % (panel, title), fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=5, fontsize=9, frameon=False)
    fig.suptitle("Figure 2 reproduction (%s): n = 250k, rho = 2, delta = 1e-5, t = 125, q = 10k; "
                 "trimmed mean (0.1-0.9) of %d reps, band = 0.1-0.9 quantiles" % (mode, reps), fontsize=10)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="a few minutes on 2 cores (default)")
    g.add_argument("--full", action="store_true",
                   help="the paper's settings, 30 reps, d up to 1e5: LONG (about 1.5-2 hours on 2 cores)")
    ap.add_argument("--out", help="output directory (default out/fig2-quick or out/fig2-full under the repo)")
    ap.add_argument("--reps", type=int, help="override the number of repetitions")
    ap.add_argument("--seed", type=int, default=1, help="seed base; panel p uses seed + p - 1 (default 1)")
    ap.add_argument("--panels", default="1,2,3", help="which panels to run (default 1,2,3)")
    ap.add_argument("--workers", type=int, default=2, help="estimator worker threads (default 2)")
    ap.add_argument("--ag-max-d", type=int, default=20000, help="skip Analyze Gauss above this d (default 20000)")
    ap.add_argument("--bin", help="path of dps-fig2 (default: build-exp/, built if missing)")
    ap.add_argument("--replot", action="store_true", help="only redo summary.csv and fig2.png from raw.csv")
    a = ap.parse_args()
    mode = "full" if a.full else "quick"
    reps, panels = settings(mode)
    if a.reps:
        reps = a.reps
    want = {int(p) for p in a.panels.split(",")}
    panels = [p for p in panels if p[0] in want]
    out = a.out or os.path.join(common.REPO, "out", "fig2-" + mode)
    os.makedirs(out, exist_ok=True)
    raw_path, sum_path = os.path.join(out, "raw.csv"), os.path.join(out, "summary.csv")
    png_path, log_path = os.path.join(out, "fig2.png"), os.path.join(out, "fig2.log")

    if a.replot:
        with open(raw_path) as f:
            raw = list(csv.DictReader(f))
    else:
        exe = common.find_binary(a.bin)
        npts = sum(len(p[3]) for p in panels)
        print(f"fig2 {mode}: {npts} points x {reps} reps, methods est, ag (d <= {a.ag_max_d}), gauss; "
              f"output in {out}", flush=True)
        raw = []
        t_all = time.time()
        i = 0
        with open(raw_path, "w", newline="") as fr, open(log_path, "w") as log:
            w = csv.DictWriter(fr, fieldnames=["panel"] + common.FIELDS)
            w.writeheader()
            for panel, title, xname, pts in panels:
                for (d, k, tod) in pts:
                    i += 1
                    t0 = time.time()
                    tag = f"[{i}/{npts}] panel {panel}: d={d} k={k} tau/d={tod:g}"
                    print(f"{tag} ... (n = {250 * k} rows)", flush=True)

                    def progress(rep, el, tag=tag):
                        if el > 20:
                            print(f"    {tag}: rep {int(rep) + 1}/{reps} done, {el:.0f} s", flush=True)

                    rows, _ = common.run_point(
                        exe, ["--d", d, "--k", k, "--tau-over-d", tod, "--reps", reps, "--seed", a.seed + panel - 1,
                              "--workers", a.workers, "--ag-max-d", a.ag_max_d, "--verbose"],
                        log=log, progress=progress if mode == "full" else None)
                    for r in rows:
                        r["panel"] = panel
                        w.writerow(r)
                    fr.flush()
                    raw.extend(rows)
                    s = {m: [r for r in rows if r["method"] == m] for m in METHODS}
                    parts = []
                    for m in METHODS:
                        ran = [r for r in s[m] if r["status"] in ("ok", "fail")]
                        if not ran:
                            parts.append(f"{m} skipped")
                            continue
                        tm = common.trimmed_mean([common.fnum(r["err_mean"]) for r in ran])
                        nf = sum(r["status"] == "fail" for r in ran)
                        parts.append(f"{m} {tm:.3g}" + (f" ({nf} FAIL)" if nf else ""))
                    print(f"    done in {time.time() - t0:.1f} s: trimmed err " + ", ".join(parts), flush=True)
        print(f"all points in {time.time() - t_all:.0f} s", flush=True)

    summary = summarise(raw)
    keys = ["panel", "x", "d", "k", "tau_over_d", "method", "reps", "trimmed_err", "median_err", "q10_err",
            "q90_err", "trimmed_sin", "fails", "skipped", "errors", "mean_seconds"]
    with open(sum_path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        for s in summary:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in s.items()})
    # printed table: per point, trimmed error per method
    print("\npanel  d       k   tau/d   est        ag         gauss      sin(est)  sin(ag)   fails est/ag")
    pts = sorted({(s["panel"], s["d"], s["k"], s["tau_over_d"]) for s in summary})
    for (p, d, k, tod) in pts:
        by = {s["method"]: s for s in summary if (s["panel"], s["d"], s["k"], s["tau_over_d"]) == (p, d, k, tod)}

        def f(m, key="trimmed_err"):
            s = by.get(m)
            if not s or s["skipped"] == s["reps"]:
                return "skipped" if s else "-"
            return f"{s[key]:.3e}"

        fe = by.get("est", {}).get("fails", 0)
        fa = by.get("ag", {}).get("fails", 0)
        print(f"{p:<6} {d:<7} {k:<3} {tod:<7g} {f('est'):<10} {f('ag'):<10} {f('gauss'):<10} "
              f"{f('est', 'trimmed_sin')[:9]:<9} {f('ag', 'trimmed_sin')[:9]:<9} {fe}/{fa}")
    plot(summary, panels, png_path, reps, mode)
    print(f"\nwrote {raw_path}\n      {sum_path}\n      {png_path}")


if __name__ == "__main__":
    main()
