"""Helpers shared by fig2.py and tune.py: find/build dps-fig2, run it, trimmed means."""
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
FIELDS = ["d", "k", "tau_over_d", "rep", "method", "err_mean", "sin_subspace", "status", "seconds"]


def find_binary(path=None, build_dir=DEFAULT_BUILD, build=True):
    """Path of dps-fig2; configure and build it in build_dir when missing."""
    if path:
        if not os.access(path, os.X_OK):
            sys.exit(f"dps-fig2 not found at {path}")
        return path
    exe = os.path.join(build_dir, "tools", "experiments", "dps-fig2")
    if not os.access(exe, os.X_OK) and build:
        print(f"building dps-fig2 in {build_dir} ...", flush=True)
        subprocess.run(["cmake", "-S", REPO, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release"],
                       check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["cmake", "--build", build_dir, "-j2", "--target", "dps-fig2"], check=True,
                       stdout=subprocess.DEVNULL)
    if not os.access(exe, os.X_OK):
        sys.exit(f"dps-fig2 not found at {exe}: build it (see tools/experiments/README.md)")
    return exe


def run_point(exe, args, log=None, progress=None, reps=None):
    """Run dps-fig2 with args (list of str); return (CSV rows as dicts, stderr text).

    stderr ('#' notes: failures, diagnostics) goes to log (a file object) if
    given.  progress(rep_done, elapsed) is called as repetitions finish."""
    cmd = [exe] + [str(a) for a in args]
    t0 = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out_lines = []
    last_rep = None
    for line in proc.stdout:
        out_lines.append(line)
        if progress and not line.startswith("d,"):
            rep = line.split(",")[3]
            if rep != last_rep and last_rep is not None:
                progress(last_rep, time.time() - t0)
            last_rep = rep
    err = proc.stderr.read()
    rc = proc.wait()
    if log is not None:
        log.write(f"$ {' '.join(cmd)}\n{err}")
        log.flush()
    if rc != 0:
        sys.stderr.write(err)
        raise RuntimeError(f"{' '.join(cmd)} exited with {rc}")
    rows = list(csv.DictReader(io.StringIO("".join(out_lines))))
    return rows, err


def trimmed_mean(values, lo=0.1, hi=0.9):
    """Mean of the values between the lo and hi quantiles (inclusive), as in
    the paper's Figure 2; nan for no values."""
    v = np.asarray([x for x in values if x == x], dtype=float)
    if v.size == 0:
        return float("nan")
    a, b = np.quantile(v, [lo, hi])
    keep = v[(v >= a) & (v <= b)]
    return float(keep.mean()) if keep.size else float(np.median(v))


def fnum(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return float("nan")
