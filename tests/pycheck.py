"""pycheck - the Python tests' one check counter (tests/system/harness.py,
tests/python/*): check(cond, what) counts each check and prints a failure on
stderr; summary() prints "N passed, N failed" (the line tools/count-checks
adds up) and returns the exit code, 1 if anything failed."""
import sys

_counts = [0, 0]  # passed, failed


def check(cond, what):
    if cond:
        _counts[0] += 1
    else:
        _counts[1] += 1
        print(f"FAIL: {what}", file=sys.stderr, flush=True)


def summary():
    print(f"{_counts[0]} passed, {_counts[1]} failed")
    return 1 if _counts[1] else 0
