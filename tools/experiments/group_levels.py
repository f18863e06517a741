#!/usr/bin/python3
"""group_levels.py - the noise level of each parameter group against what that group keeps.

For each model and rho: dps-estimate --method gaussian --param-groups (the model's tensors,
gradient_table.GROUPS; k_g = 10 capped at the group's width, one epoch of every training row, seeded
noise: --seed + the rho's index), and the same release as an epoch of t m = the rows' count cut by index
(--method estimator --aggregator gaussian --t N/10 --m 10: the collector's epoch, where the row count is
public and the release's level can bound a dead power group by it; the same basis bit for bit, the same
group levels); then, on the held-out rows, each group's captured energy on its own
block of the released basis over that of the non-private group-wise top-k_g (gradient_table's cached
reference, from the first --ref-rows training rows).  "random" is what a uniformly random k_g-dimensional
basis of the group's columns keeps in expectation, (k_g / d_g) ||H_g||^2 over the reference's captured
energy (about 0 for a wide group, 0.6 or more for 10 of 16 or 32 columns); "above random" is
(kept - random) / (1 - random).  Prints a markdown table, one line per group and one for the whole
release in each form ("all, input" and "all, t m": the snapshot's level and WEAK, the kept share summed
over the groups as in the gradient table; with --before BUILD, the level another build's dps-estimate
gives the same seeded release), then how the rule "kept < 0.2 is WEAK, kept >= 0.6 is not" fared, on kept and on kept above
random (a group whose basis spans its columns keeps everything and is not judged).  Needs the rows of
gradients.py make --model M --heldout 2000 --out DATA and dps-estimate built (tools/build).

    tools/experiments/group_levels.py --data DATA --out OUT [--models mlp,cnn] [--rhos 0.1,0.25,1,4]
        [--before BUILD]
"""
import argparse
import json
import os
import subprocess
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gradient_table import GROUPS, ROOT, reference  # noqa: E402
from gradients import chunks  # noqa: E402

K = 10
DENSE_MAX_D = 8192  # dps-estimate's --dense-max-d default: wider groups go by the power iteration


def release(a, estimate, model, rho, seed, form, tag=""):
    """Run dps-estimate once (unless its JSON is in OUT) as one epoch of the input (form "input") or an
    epoch of t m = the rows' count (form "tm"); the basis path and the release's JSON entry."""
    base = os.path.join(a.out, f"{model}-groups-{form}-rho{rho}{tag}")
    js = base + ".json"
    if not os.path.exists(js):
        train = os.path.join(a.data, f"{model}-e1-train.npy")
        n = np.load(train, mmap_mode="r").shape[0]
        how = ["--method", "gaussian"] if form == "input" else \
            ["--method", "estimator", "--aggregator", "gaussian", "--t", str(n // 10), "--m", "10"]
        cmd = [estimate, train, "--k", str(K), *how, "--param-groups", GROUPS[model], "--rho", rho, "--seed",
               str(seed), "--out", base + ".npy", "--json", js + ".part", "--quiet"]
        print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
        subprocess.run(cmd, check=True)
        os.rename(js + ".part", js)
    with open(js) as fh:
        return base + ".npy", json.load(fh)["epochs"][0]


def captured_per_group(H, bases, groups):
    """For each basis (group-wise, sum k_g x d) and group: sum over held-out rows of ||V_g h_g||^2; and
    each group's sum of ||h_g||^2."""
    out, energy = np.zeros((len(bases), len(groups))), np.zeros(len(groups))
    for s, e in chunks(H.shape[0], H.shape[1]):
        h = np.asarray(H[s:e], dtype=np.float64)
        for g, (c0, c1, r0, r1) in enumerate(groups):
            energy[g] += float(np.sum(h[:, c0:c1] ** 2))
            for i, V in enumerate(bases):
                out[i, g] += float(np.sum((h[:, c0:c1] @ np.asarray(V[r0:r1, c0:c1], dtype=np.float64).T) ** 2))
    return out, energy


def above(kept, random):
    return (kept - random) / (1 - random) if random < 1 else float("nan")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--data", required=True, help="directory of gradients.py make's rows (MODEL-e1-train/heldout.npy)")
    p.add_argument("--out", required=True, help="directory for the bases, the JSON and the references")
    p.add_argument("--models", default="mlp,cnn")
    p.add_argument("--rhos", default="0.1,0.25,1,4")
    p.add_argument("--seed", type=int, default=1, help="seeded noise: seed + the rho's index")
    p.add_argument("--build", default=os.path.join(ROOT, "build"), help="build directory with dps-estimate")
    p.add_argument("--ref-rows", type=int, default=10000, help="training rows of the non-private references")
    p.add_argument("--before", help="another build directory: the level its dps-estimate gives each release")
    a = p.parse_args(argv)
    estimate = os.path.join(a.build, "src/cli/dps-estimate")
    before = os.path.join(a.before, "src/cli/dps-estimate") if a.before else None
    for b in (estimate, before):
        if b and not os.access(b, os.X_OK):
            p.error(f"{b} not built (tools/build, or --build / --before)")
    os.makedirs(a.out, exist_ok=True)
    print("| model | rho | group | d_g | k_g | how | share of the reference | level | WEAK | kept | random | "
          "above random |" + (" level before |" if before else ""))
    print("|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|" if before else ""))
    judged = []  # (what, kept, above random, weak, level)
    for model in a.models.split(","):
        widths = [int(v) for v in GROUPS[model].split(",")]
        groups, c0, r0 = [], 0, 0
        for dg in widths:
            kg = min(K, dg)
            groups.append((c0, c0 + dg, r0, r0 + kg))
            c0, r0 = c0 + dg, r0 + kg
        H = np.load(os.path.join(a.data, f"{model}-e1-heldout.npy"), mmap_mode="r")
        T = np.load(reference(a.data, a.out, model, True, a.ref_rows))
        ref = None
        for i, rho in enumerate(a.rhos.split(",")):
            path, e = release(a, estimate, model, rho, a.seed + i, "input")
            if e["status"] != "released":
                print(f"| {model} | {rho} | all | | | | | {e['status']} | | |")
                continue
            forms = [("input", e)] + [("t m", release(a, estimate, model, rho, a.seed + i, "tm")[1])]
            olds = [release(a, before, model, rho, a.seed + i, f, "-before")[1]["noise_level"]
                    for f in ("input", "tm")] if before else None
            B = np.load(path)
            if ref is None:
                ref, energy = captured_per_group(H, [T], groups)
                ref = ref[0]
                rand = np.array([(r1 - r0) / (c1 - c0) * energy[g] for g, (c0, c1, r0, r1) in enumerate(groups)])
            got = captured_per_group(H, [B], groups)[0][0]
            for g, (c0, c1, r0, r1) in enumerate(groups):
                level, weak = e["group_noise_level"][g], e["group_weak"][g]
                kept, random = got[g] / ref[g], rand[g] / ref[g]
                how = "power" if c1 - c0 > DENSE_MAX_D else "dense"
                print(f"| {model} | {rho} | {g + 1} | {c1 - c0} | {r1 - r0} | {how} | {ref[g] / ref.sum():.3f} | "
                      f"{level:.3g} | {'W' if weak else '-'} | {kept:.3f} | {min(random, 1):.3f} | "
                      f"{above(kept, random):.3f} |" + (" |" if before else ""))
                if r1 - r0 < c1 - c0:  # a group whose basis spans its columns keeps everything: nothing to judge
                    judged.append((f"{model} rho {rho} group {g + 1}", kept, above(kept, random), weak, level))
            kept, random = got.sum() / ref.sum(), rand.sum() / ref.sum()
            for j, (form, f) in enumerate(forms):
                print(f"| {model} | {rho} | all, {form} | {sum(widths)} | {groups[-1][3]} | | 1 | "
                      f"{f['noise_level']:.3g} | {'W' if f['weak'] else '-'} | {kept:.3f} | {random:.3f} | "
                      f"{above(kept, random):.3f} |" + (f" {olds[j]:.3g} |" if before else ""), flush=True)
                judged.append((f"{model} rho {rho} all, {form}", kept, above(kept, random), f["weak"],
                               f["noise_level"]))
    print()
    for col, name in ((1, "kept"), (2, "kept above random")):
        low = [j for j in judged if j[col] < 0.2]
        high = [j for j in judged if j[col] >= 0.6]
        mid = [j for j in judged if 0.2 <= j[col] < 0.6]
        print(f"{name} < 0.2: {sum(j[3] for j in low)} of {len(low)} WEAK"
              + (f" (levels >= {min(j[4] for j in low):.3g})" if low else "")
              + f"; >= 0.6: {sum(not j[3] for j in high)} of {len(high)} not WEAK"
              + (f" (levels <= {max(j[4] for j in high):.3g})" if high else "")
              + f"; 0.2-0.6: {sum(j[3] for j in mid)} of {len(mid)} WEAK")
        for j in judged:
            if (j[col] < 0.2 and not j[3]) or (j[col] >= 0.6 and j[3]):
                print(f"  against the rule on {name}: {j[0]}: kept {j[1]:.3f}, above random {j[2]:.3f}, "
                      f"level {j[4]:.3g}, {'WEAK' if j[3] else 'not WEAK'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
