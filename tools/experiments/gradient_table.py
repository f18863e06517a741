#!/usr/bin/python3
"""gradient_table.py - issue 11's table: the captured energy of every mechanism's
release on real per-example gradients, against rho, with the WEAK flag.

A LONG EXPERIMENT (about an hour on 2 cores for the three models at 60 000 rows;
the MLP's rows are 24 GB): not run by tools/check.  Needs the rows written by
    gradients.py make --model M --rows 60000 --heldout 2000 --out DATA
for M in logreg, mlp, cnn, and the programs built (tools/build).

For each (model, mechanism) of RUNS it runs dps-sweep once (one epoch of every
row, one estimator per rho, the rows read once; each release is the one
`dps-estimate --method NAME --seed S --workers 1` makes, the power blocks cut
where it cuts them: checked bit for bit on the logreg power release at rho
0.1), then gradients.py eval on each
released basis against the non-private reference OF THE SAME SHAPE: the global
top-k for one-group mechanisms, the group-wise top-k_g (each group's own top-k_g,
zero elsewhere) for --param-groups; the references are computed once from the
first --ref-rows training rows and cached.  A sweep whose .jsonl is already in
OUT is not run again (delete it to redo).  Prints a markdown table: each cell
is the basis's captured held-out energy over the reference's, and W when the
snapshot said WEAK.

    tools/experiments/gradient_table.py --data DATA --out OUT [--models logreg,mlp,cnn]
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RHOS = "0.01,0.03,0.1,0.25,1,4"
GROUPS = {"logreg": "7840,10", "mlp": "100352,128,1280,10", "cnn": "400,16,12800,32,32768,64,640,10"}

# (name, dps-sweep flags, grouped?, models it runs on, rhos)
RUNS = [
    ("gaussian", ["--aggregator", "gaussian"], False, ["logreg"], RHOS),
    ("gaussian, groups", ["--aggregator", "gaussian", "--param-groups", "G"], True, ["mlp", "cnn"], RHOS),
    ("gaussian, groups, p 40", ["--aggregator", "gaussian", "--param-groups", "G", "--power-oversample", "40"],
     True, ["mlp", "cnn"], RHOS),
    ("power", ["--aggregator", "power"], False, ["logreg", "mlp", "cnn"], RHOS),
    ("power, p 40", ["--aggregator", "power", "--power-oversample", "40"], False, ["mlp", "cnn"], RHOS),
    ("reference, m 100", ["--aggregator", "reference", "--m", "100"], False, ["logreg", "cnn"], RHOS),
    ("reference, m 100", ["--aggregator", "reference", "--m", "100"], False, ["mlp"], "0.1,1,4"),
    ("projection, m 100", ["--aggregator", "projection", "--m", "100"], False, ["logreg"], RHOS),
    ("histogram, m 100", ["--aggregator", "histogram", "--m", "100"], False, ["logreg"], RHOS),
]


def slug(s):
    return "".join(c if c.isalnum() else "-" for c in s).replace("--", "-").strip("-")


def sweep(build, data, out, model, name, flags, rhos):
    base = os.path.join(out, f"{model}-{slug(name)}")
    jl = base + ".jsonl"
    if not os.path.exists(jl):
        flags = [GROUPS[model] if f == "G" else f for f in flags]
        cmd = [os.path.join(build, "tools/experiments/dps-sweep"), "--in", os.path.join(data, f"{model}-e1-train.npy"),
               "--k", "10", "--rhos", rhos, "--out-prefix", base + "-"] + flags
        print("+ " + " ".join(cmd), file=sys.stderr)
        with open(jl + ".part", "w") as o, open(base + ".err", "w") as e:
            subprocess.run(cmd, check=True, stdout=o, stderr=e)
        os.rename(jl + ".part", jl)
    with open(jl) as fh:
        return [json.loads(line) for line in fh if line.strip()]


def reference(data, out, model, grouped, ref_rows):
    path = os.path.join(out, f"{model}-top-{'groups' if grouped else '10'}.npy")
    if not os.path.exists(path):
        cmd = [sys.executable, os.path.join(HERE, "gradients.py"), "eval",
               "--heldout", os.path.join(data, f"{model}-e1-heldout.npy"), "--train-rows", str(ref_rows),
               "--save-topk", path]
        cmd += ["--groups", GROUPS[model], "--group-k", ",".join("10" for _ in GROUPS[model].split(","))] \
            if grouped else ["--k", "10"]
        print("+ " + " ".join(cmd), file=sys.stderr)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return path


def kept(data, model, basis, top):
    cmd = [sys.executable, os.path.join(HERE, "gradients.py"), "eval", "--heldout",
           os.path.join(data, f"{model}-e1-heldout.npy"), "--basis", basis, "--topk", top, "--json", "-"]
    r = subprocess.run(cmd, check=True, capture_output=True, text=True)
    res = json.loads(r.stdout)["results"][-1]
    return res["basis_over_topk"], res["topk"]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--data", required=True, help="directory of gradients.py make's rows (MODEL-e1-train/heldout.npy)")
    p.add_argument("--out", required=True, help="directory for the bases, sweep logs and references")
    p.add_argument("--models", default="logreg,mlp,cnn")
    p.add_argument("--build", default=os.path.join(ROOT, "build"), help="build directory with dps-sweep")
    p.add_argument("--ref-rows", type=int, default=10000, help="training rows of the non-private references")
    p.add_argument("--runs", default="", help="only the mechanisms whose name starts with one of these "
                   "(comma-separated, e.g. gaussian,power); default: all")
    a = p.parse_args(argv)
    models = a.models.split(",")
    for m in models:
        for f in ("train", "heldout"):
            path = os.path.join(a.data, f"{m}-e1-{f}.npy")
            if not os.path.exists(path):
                p.error(f"{path} missing: run gradients.py make --model {m} --rows 60000 --heldout 2000 --out {a.data}")
    if not os.access(os.path.join(a.build, "tools/experiments/dps-sweep"), os.X_OK):
        p.error(f"{a.build}/tools/experiments/dps-sweep not built (tools/build, or --build)")
    os.makedirs(a.out, exist_ok=True)
    rho_cols = RHOS.split(",")
    print("| model | mechanism | reference (captured) | " + " | ".join(f"rho {r}" for r in rho_cols) + " |")
    print("|---|---|---|" + "---|" * len(rho_cols))
    for model in models:
        for name, flags, grouped, on, rhos in RUNS:
            if model not in on or (a.runs and not any(name.startswith(w) for w in a.runs.split(","))):
                continue
            rows = sweep(a.build, a.data, a.out, model, name, flags, rhos)
            top = reference(a.data, a.out, model, grouped, a.ref_rows)
            cells, ref = {}, None
            for r in rows:
                if r["status"] != "released" or not r["basis"]:
                    cells[f"{r['rho']:g}"] = r["status"]
                    continue
                share, ref = kept(a.data, model, r["basis"], top)
                cells[f"{r['rho']:g}"] = f"{share:.3f}{' W' if r['weak'] else ''}"
            refname = "group-wise top-10 each" if grouped else "top-10"
            refname += f" ({ref:.3f})" if ref is not None else ""  # None: nothing was released
            print(f"| {model} | {name} | {refname} | " +
                  " | ".join(cells.get(r, "") for r in rho_cols) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
