#!/usr/bin/python3
"""bench_accountant.py - time of dpsubspace.Accountant's eps over many DP-SGD
steps: the PLD method (FFT composition) and the RDP method, on one core,
against one numpy FFT of the composed grid's size measured in the same run
(the floor for any FFT composition of that law).

    /usr/bin/python3 tools/bench/bench_accountant.py [--repeat 3]

Prints, per (q, sigma, steps): eps of each method, the median seconds, the
composed grid's length, and the PLD time in units of that FFT.
"""
import argparse
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import numpy as np  # noqa: E402

import dpsubspace as dp  # noqa: E402
from dpsubspace import pld  # noqa: E402

CASES = [(2048 / 60000, 2.15, 1160), (2048 / 60000, 2.15, 10000), (0.01, 1.0, 10000), (0.04, 1.5, 2250),
         (0.001, 0.8, 100000)]


def median_time(fn, repeat):
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times)), out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    print(f"numpy {np.__version__}; delta 1e-5; median of {a.repeat}")
    print("| q | sigma | steps | pld eps | pld s | grid points | one FFT s | pld / FFT | rdp eps | rdp s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for q, sigma, steps in CASES:
        def run(method):
            acc = dp.Accountant(method)
            acc.add_steps(q, sigma, steps)
            return acc.get_epsilon(1e-5)
        t_pld, e_pld = median_time(lambda: run("pld"), a.repeat)
        t_rdp, e_rdp = median_time(lambda: run("rdp"), a.repeat)
        n = len(pld.compose_direction([(q, sigma, steps)], 0.0, "remove").mass)
        x = np.random.default_rng(0).random(pld._fft_size(2 * n))
        t_fft, _ = median_time(lambda: np.fft.irfft(np.fft.rfft(x)), a.repeat)
        print(f"| {q:.4g} | {sigma:g} | {steps} | {e_pld:.4f} | {t_pld:.3f} | {n} | {t_fft:.4f} | "
              f"{t_pld / t_fft:.0f} | {e_rdp:.4f} | {t_rdp:.3f} |", flush=True)


if __name__ == "__main__":
    main()
