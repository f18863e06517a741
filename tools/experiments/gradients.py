#!/usr/bin/python3
"""gradients.py - the per-example gradient test bed (issue 11 item 1, DESIGN 7).

  make      train a model non-privately on Fashion-MNIST (fixed seed) and write,
            at each checkpoint, per-example gradients as unit float32 rows (.npy)
  eval      captured held-out energy of a basis, next to the non-private top-k
            of the training rows and a random basis
  selftest  checks eval's arithmetic on synthetic data (numpy only, fast)

See tools/experiments/README.md, section "Gradient test bed".
"""
import argparse
import json
import os
import sys
import time

# One BLAS thread unless the caller says otherwise (the machine is shared);
# must be set before numpy loads OpenBLAS.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gradients_common import (CHUNK_BYTES, DATA_DIR, DEFAULT_OUT, GRAM_MAX_D, ORTHO_TOL, Fail, log,  # noqa: E402
                              set_quiet)
from gradients_make import cmd_make  # noqa: E402


# ---------------------------------------------------------------- eval (numpy)

def load_npy(path, what):
    if not os.path.exists(path):
        raise Fail(f"{path}: no such file ({what})")
    try:
        arr = np.load(path, mmap_mode="r")
    except Exception as e:
        raise Fail(f"{path}: not a readable .npy ({e})")
    if arr.ndim != 2:
        raise Fail(f"{path}: want a 2-d array ({what}), got shape {arr.shape}")
    if arr.dtype not in (np.float32, np.float64):
        raise Fail(f"{path}: want float32 or float64, got {arr.dtype}")
    return arr


def chunks(n, d, itemsize=4):
    step = max(1, CHUNK_BYTES // max(1, d * itemsize))
    for s in range(0, n, step):
        yield s, min(n, s + step)


def orthonormal_rows(V, allow_skewed, notes):
    """Checks V (k x d) has orthonormal rows; returns V with orthonormal rows (float64)."""
    V = np.asarray(V, dtype=np.float64)
    k, d = V.shape
    if k > d:
        raise Fail(f"basis has {k} rows but rows of length {d}: want k <= d (k x d, rows the directions)")
    dev = float(np.max(np.abs(V @ V.T - np.eye(k)))) if k else 0.0
    if dev > ORTHO_TOL and not allow_skewed:
        raise Fail(f"basis rows are not orthonormal (max |V V^T - I| = {dev:.3g} > {ORTHO_TOL}); "
                   f"pass --orthonormalise to use the span of its rows")
    q, r = np.linalg.qr(V.T)
    dr = np.abs(np.diag(r))
    if k and dr.min() < 1e-8 * max(1.0, dr.max()):
        raise Fail(f"basis rows are linearly dependent (rank < {k})")
    notes.append(f"basis: max |V V^T - I| = {dev:.2e}; orthonormalised by QR (same span)")
    return q.T


def captured(H, V):
    """sum_i ||V h_i||^2 / sum_i ||h_i||^2 for V with orthonormal rows; H streamed in chunks."""
    num = 0.0
    den = 0.0
    for s, e in chunks(H.shape[0], H.shape[1]):
        h = np.asarray(H[s:e], dtype=np.float64)
        num += float(np.sum((h @ V.T) ** 2))
        den += float(np.sum(h * h))
    if den == 0:
        raise Fail("held-out rows are all zero")
    return num / den


def topk_rows(X, k, seed, notes, power_iters=6):
    """Non-private top-k right singular vectors of X (n x d), k x d orthonormal rows.
    d <= GRAM_MAX_D: the d x d Gram; else n <= GRAM_MAX_D and the n x n Gram (n^2 d) is cheaper than
    the range finder's passes (about 4 (power_iters + 1) n d (k + 10)): the n x n Gram; else a
    randomized range finder with power iterations (never an n x n and a d x d at once)."""
    n, d = X.shape
    k = min(k, n, d)
    t0 = time.time()
    if d <= GRAM_MAX_D and d <= n:
        G = np.zeros((d, d))
        for s, e in chunks(n, d):
            x = np.asarray(X[s:e], dtype=np.float32)
            G += (x.T @ x).astype(np.float64)
            log(f"  top-k: d x d Gram {e}/{n} rows, {time.time() - t0:.1f} s")
        w, U = np.linalg.eigh(G)
        V = U[:, ::-1][:, :k].T
        notes.append(f"top-k: eigenvectors of the {d} x {d} Gram ({time.time() - t0:.1f} s)")
    elif n <= GRAM_MAX_D and n <= 4 * (power_iters + 1) * (k + 10):
        G = np.zeros((n, n))
        blocks = list(chunks(n, d))   # row blocks (a row-major .npy reads fast by rows)
        for i, (s, e) in enumerate(blocks):
            xi = np.asarray(X[s:e], dtype=np.float32)
            for s2, e2 in blocks[:i + 1]:
                xj = xi if s2 == s else np.asarray(X[s2:e2], dtype=np.float32)
                g = (xi @ xj.T).astype(np.float64)
                G[s:e, s2:e2] = g
                G[s2:e2, s:e] = g.T
            log(f"  top-k: n x n Gram {e}/{n} rows, {time.time() - t0:.1f} s")
        w, U = np.linalg.eigh(G)
        U = U[:, ::-1][:, :k]
        w = np.maximum(w[::-1][:k], 1e-300)
        V = np.zeros((k, d))
        for s, e in chunks(n, d):
            V += U[s:e].T @ np.asarray(X[s:e], dtype=np.float64)
        V /= np.sqrt(w)[:, None]
        V = np.linalg.qr(V.T)[0].T
        notes.append(f"top-k: through the {n} x {n} Gram ({time.time() - t0:.1f} s)")
    else:
        rng = np.random.default_rng(seed)
        p = min(d, k + 10)
        Q = np.linalg.qr(rng.standard_normal((d, p)))[0]
        for it in range(power_iters + 1):
            Y = np.zeros((d, p))
            for s, e in chunks(n, d):
                x = np.asarray(X[s:e], dtype=np.float64)
                Y += x.T @ (x @ Q)
            Q = np.linalg.qr(Y)[0]
            log(f"  top-k: range finder pass {it + 1}/{power_iters + 1}, {time.time() - t0:.1f} s")
        B = np.zeros((p, p))
        for s, e in chunks(n, d):
            z = np.asarray(X[s:e], dtype=np.float64) @ Q
            B += z.T @ z
        w, U = np.linalg.eigh(B)
        V = (Q @ U[:, ::-1][:, :k]).T
        notes.append(f"top-k: randomized range finder, {p} columns, {power_iters} power iterations "
                     f"({time.time() - t0:.1f} s)")
    return V


def parse_groups(groups, group_k, d):
    """[(first column, last column + 1, k_g)] from --groups D1,.. and --group-k K1,.. (or one k for all)."""
    try:
        sizes = [int(v) for v in groups.split(",")]
        ks = [int(v) for v in group_k.split(",")] if group_k else None
    except ValueError:
        raise Fail("--groups and --group-k want integers separated by commas")
    if any(v < 1 for v in sizes) or sum(sizes) != d:
        raise Fail(f"--groups {groups}: want positive sizes adding up to d = {d}")
    if ks is None or len(ks) != len(sizes) or any(v < 0 for v in ks):
        raise Fail(f"--group-k: want one rank (>= 0) per group ({len(sizes)})")
    out, a = [], 0
    for dg, kg in zip(sizes, ks):
        out.append((a, a + dg, min(kg, dg)))
        a += dg
    return out


def topk_groupwise(X, groups, seed, notes):
    """The non-private group-wise top-k_g: each group's top-k_g of its own columns, zero elsewhere
    (the shape of a private group-wise basis, sum k_g x d)."""
    d = X.shape[1]
    K = sum(kg for _, _, kg in groups)
    V = np.zeros((K, d))
    r = 0
    for a, b, kg in groups:
        if kg == b - a:
            V[r:r + kg, a:b] = np.eye(kg)
        elif kg:
            V[r:r + kg, a:b] = topk_rows(X[:, a:b], kg, seed, notes)
        r += kg
    notes.append(f"top-k: group-wise, ranks {[kg for _, _, kg in groups]} of groups "
                 f"{[b - a for a, b, _ in groups]} ({K} rows)")
    return V


def random_basis(k, d, seed):
    rng = np.random.default_rng(seed)
    return np.linalg.qr(rng.standard_normal((d, k)))[0].T


def evaluate(H, ks, basis=None, X=None, seed=0, notes=None, Vt=None):
    notes = [] if notes is None else notes
    d = H.shape[1]
    rows = []
    if Vt is None and X is not None:
        Vt = topk_rows(X, max(ks), seed, notes)
    for k in ks:
        r = {"k": k}
        if basis is not None:
            r["basis"] = captured(H, basis[:k]) if basis.shape[0] >= k else None
        if Vt is not None:
            r["topk"] = captured(H, Vt[:k])
        r["random"] = captured(H, random_basis(k, d, seed + k))
        r["random_expected"] = k / d
        if r.get("basis") is not None and r.get("topk"):
            r["basis_over_topk"] = r["basis"] / r["topk"]
        if r.get("basis") is not None:
            r["basis_over_random"] = r["basis"] / r["random"] if r["random"] > 0 else None
        rows.append(r)
    return rows, Vt


def cmd_eval(a):
    notes = []
    H = load_npy(a.heldout, "held-out rows")
    d = H.shape[1]
    V = None
    if a.basis:
        B = load_npy(a.basis, "basis")
        if B.shape[1] != d:
            if B.shape[0] == d and B.shape[1] < d:
                notes.append(f"basis is {B.shape[0]} x {B.shape[1]}: taken as d x k (columns the directions)")
                B = np.asarray(B).T
            else:
                raise Fail(f"{a.basis}: shape {B.shape} does not match held-out rows of length {d} (want k x {d})")
        V = orthonormal_rows(B, a.orthonormalise, notes)
    Vt = None
    if a.topk:
        T = load_npy(a.topk, "saved top-k basis")
        if T.shape[1] != d:
            raise Fail(f"{a.topk}: shape {T.shape} does not match held-out rows of length {d}")
        Vt = orthonormal_rows(T, False, [])
        notes.append(f"top-k: the {T.shape[0]} saved rows of {a.topk} (not recomputed)")
    train = a.train
    if Vt is not None:
        train = None
    elif train is None and "heldout" in os.path.basename(a.heldout):
        guess = os.path.join(os.path.dirname(a.heldout), os.path.basename(a.heldout).replace("heldout", "train"))
        if os.path.exists(guess):
            train = guess
            notes.append(f"training rows: {guess} (named after the held-out file; --train to choose)")
    X = None
    if train:
        X = load_npy(train, "training rows")
        if X.shape[1] != d:
            raise Fail(f"{train}: rows of length {X.shape[1]}, held-out rows of length {d}")
        if a.train_rows:
            if a.train_rows < 1:
                raise Fail("--train-rows must be positive")
            if a.train_rows < X.shape[0]:
                notes.append(f"top-k: the first {a.train_rows} of {X.shape[0]} training rows")
                X = X[:a.train_rows]
    groups = parse_groups(a.groups, a.group_k, d) if a.groups else None
    if groups and X is not None:
        Vt = topk_groupwise(X, groups, a.seed, notes)
        X = None
    if a.k:
        try:
            ks = sorted({int(k) for k in a.k.split(",")})
        except ValueError:
            raise Fail(f"--k {a.k!r}: want integers separated by commas")
    elif V is not None:
        ks = [V.shape[0]]
    elif Vt is not None:
        ks = [Vt.shape[0]]
    else:
        ks = [10]
    if ks[0] < 1 or ks[-1] > d:
        raise Fail(f"--k must be in 1..{d}")
    if Vt is not None and Vt.shape[0] < ks[-1]:
        raise Fail(f"{a.topk} has {Vt.shape[0]} rows: fewer than k = {ks[-1]}")
    if V is None and X is None and Vt is None:
        raise Fail("nothing to evaluate: give --basis and/or --train")
    if V is not None and V.shape[0] < ks[-1]:
        notes.append(f"basis has {V.shape[0]} rows: k above that is evaluated for the references only")
    t0 = time.time()
    rows, Vt = evaluate(H, ks, V, X, a.seed, notes, Vt)
    if a.save_topk and Vt is not None and not a.topk:
        np.save(a.save_topk, Vt.astype(np.float32))
        notes.append(f"top-{Vt.shape[0]} basis of the training rows written to {a.save_topk}")
    out = {"heldout": a.heldout, "heldout_rows": int(H.shape[0]), "d": int(d),
           "basis": a.basis, "train": train, "train_rows": int(X.shape[0]) if X is not None else a.train_rows,
           "topk_file": a.topk, "groups": a.groups, "group_k": a.group_k,
           "seed": a.seed, "results": rows, "notes": notes, "seconds": round(time.time() - t0, 1)}
    table = sys.stderr if a.json == "-" else sys.stdout
    for n in notes:
        print("# " + n, file=table)
    print(f"# captured = sum ||V h||^2 / sum ||h||^2 over {H.shape[0]} held-out rows, d = {d}", file=table)
    hdr = f"{'k':>5}  {'basis':>10}  {'top-k':>10}  {'random':>10}  {'k/d':>10}  {'basis/top-k':>11}  {'basis/random':>12}"
    print(hdr, file=table)

    def f(v, w=10):
        return f"{v:>{w}.4g}" if isinstance(v, float) else f"{'-':>{w}}"
    for r in rows:
        print(f"{r['k']:>5}  {f(r.get('basis'))}  {f(r.get('topk'))}  {f(r['random'])}  "
              f"{f(r['random_expected'])}  {f(r.get('basis_over_topk'), 11)}  {f(r.get('basis_over_random'), 12)}",
              file=table)
    if a.json:
        text = json.dumps(out, indent=1)
        if a.json == "-":
            print(text)
        else:
            with open(a.json, "w") as fh:
                fh.write(text + "\n")
    return 0


# ---------------------------------------------------------------- selftest

def cmd_selftest(a):
    set_quiet(True)
    passed = failed = 0

    def check(cond, what):
        nonlocal passed, failed
        if cond:
            passed += 1
        else:
            failed += 1
            print(f"FAIL: {what}")

    rng = np.random.default_rng(1)
    d, k, n = 60, 4, 300
    B = np.linalg.qr(rng.standard_normal((d, k)))[0].T           # k x d orthonormal
    H = (rng.standard_normal((n, k)) @ B).astype(np.float32)      # rows in span(B)
    check(abs(captured(H, B) - 1) < 1e-6, "a basis equal to the rows' span captures 1")
    P = np.eye(d) - B.T @ B
    W = np.linalg.qr(P @ rng.standard_normal((d, k)))[0].T
    check(captured(H, W) < 1e-10, "a basis orthogonal to the rows' span captures 0")
    # rows e_0 .. e_{d-1} each once: a k-dim coordinate basis captures exactly k/d
    E = np.eye(d, dtype=np.float32)
    check(abs(captured(E, np.eye(d)[:k]) - k / d) < 1e-12, "coordinate basis on the identity captures k/d")
    # a known split: rows with energy 3 on e0 and 1 on e1 -> basis e0 captures 0.75
    H2 = np.zeros((2, d), np.float32)
    H2[0, 0] = np.sqrt(3)
    H2[1, 1] = 1
    check(abs(captured(H2, np.eye(d)[:1]) - 0.75) < 1e-7, "weighted rows: e0 captures 3/4")
    # orthonormalisation of a skewed basis: same span, orthonormal rows; refused without the flag
    S = np.array([[2.0, 0.0], [1.0, 1.0]]) @ B[:2]
    notes = []
    try:
        orthonormal_rows(S, False, notes)
        check(False, "a skewed basis is refused without --orthonormalise")
    except Fail:
        check(True, "")
    Q = orthonormal_rows(S, True, notes)
    check(np.allclose(Q @ Q.T, np.eye(2), atol=1e-12), "orthonormalised rows are orthonormal")
    check(np.allclose(Q.T @ Q, B[:2].T @ B[:2], atol=1e-12), "orthonormalisation keeps the span")
    try:
        orthonormal_rows(np.vstack([B[0], B[0]]), True, [])
        check(False, "a rank-deficient basis is refused")
    except Fail:
        check(True, "")
    # the non-private top-k, each path, finds a planted subspace (rows = span + small noise)
    X = (rng.standard_normal((n, k)) * [5, 4, 3, 2]) @ B + 0.01 * rng.standard_normal((n, d))
    X = (X / np.linalg.norm(X, axis=1, keepdims=True)).astype(np.float32)
    global GRAM_MAX_D
    keep = GRAM_MAX_D
    try:
        for gmax, path in ((10 ** 6, "d x d Gram"), (n, "n x n Gram"), (1, "range finder")):
            GRAM_MAX_D = gmax
            for XX in (X, X[:d // 2]) if gmax == n else (X,):
                V = topk_rows(XX, k, 0, [])
                err = np.linalg.norm(V.T @ V - B.T @ B, 2)
                check(err < 0.05, f"top-k by the {path} (n={XX.shape[0]}) finds the planted span (err {err:.3g})")
                check(np.allclose(V @ V.T, np.eye(k), atol=1e-8), f"top-k by the {path} is orthonormal")
    finally:
        GRAM_MAX_D = keep
    # a random k-dim basis captures about k/d of isotropic rows
    Z = rng.standard_normal((2000, d)).astype(np.float32)
    c = captured(Z, random_basis(k, d, 3))
    check(abs(c - k / d) < 0.2 * k / d, f"random basis on isotropic rows ~ k/d (got {c:.4f}, want {k / d:.4f})")
    # evaluate() wiring: basis = top-k gives ratio 1
    rows, Vt = evaluate(X[:100], [2, 4], Vt_basis := topk_rows(X, 4, 0, []), X, 0, [])
    check(all(abs(r["basis_over_topk"] - 1) < 1e-9 for r in rows), "the top-k as the basis: basis/top-k = 1")
    # group-wise top-k_g: two groups with known planted spans; each block only its own columns
    Xg = np.zeros((n, d), np.float32)
    Xg[:, :d // 2] = X[:, :d // 2]
    Xg[:, d // 2 + 3] = 7 * rng.standard_normal(n)  # group 2's one strong coordinate
    gs = parse_groups(f"{d // 2},{d - d // 2}", "2,1", d)
    Vg = topk_groupwise(Xg, gs, 0, [])
    check(Vg.shape == (3, d) and np.allclose(Vg @ Vg.T, np.eye(3), atol=1e-8), "group-wise top-k: 3 orthonormal rows")
    check(np.all(Vg[:2, d // 2:] == 0) and np.all(Vg[2, :d // 2] == 0), "group-wise top-k: zero outside each block")
    check(abs(abs(Vg[2, d // 2 + 3]) - 1) < 1e-6, "group 2's top-1 is its strong coordinate")
    for bad in (("5,5", "1,1"), (f"{d // 2},{d - d // 2}", "1")):
        try:
            parse_groups(bad[0], bad[1], d)
            check(False, f"groups {bad} refused")
        except Fail:
            check(True, "")
    # the CLI end to end on files: results, JSON, and one-line errors (exit 2)
    import contextlib
    import io
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        f = {name: os.path.join(tmp, name + ".npy") for name in ("held", "train", "basis", "skew", "wide")}
        np.save(f["held"], X[:100])
        np.save(f["train"], X[100:])
        np.save(f["basis"], B.astype(np.float32))
        np.save(f["skew"], S.astype(np.float32))
        np.save(f["wide"], np.zeros((2, d + 1), np.float32))
        js = os.path.join(tmp, "r.json")
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            rc = main(["eval", "--heldout", f["held"], "--basis", f["basis"], "--train", f["train"],
                       "--k", "2,4", "--json", js])
        check(rc == 0, f"eval on files runs (rc {rc}: {err.getvalue().strip()})")
        if rc == 0:
            with open(js) as fh:
                res = json.load(fh)["results"]
            check([r["k"] for r in res] == [2, 4], "JSON has one result per k")
            check(abs(res[1]["basis"] - res[1]["topk"]) < 0.01 and res[1]["basis"] > 0.99,
                  f"the planted basis captures what the top-4 does, ~1 (got {res[1]['basis']:.4f})")
        for args, what in ((["--basis", os.path.join(tmp, "missing.npy")], "missing file"),
                           (["--basis", f["wide"]], "wrong shape"),
                           (["--basis", f["skew"]], "non-orthonormal basis"),
                           ([], "nothing to evaluate")):
            err = io.StringIO()
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                rc = main(["eval", "--heldout", f["held"]] + args)
            lines = err.getvalue().strip().splitlines()
            check(rc == 2 and len(lines) == 1 and lines[0].startswith("gradients.py eval: "),
                  f"{what}: one-line error and exit 2 (rc {rc}, {lines})")
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            rc = main(["eval", "--heldout", f["held"], "--basis", f["skew"], "--orthonormalise"])
        check(rc == 0, "--orthonormalise accepts the skewed basis")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


# ---------------------------------------------------------------- CLI

class Help(argparse.ArgumentDefaultsHelpFormatter):
    """Shows a flag's default unless it is None or False (or its help already says it)."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False or "default:" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="gradients.py", formatter_class=argparse.RawDescriptionHelpFormatter,
        description=__doc__.split("\n\n")[0] + "\n\nSubcommands: make, eval, selftest "
        "(gradients.py SUBCOMMAND --help for each).",
        epilog="Errors (missing files, wrong shapes, a non-orthonormal basis, an unknown model) are one line "
               "on stderr and exit status 2.")
    sub = p.add_subparsers(dest="cmd", metavar="SUBCOMMAND")

    m = sub.add_parser("make", formatter_class=Help,
                       help="train non-privately and write per-example gradients (needs python3-torch, "
                            "dataset-fashion-mnist)",
                       description="Trains MODEL on Fashion-MNIST's training split (pixels byte/255; by default SGD lr 0.01, momentum 0.9, "
                       "fixed seed, 1 torch thread) and at each checkpoint (after E epochs; 0 = the random "
                       "initialisation) writes into OUT: MODEL-eE-train.npy (ROWS per-example gradients of a "
                       "seeded sample of training examples, float32, one row per example, each scaled to "
                       "unit L2 norm as the collector sees it), MODEL-eE-heldout.npy (HELDOUT rows from the "
                       "test split: examples the training rows do not contain) and MODEL-eE.json (model, d, "
                       "epoch, test accuracy, each parameter tensor's name and numel in row order, seed, "
                       "counts, time). Prints the disk and memory it needs first, progress on stderr, and one "
                       "line per checkpoint on stdout. Times measured here (1 thread, shared machine): writing 2000+1000 "
                       "rows takes ~1 s (logreg), ~7 s (mlp), ~3 s (cnn) per checkpoint; a training epoch ~0.5 s, "
                       "~1-2 s, ~25-40 s; the whole default run ~5 s, ~12 s, ~1 min (cnn, epochs 1 and 5: ~3 min). "
                       "Rows scale linearly: 60 000 mlp rows would be 24 GB on disk.")
    m.add_argument("--model", required=True, help="logreg (d=7850), mlp (784-128-10, d=101770) or cnn "
                   "(conv5x5x16-pool-conv5x5x32-pool-fc64-fc10, d=46730)")
    m.add_argument("--rows", type=int, default=2000, help="training examples whose gradients are written "
                   "(N x d x 4 bytes: the MLP's 2000 rows are 0.8 GB)")
    m.add_argument("--heldout", type=int, default=1000, help="held-out gradients (test split)")
    m.add_argument("--checkpoint-epochs", default="1", help="epochs of training at which to write, "
                   "comma-separated (training is incremental: 0,1,5 trains 5 epochs)")
    m.add_argument("--seed", type=int, default=0, help="seed of the initialisation, the training order and "
                   "the choice of examples")
    m.add_argument("--out", default=DEFAULT_OUT, help="output directory (the default is git-ignored)")
    m.add_argument("--data", default=DATA_DIR, help="directory of Fashion-MNIST's four .gz files")
    m.add_argument("--batch", type=int, default=128, help="examples per vmap batch of per-example gradients "
                   "(memory ~3 x batch x d x 4 bytes)")
    m.add_argument("--train-batch", type=int, default=64, help="minibatch of the non-private training")
    m.add_argument("--optimizer", default="sgd", help="sgd or adam")
    m.add_argument("--momentum", type=float, default=0.9, help="SGD momentum")
    m.add_argument("--lr", type=float, default=0.01, help="learning rate")
    m.add_argument("--threads", type=int, default=1, help="torch threads (the machine is shared)")

    e = sub.add_parser("eval", formatter_class=Help,
                       help="captured held-out energy of a basis, vs the top-k and a random basis (numpy only)",
                       description="Prints, for each k, the share of the held-out rows' energy captured "
                       "by a basis V (k x d, orthonormal rows): sum_i ||V h_i||^2 / sum_i ||h_i||^2 -- for "
                       "BASIS (its first k rows), for the non-private top-k right singular vectors of the "
                       "TRAIN rows, and for a seeded random k-dim subspace (expected k/d), with the ratios "
                       "basis/top-k and basis/random. The basis is checked: rows orthonormal to within "
                       f"{ORTHO_TOL} are re-orthonormalised by QR (a note says so); others are refused "
                       "unless --orthonormalise. The top-k goes through the d x d Gram when "
                       f"d <= {GRAM_MAX_D} and d <= n, else the n x n Gram when n <= {GRAM_MAX_D} and it is the "
                       "cheaper (n below 28 (k + 10)), else a "
                       "randomized range finder: never an n x n and a d x d matrix at once. Output: a table on "
                       "stdout ('#' lines are notes), and JSON with --json.")
    e.add_argument("--heldout", required=True, help="held-out rows, n x d .npy (float32/64)")
    e.add_argument("--basis", help="basis to evaluate, k x d .npy (a d x k array is transposed, with a note); "
                   "omit to print the references only")
    e.add_argument("--train", help="training rows for the non-private top-k (default: the held-out file's "
                   "name with 'heldout' replaced by 'train', if it exists)")
    e.add_argument("--k", help="k, or several separated by commas (default: the basis's row count, else 10)")
    e.add_argument("--train-rows", type=int, help="use only the first N training rows for the top-k "
                   "(the MLP's 60 000 rows are 24 GB; the top-k of 10 000 is within 0.01 of it)")
    e.add_argument("--groups", help="parameter group sizes D1,D2,... (adding up to d): the reference becomes "
                   "the group-wise non-private top-k_g (each group's top-k_g of its own columns), the shape "
                   "of a private basis released with --param-groups")
    e.add_argument("--group-k", help="each group's rank K1,K2,... (with --groups)")
    e.add_argument("--orthonormalise", action="store_true", help="accept a basis whose rows are not "
                   "orthonormal and use the span of its rows")
    e.add_argument("--seed", type=int, default=0, help="seed of the random basis (seed + k for each k)")
    e.add_argument("--json", help="write the results as JSON to this file ('-': JSON on stdout, table on stderr)")
    e.add_argument("--topk", metavar="FILE", help="a top-k basis saved by --save-topk, used instead of "
                   "computing it from the training rows (the d x d eigh takes minutes at d = 7850)")
    e.add_argument("--save-topk", metavar="FILE", help="write the non-private top-k basis (largest k) as "
                   "k x d float32 .npy")

    sub.add_parser("selftest", help="check eval's arithmetic on synthetic data (numpy only, < 5 s)",
                   description="Checks captured energy on data with known answers (the data's span "
                   "captures 1, an orthogonal basis 0, k/d on isotropic rows), the orthonormalisation of "
                   "a skewed basis, and each top-k path on a planted subspace. Last line: N passed, N failed.")
    a = p.parse_args(argv)
    if a.cmd is None:
        p.print_help()
        return 2
    try:
        return {"make": cmd_make, "eval": cmd_eval, "selftest": cmd_selftest}[a.cmd](a)
    except Fail as err:
        print(f"gradients.py {a.cmd}: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
