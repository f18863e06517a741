#!/bin/sh
# test_reference.sh TEST_BINARY - runs test_reference_sharded under mpirun
# with 1, 2 and 3 ranks (--oversubscribe: this machine has 2 cores) and
# checks that the seeded runs release the same basis up to floating-point
# rounding: the sharded reference aggregator is one mechanism whatever the
# number of ranks (src/mpi/reference_sharded.h); then one run with the
# secure generator.
bin=$1
pass=0; fail=0
ok() { pass=$((pass + 1)); }
ko() { fail=$((fail + 1)); echo "FAIL: $1" >&2; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
root=; [ "$(id -u)" = 0 ] && root=--allow-run-as-root
# Under ASan: no leak report (Open MPI's unloaded components; see test_mpi.sh)
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"
run() { timeout 120 mpirun $root --oversubscribe -np "$@"; }  # an MPI job that dies can hang mpirun
for r in 1 2 3; do
  if run "$r" "$bin" "$tmp/basis-$r.f32" >"$tmp/out-$r.txt" 2>&1; then ok; else ko "$r rank(s): $(grep FAIL "$tmp/out-$r.txt")"; fi
  grep -E "rank|passed" "$tmp/out-$r.txt" | sed 's/^/  /'
done
if run 2 "$bin" "" secure >"$tmp/out-s.txt" 2>&1; then ok; else ko "2 ranks, secure noise: $(grep FAIL "$tmp/out-s.txt")"; fi
grep -E "rank|passed" "$tmp/out-s.txt" | sed 's/^/  /'
# 1 rank against 2 and 3: the sine between the released spans.  The runs
# differ only in the order MPI adds the Grams' and projections' partial sums
# (about 1e-16 relative); the seeded draws (partition, points, WFC's noise,
# the mean's noise) are the same, and WFC's friend tests compare distances
# with grid radii far from them in relative terms, so the same buckets are
# weighted the same; the eigenproblems (gaps of order 1 against norms of
# order 10) amplify the rounding little: 1e-5 leaves decades, and another
# noise draw would give about 0.05 (the noise's sine in the run above)
for r in 2 3; do
  res=$(/usr/bin/python3 - "$tmp/basis-1.f32" "$tmp/basis-$r.f32" <<'PY'
import sys
import numpy as np
a, b = (np.fromfile(f, dtype=np.float32).astype(np.float64).reshape(4, -1) for f in sys.argv[1:3])
qa, qb = (np.linalg.qr(m.T)[0] for m in (a, b))
print(f"{np.linalg.norm(qb - qa @ (qa.T @ qb), 2):.3g}")
PY
)
  echo "  1 rank vs $r ranks: sine between the released spans: $res"
  if [ -n "$res" ] && /usr/bin/python3 -c "import sys; sys.exit(not float('$res') < 1e-5)"; then ok
  else ko "1 rank and $r ranks differ: $res"; fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
