#!/usr/bin/python3
"""test_p1_compare - tools/bench/p1-compare's report (issue 13): on a kept
bench-ingest output the figures it prints are the medians of that file's RESULT
lines (computed here from the file, not copied), and a measurement cut short
by the next run's header is dropped, not credited to the next run.

Run by ctest (p1_compare): /usr/bin/python3 tests/tools/test_p1_compare.py.
Prints "N passed, N failed"; exits 1 on a failure."""
import os
import re
import statistics
import subprocess
import sys
import tempfile

_here = os.path.dirname(os.path.abspath(__file__))
_root = os.path.join(_here, "..", "..")
sys.path.insert(0, os.path.dirname(_here))
from pycheck import check, summary  # noqa: E402

TOOL = os.path.join(_root, "tools", "bench", "p1-compare")
KEPT = os.path.join(_root, "tools", "bench", "results", "p1-3999ca8-vs-26132e7.txt")


def report(path):
    r = subprocess.run([sys.executable, TOOL, "--parse", path], capture_output=True, text=True)
    rows = {}
    for line in r.stdout.splitlines():
        parts = line.split("|")  # d sec subject | before /raw, rows/s | after ... | after/before
        if len(parts) == 4 and parts[0].split() and parts[0].split()[0].isdigit():
            d, sec, subj = parts[0].split()
            rows[(int(d), sec, subj)] = (float(parts[1].split()[-1]), float(parts[2].split()[-1]), float(parts[3]))
    return r.returncode, rows, r.stderr


# 1. The kept output: each (d, security) row's rows/s medians and their ratio,
#    against the medians of the file's collector_b lines per label.
code, rows, _ = report(KEPT)
check(code == 0, f"--parse exits 0 (got {code})")
label, want = None, {}
for line in open(KEPT):
    m = re.match(r"=== run \d+ (\w+)", line)
    if m:
        label = m.group(1)
    m = re.match(r"RESULT ingest d=(\d+) sec=(\w+) what=collector_b .*?rows_s=(\d+)", line)
    if m:
        want.setdefault((int(m.group(1)), m.group(2)), {}).setdefault(label, []).append(int(m.group(3)))
check(len(want) == 2, f"the kept file has 2 (d, security) cases (got {len(want)})")
for (d, sec), by in want.items():
    got = rows.get((d, sec, "collector_b"))
    check(got is not None, f"a row for d={d} {sec}")
    if got:
        b, a = statistics.median(by["before"]), statistics.median(by["after"])
        check(got[0] == round(b) and got[1] == round(a), f"d={d} {sec}: medians {got[:2]} against {b}, {a}")
        check(abs(got[2] - a / b) < 0.006, f"d={d} {sec}: after/before {got[2]} against {a / b:.4f}")

# 2. A run cut short: its subjects must not be counted under the next run.
lines = open(KEPT).read().splitlines(keepends=True)
first_after = next(i for i, s in enumerate(lines) if re.match(r"RESULT ingest d=100 sec=plain what=raw_after", s))
cut = lines[:first_after] + ["=== run 9 before\n"] + lines[first_after:]
with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
    f.writelines(cut)
code, rows2, err = report(f.name)
os.unlink(f.name)
check(code == 0 and "dropped: run before d=100 plain" in err, f"the cut measurement is dropped with a note ({err!r})")
got = rows2.get((100, "plain", "collector_b"))
rest = want[(100, "plain")]["before"][1:]  # the first run's is the one cut
check(got is not None and got[0] == round(statistics.median(rest)),
      f"d=100 plain before: the median of the other runs {statistics.median(rest)} (got {got})")

# 3. Usage errors exit 2.
for args in (["--parse", "/nonexistent"], ["--runs", "0", "--before", "x", "--after", "y"], []):
    r = subprocess.run([sys.executable, TOOL] + args, capture_output=True, text=True)
    check(r.returncode == 2, f"p1-compare {' '.join(args)}: exit 2 (got {r.returncode})")

sys.exit(summary())
