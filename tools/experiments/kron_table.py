#!/usr/bin/python3
"""kron_table.py - the Kronecker-factored basis (--aggregator kron, DESIGN 7.6) against the present mechanisms.

For each model and rho, one epoch of every training row of DATA/MODEL-e1-train.npy (dps-sweep: the rows read
once for all rhos, seeded noise) through:
  kron    --aggregator kron, the weight tensors shaped out x in (gradient_table.GROUPS with SHAPES), biases as
          the gaussian aggregator's groups;
  groups  --aggregator gaussian --param-groups (the tensors; the groups wider than 8192 by the power iteration);
  power   --aggregator power, one group (the whole row, k = 10).
k_g = 10 for every group (capped at its width).  On the held-out rows: each group's captured energy on its own
block of the released basis over that of the non-private group-wise top-k_g (gradient_table's cached reference),
"random" that of a uniformly random k_g-dim basis of the group's columns; the one-group power basis against the
non-private top-10 of the whole row.  kron also runs at rho 1e6 (noise negligible): what the Kronecker products
can hold at best, the structural limit.  Writes the table as CSV (--csv) and markdown on stdout.

    tools/experiments/kron_table.py --data DATA --out OUT [--models mlp,cnn] [--rhos 0.01,0.1,1]
        [--csv tools/experiments/results/kron.csv]
"""
import argparse
import csv
import json
import os
import shutil
import subprocess
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gradient_table import GROUPS, ROOT, reference  # noqa: E402
from gradients import captured  # noqa: E402
from group_levels import above, captured_per_group  # noqa: E402

K = 10
DENSE_MAX_D = 8192
WEAK = 0.75
# the weight tensors as torch flattens them: Linear (out, in), Conv (out, in, kh, kw) -> out x in*kh*kw
SHAPES = {"mlp": "128x784,128,10x128,10", "cnn": "16x25,16,32x400,32,64x512,64,10x64,10"}
NOISE_FREE = "1e+06"


def sweep(a, model, name, flags, rhos):
    """dps-sweep once per (model, mechanism) unless its JSON lines are in OUT; {rho string: entry}."""
    base = os.path.join(a.out, f"{model}-{name}-")
    jl = base + "sweep.jsonl"
    if not os.path.exists(jl):
        cmd = [os.path.join(a.build, "tools/experiments/dps-sweep"), "--in",
               os.path.join(a.data, f"{model}-e1-train.npy"), "--k", str(K), "--rhos", rhos, "--seed", str(a.seed),
               "--out-prefix", base] + flags
        print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
        with open(jl + ".part", "w") as o:
            subprocess.run(cmd, check=True, stdout=o)
        os.rename(jl + ".part", jl)
    with open(jl) as fh:
        return {f"{e['rho']:g}": e for e in (json.loads(line) for line in fh if line.strip())}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--data", required=True, help="directory of gradients.py make's rows (MODEL-e1-train/heldout.npy)")
    p.add_argument("--out", required=True, help="directory for the bases, the JSON and the references")
    p.add_argument("--refs", help="a directory with cached references MODEL-top-groups.npy / MODEL-top-10.npy "
                                  "(copied into OUT)")
    p.add_argument("--models", default="mlp,cnn")
    p.add_argument("--rhos", default="0.01,0.1,1")
    p.add_argument("--seed", type=int, default=1, help="seeded noise: seed + the rho's index")
    p.add_argument("--build", default=os.path.join(ROOT, "build"), help="build directory with dps-sweep")
    p.add_argument("--ref-rows", type=int, default=10000, help="training rows of the non-private references")
    p.add_argument("--csv", help="write the table here too")
    a = p.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    rows = []
    print("| model | rho | mechanism | group | shape | k_g | level | WEAK | kept | random | above random |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for model in a.models.split(","):
        for f in (f"{model}-top-groups.npy", f"{model}-top-10.npy"):
            if a.refs and os.path.exists(os.path.join(a.refs, f)) and not os.path.exists(os.path.join(a.out, f)):
                shutil.copy(os.path.join(a.refs, f), os.path.join(a.out, f))
        widths = [int(v) for v in GROUPS[model].split(",")]
        shapes = SHAPES[model].split(",")
        gk = ",".join(str(min(K, w)) for w in widths)
        groups, c0, r0 = [], 0, 0
        for dg in widths:
            kg = min(K, dg)
            groups.append((c0, c0 + dg, r0, r0 + kg))
            c0, r0 = c0 + dg, r0 + kg
        H = np.load(os.path.join(a.data, f"{model}-e1-heldout.npy"), mmap_mode="r")
        T = np.load(reference(a.data, a.out, model, True, a.ref_rows))
        T10 = np.load(reference(a.data, a.out, model, False, a.ref_rows))
        ref, energy = captured_per_group(H, [T], groups)
        ref = ref[0]
        rand = np.array([(r1 - r0) / (c1 - c0) * energy[g] for g, (c0, c1, r0, r1) in enumerate(groups)])
        ref10 = captured(H, T10)  # the share of the held-out energy in the whole row's top-10
        runs = [("kron", ["--aggregator", "kron", "--param-groups", SHAPES[model], "--group-k", gk],
                 a.rhos + "," + NOISE_FREE),
                ("groups", ["--aggregator", "gaussian", "--param-groups", GROUPS[model], "--group-k", gk], a.rhos),
                ("power", ["--aggregator", "power"], a.rhos)]
        for name, flags, rhos in runs:
            got = sweep(a, model, name, flags, rhos)
            for rho in rhos.split(","):
                e = got[f"{float(rho):g}"]
                if e["status"] != "released":
                    print(f"| {model} | {rho} | {name} | all | | | {e['status']} | | | | |")
                    continue
                B = np.load(e["basis"])
                label = "noise-free" if rho == NOISE_FREE else rho
                if name == "power":  # one group: against the whole row's top-10
                    out = [(model, label, name, "all", str(H.shape[1]), K, e["noise_level"], e["weak"],
                            captured(H, B) / ref10, K / H.shape[1] / ref10)]
                else:
                    cap = captured_per_group(H, [B], groups)[0][0]
                    out = []
                    for g, (c0, c1, r0, r1) in enumerate(groups):
                        how = shapes[g] if name == "kron" and "x" in shapes[g] else \
                            f"{c1 - c0} ({'power' if c1 - c0 > DENSE_MAX_D else 'dense'})"
                        lv = e["group_noise_level"][g]
                        out.append((model, label, name, str(g + 1), how, r1 - r0, lv, lv is not None and lv >= WEAK,
                                    cap[g] / ref[g], rand[g] / ref[g]))
                    out.append((model, label, name, "all", str(sum(widths)), groups[-1][3], e["noise_level"],
                                e["weak"], cap.sum() / ref.sum(), rand.sum() / ref.sum()))
                for r in out:
                    m_, rho_, n_, g_, shape, kg, lv, weak, kept, rnd = r
                    rnd = min(rnd, 1.0)
                    rows.append({"model": m_, "rho": rho_, "mechanism": n_, "group": g_, "shape": shape, "k_g": kg,
                                 "level": "" if lv is None else f"{lv:.4g}", "weak": int(bool(weak)),
                                 "kept": f"{kept:.4f}", "random": f"{rnd:.4f}",
                                 "above_random": f"{above(kept, rnd):.4f}"})
                    print(f"| {m_} | {rho_} | {n_} | {g_} | {shape} | {kg} | "
                          f"{'' if lv is None else f'{lv:.3g}'} | {'W' if weak else '-'} | {kept:.3f} | {rnd:.3f} | "
                          f"{above(kept, rnd):.3f} |", flush=True)
    if a.csv:
        with open(a.csv, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0].keys()))
            w.writeheader()
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
