#!/usr/bin/python3
"""Calibrate the snapshot's noise_level (issue 11.6) against the captured energy of the released basis.

For each configuration: dps-estimate --method estimator on TRAIN (one epoch), its released basis evaluated
on held-out rows by gradients.py eval (captured energy vs the non-private top-k and a random basis), and
the snapshot's noise_level and weak flag from the estimator's JSON.  One tab-separated line per run:

    tools/experiments/noise_level.py --train T.npy --heldout H.npy --topk TOP.npy --k 10 \\
        --run reference:m=128,t=78,rho=1 --run gaussian:rho=0.1 ... > table.tsv

A run is AGGREGATOR:key=value,... with keys m, t, q, rho, n (rows used: the first n of TRAIN, default all).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_one(a, spec, tmp):
    agg, _, kv = spec.partition(":")
    p = dict(x.split("=") for x in kv.split(",") if x)
    X = np.load(a.train, mmap_mode="r")
    n = int(p.get("n", X.shape[0]))
    src = a.train
    if n < X.shape[0]:
        src = os.path.join(tmp, "rows.npy")
        np.save(src, np.ascontiguousarray(X[:n], dtype=np.float32))
    out, js = os.path.join(tmp, "B.npy"), os.path.join(tmp, "est.json")
    for f in (out, js):
        if os.path.exists(f):
            os.remove(f)
    cmd = [a.estimate, "--method", "estimator", "--aggregator", agg, "--k", str(a.k), "--rho", p["rho"],
           "--seed", str(a.seed), "--out", out, "--json", js, "--quiet"]
    if agg in ("gaussian", "covariance"):
        cmd += ["--t", "2", "--m", str(n // 2)]  # t m rows, one epoch (no buckets are formed)
    else:
        m = int(p["m"])
        t = int(p.get("t", n // m))
        cmd += ["--t", str(t), "--m", str(m)]
        if "q" in p:
            cmd += ["--q", p["q"]]
    cmd.append(src)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if not os.path.exists(js):
        return f"{spec}\tnot run\t{r.stderr.strip()[-300:]}"
    with open(js) as f:
        e = json.load(f)
    rel = [x for x in e.get("epochs", []) if x["status"] == "released"]
    if r.returncode not in (0, 4) or not rel or not os.path.exists(out):
        why = (e.get("epochs") or [{}])[-1].get("reason", "") or r.stderr.strip()[-200:]
        return f"{spec}\tnot released\t{why}"
    last = rel[-1]
    ev = os.path.join(tmp, "eval.json")
    subprocess.run([sys.executable, os.path.join(ROOT, "tools/experiments/gradients.py"), "eval", "--heldout",
                    a.heldout, "--basis", out, "--k", str(a.k), "--topk", a.topk, "--json", ev],
                   check=True, capture_output=True)
    with open(ev) as f:
        res = json.load(f)["results"][0]
    ratio, vs_random = res["basis"] / res["topk"], res["basis"] / res["random"]
    label = "good" if ratio >= 0.6 else "random-level" if ratio < 0.2 or vs_random <= 2 else "between"
    return (f"{spec}\t{last['noise_level']:.4g}\t{'WEAK' if last['weak'] else '-'}\t{res['basis']:.4g}\t"
            f"{ratio:.3f}\t{vs_random:.3g}\t{label}\tradius {last['radius']:.3g} w_hat {last['w_hat']:.3g}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train", required=True)
    ap.add_argument("--heldout", required=True)
    ap.add_argument("--topk", required=True, help="the non-private top-k basis (gradients.py eval --save-topk)")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--estimate", default=os.path.join(ROOT, "build/src/cli/dps-estimate"))
    ap.add_argument("--run", action="append", required=True)
    a = ap.parse_args()
    print("run\tnoise_level\tweak\tcaptured\tvs_topk\tvs_random\tlabel\treleased", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for spec in a.run:
            print(run_one(a, spec, tmp), flush=True)


if __name__ == "__main__":
    main()
