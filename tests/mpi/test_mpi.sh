#!/bin/sh
# test_mpi.sh TEST_BINARY ESTIMATE GEN - runs test_power_sharded under mpirun
# with 1, 2 and 3 ranks (--oversubscribe: this machine has 2 cores) and
# checks that the seeded runs release the same basis up to floating-point
# rounding: the sharded power iteration is one mechanism whatever the number
# of ranks (src/mpi/power_sharded.h); then one run with the secure
# generator.  Then the program dps-mpi-estimate (ESTIMATE) on dps-gen's (GEN)
# rows: 1 and 3 ranks agree, the basis is near the truth, bad input refused.
bin=$1; est=$2; gen=$3
pass=0; fail=0
ok() { pass=$((pass + 1)); }
ko() { fail=$((fail + 1)); echo "FAIL: $1" >&2; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
root=; [ "$(id -u)" = 0 ] && root=--allow-run-as-root
# Under ASan: no leak report.  Open MPI's components are dlopened and unloaded at
# MPI_Finalize, leaving allocations LeakSanitizer cannot attribute to any module
# (so no suppression can name them); ASan's memory-error checks stay on.
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"
run() { timeout 120 mpirun $root --oversubscribe -np "$@"; }  # an MPI job that dies can hang mpirun
for r in 1 2 3; do
  if run "$r" "$bin" "$tmp/basis-$r.f32" >"$tmp/out-$r.txt" 2>&1; then ok; else ko "$r rank(s)"; fi
  grep -E "rank|passed" "$tmp/out-$r.txt" | sed 's/^/  /'
done
if run 2 "$bin" "" secure >"$tmp/out-s.txt" 2>&1; then ok; else ko "2 ranks, secure noise"; fi
grep -E "rank|passed" "$tmp/out-s.txt" | sed 's/^/  /'
# 1 rank against 2 and 3: the bases' entries (the same signs: power_sharded.c
# fixes each eigenvector's) and the sine between their spans; the runs' sums
# differ only in the order MPI adds them (about 1e-16 relative), amplified by
# three steps' eigenvector problems (gaps of about 100 against norms of 300):
# 1e-5 leaves a margin of decades, and a different noise draw or a flipped
# column would be of order 0.1 to 1
for r in 2 3; do
  res=$(/usr/bin/python3 - "$tmp/basis-1.f32" "$tmp/basis-$r.f32" <<'PY'
import sys
import numpy as np
a, b = (np.fromfile(f, dtype=np.float32).astype(np.float64).reshape(4, -1) for f in sys.argv[1:3])
qa, qb = (np.linalg.qr(m.T)[0] for m in (a, b))  # orthonormal in double: float32's rounding left out
sine = np.linalg.norm(qb - qa @ (qa.T @ qb), 2)  # ||(I - P_a) P_b||: sin of the largest angle, exact for tiny ones
print(f"{np.abs(a - b).max():.3g} {sine:.3g}")
PY
)
  echo "  1 rank vs $r ranks: largest entry difference, sine between the spans: $res"
  set -- $res
  if [ -n "$2" ] && /usr/bin/python3 -c "import sys; sys.exit(not (float('$1') < 1e-5 and float('$2') < 1e-5))"; then ok
  else ko "1 rank and $r ranks differ: $res"; fi
done

# dps-mpi-estimate: two warm-started epochs of 1500 rows at d = 1501 (split
# mid-block over 3 ranks), seeded; the paper's generator at tau = 10 d: each
# epoch's top-4 energy about 375 per direction against a noise of spectral
# norm sqrt(1501) + sqrt(14) = 42.5 at rho 1, so sin to the truth well below 0.5
"$gen" --d 1501 --k 4 --n 3000 --seed 4 --out "$tmp/rows.npy" --basis "$tmp/truth.npy" >/dev/null || ko "dps-gen"
for r in 1 3; do
  if run "$r" "$est" --k 4 --rho 1 --epoch-rows 1500 --seed 9 --json --out "$tmp/e$r.npy" "$tmp/rows.npy" \
       >"$tmp/e$r.json" 2>"$tmp/e$r.err"; then ok; else ko "dps-mpi-estimate on $r rank(s): $(cat "$tmp/e$r.err")"; fi
done
res=$(/usr/bin/python3 - "$tmp" <<'PY'
import json, sys
import numpy as np
t = sys.argv[1]
a, b, truth = (np.load(f"{t}/{n}.npy").astype(np.float64) for n in ("e1", "e3", "truth"))
def sine(x, y):
    qx, qy = (np.linalg.qr(m.T)[0] for m in (x, y))
    return np.linalg.norm(qy - qx @ (qx.T @ qy), 2)
j1, j3 = (json.load(open(f"{t}/e{r}.json")) for r in (1, 3))
print(f"{sine(a, b):.3g} {sine(a, truth):.3g} {j3['ranks']} {j3['epochs']} {j3['bytes_moved_per_rank']} {j1['rho_total']}")
PY
)
echo "  dps-mpi-estimate: sine 1 rank vs 3 ranks, sine to the truth, ranks, epochs, bytes moved, rho total: $res"
set -- $res
/usr/bin/python3 -c "import sys; sys.exit(not (float('$1') < 1e-5 and float('$2') < 0.5 and '$3' == '3' and '$4' == '2' and int('$5') > 0 and float('$6') == 2.0))" && ok ||
  ko "dps-mpi-estimate: $res"
# the noise scale from rho: rows all zero (the zero vector, counted), so the last step's Y is noise alone,
# 2001 x 14 iid N(0, s^2) with s = 1/sqrt(rho) = 0.5 at rho 4: singular values in
# s (sqrt(2001) -+ sqrt(14) -+ 4) = [18.5, 26.2] but with probability < 7e-4 (Davidson-Szarek, t = 4);
# a noise calibrated to sensitivity 2 or 1 instead of sqrt 2 (s sqrt 2 or s / sqrt 2) lands outside
/usr/bin/python3 -c "import numpy as np; np.save('$tmp/zeros.npy', np.zeros((96, 2001), np.float32))"
run 2 "$est" --k 4 --rho 4 --seed 3 --json "$tmp/zeros.npy" >"$tmp/z.json" 2>"$tmp/z.err" || ko "zero rows: $(cat "$tmp/z.err")"
/usr/bin/python3 - "$tmp/z.json" <<'PY' && ok || ko "noise scale at rho 4: $(cat "$tmp/z.json")"
import json, math, sys
j = json.load(open(sys.argv[1]))
s, lo, hi = 0.5, math.sqrt(2001) - math.sqrt(14) - 4, math.sqrt(2001) + math.sqrt(14) + 4
print(f"  noise alone at rho 4: singular values {j['sv'][0]:.2f} .. {j['sv'][-1]:.2f}, want within [{s * lo:.1f}, {s * hi:.1f}];"
      f" rows as zero {j['rows_zero']}")
sys.exit(not (j["sv"][0] <= s * hi and j["sv"][-1] >= s * lo and j["rows_zero"] == 96))
PY
# bad input: every rank stops, one message, the documented exit codes
run 2 "$est" --k 4 "$tmp/nosuch.npy" >"$tmp/bad.out" 2>&1; rc=$?
[ "$rc" -eq 3 ] && [ "$(grep -c 'dps-mpi-estimate:' "$tmp/bad.out")" -eq 1 ] && ok || ko "missing input: exit $rc, $(cat "$tmp/bad.out")"
run 2 "$est" "$tmp/rows.npy" >"$tmp/bad.out" 2>&1; rc=$?
[ "$rc" -eq 2 ] && grep -q "give --k" "$tmp/bad.out" && ok || ko "no --k: exit $rc, $(cat "$tmp/bad.out")"
# a file shorter than its header says: refused at the start by every rank, one message, exit 3
head -c 2000000 "$tmp/rows.npy" >"$tmp/short.npy"
run 2 "$est" --k 4 --seed 1 "$tmp/short.npy" >"$tmp/bad.out" 2>&1; rc=$?
[ "$rc" -eq 3 ] && [ "$(grep -c 'is truncated' "$tmp/bad.out")" -eq 1 ] && ok || ko "truncated input: exit $rc, $(cat "$tmp/bad.out")"
run 1 "$est" --k 4 --synthetic 2:3:4 >"$tmp/bad.out" 2>&1; rc=$?
[ "$rc" -eq 2 ] && grep -q "is not N:D" "$tmp/bad.out" && ok || ko "bad --synthetic: exit $rc, $(cat "$tmp/bad.out")"
# --synthetic: each rank makes only its columns, the same on any number of ranks
for r in 1 2; do
  run "$r" "$est" --k 3 --synthetic 1200:3000 --seed 2 --out "$tmp/s$r.npy" >/dev/null 2>"$tmp/s$r.err" || ko "synthetic on $r: $(cat "$tmp/s$r.err")"
done
/usr/bin/python3 -c "
import sys, numpy as np
a, b = (np.load('$tmp/s%d.npy' % r).astype(float) for r in (1, 2))
qa, qb = (np.linalg.qr(m.T)[0] for m in (a, b))
s = np.linalg.norm(qb - qa @ (qa.T @ qb), 2)
print('  --synthetic: sine 1 rank vs 2 ranks %.3g' % s); sys.exit(not s < 1e-5)" && ok || ko "--synthetic differs between 1 and 2 ranks"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
