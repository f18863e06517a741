#!/bin/sh
# test_collector_sharded.sh COLLECTOR PRODUCE GEN STATUS - the sharded
# collector end to end (issue 15): `mpirun -np R dps-collector --sharded`
# fed by `dps-produce --shards R`, R = 1 and 3, seeded; the two runs must
# publish the same snapshots (the sharded release is one mechanism whatever
# R: src/mpi/collector_sharded.c, power_sharded.h), near the truth, with the
# ledger on rank 0; then what a user gets wrong: a producer that does not
# split its rows, a producer split for another R, a slice that never comes,
# --sharded with another aggregator.
col=$1; produce=$2; gen=$3; status=$4
pass=0; fail=0
ok() { pass=$((pass + 1)); }
ko() { fail=$((fail + 1)); echo "FAIL: $1" >&2; }
tmp=$(mktemp -d); [ -n "$KEEP" ] || trap 'rm -rf "$tmp"' EXIT; echo "  (files in $tmp)"
root=; [ "$(id -u)" = 0 ] && root=--allow-run-as-root
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"  # Open MPI's dlopened components (test_mpi.sh)
base=$((20000 + ($$ % 12000)))  # ports base .. base+123, per run of this script: below Linux's ephemeral range (32768 and up), from which the producers' own ends are drawn
mpi() { timeout 120 mpirun $root --oversubscribe -np "$@"; }
# a collector of $1 ranks on ingest port $2 in state dir $3, more flags after
# (run in the background: exec, so that its pid is timeout's, which passes
# signals on to mpirun)
collector() {
  r=$1; port=$2; st=$3; d=${D:-301}; shift 3
  exec timeout 120 mpirun $root --oversubscribe -np "$r" "$col" --sharded --d "$d" --k 4 ${MECH:---t 10 --m 200 --aggregator power --rho 1} --cap-rho 10 \
    --state-dir "$st" --insecure-plaintext --ingest "tcp://127.0.0.1:$port" --publish "ipc://$st.pub" \
    --status "ipc://$st.status" "$@"
}
# the collector's status endpoint answers (it is up)
wait_up() {
  for i in $(seq 1 100); do
    "$status" --insecure-plaintext --connect "ipc://$1.status" --timeout 200 >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  return 1
}

# The seeded 1-rank and 3-rank runs' snapshots of epochs 0 and 1, in state
# directories $tmp/${1}1 and $tmp/${1}3: "ok", or what differs.  Each is
# released, seeded, charged rho $2 per epoch (and the fields of the JSON $3,
# e.g. delta_epoch); the two runs' spans within a sine of 1e-5 of each other
# (with "same_entries": their entries within 1e-5), their noise levels and
# radii equal, and within 0.3 of dps-gen's truth; with "eps_total": the two
# epochs' eps_total at delta 1e-5, to 2 decimals.  The reasons for the
# bounds are at each call.
same_snapshots() {
  PYTHONPATH="$(dirname "$col")/python" /usr/bin/python3 - "$tmp" "$1" "$2" "$3" <<'PY'
import json, sys
import numpy as np
from dpsubspace.subscriber import Snapshot
t, prefix, rho, want = sys.argv[1], sys.argv[2], float(sys.argv[3]), json.loads(sys.argv[4])
entries, eps_total = want.pop("same_entries", False), want.pop("eps_total", None)
truth = np.linalg.qr(np.load(f"{t}/truth.npy").astype(np.float64).T)[0]
def sine(qa, qb):
    return np.linalg.norm(qb - qa @ (qa.T @ qb), 2)
bad = []
for e in (0, 1):
    a, b = (Snapshot.from_bytes(open(f"{t}/{prefix}{r}/snapshots/epoch-{e:020d}.snap", "rb").read()) for r in (1, 3))
    expect = {"status": "released", "seeded": True, "rho_epoch": rho, "rho_total": rho * (e + 1), **want}
    if eps_total:
        expect["eps_total"] = eps_total[e]
    for s in (a, b):
        got = {name: round(getattr(s, name), 2) if name == "eps_total" else getattr(s, name) for name in expect}
        if got != expect:
            bad.append(f"epoch {e}: {got}")
    qa, qb = (np.linalg.qr(s.basis.astype(np.float64).T)[0] for s in (a, b))
    diff, s13, st = np.abs(a.basis - b.basis).max(), sine(qa, qb), sine(truth, qa)
    print(f"  {a.aggregator}, epoch {e}: 1 vs 3 ranks: largest entry difference {diff:.3g}, sine {s13:.3g}; sine to "
          f"the truth {st:.3g}; radius {a.radius:.3g} (unrelated {a.radius_unrelated:.3g}); noise level "
          f"{a.noise_level:.3g} / {b.noise_level:.3g}", file=sys.stderr)
    if not (s13 < 1e-5 and st < 0.3 and abs(a.noise_level - b.noise_level) < 1e-6 and abs(a.radius - b.radius) < 1e-9
            and (diff < 1e-5 or not entries)):
        bad.append(f"epoch {e}: diff {diff} sine {s13} to truth {st} radius {a.radius} {b.radius}")
print("; ".join(bad) if bad else "ok")
PY
}

# dps-gen's generator at d = 301, k = 4: 4000 rows, two epochs of 2000
"$gen" --d 301 --k 4 --n 4000 --seed 4 --out "$tmp/rows.npy" --basis "$tmp/truth.npy" >/dev/null || ko "dps-gen"

# 1. R = 1 and R = 3, the same seed, the same rows in the same order (one producer)
for r in 1 3; do
  port=$((base + 10 * r))
  collector "$r" "$port" "$tmp/s$r" --seed 7 --exit-after 2 >"$tmp/c$r.log" 2>&1 &
  cpid=$!
  wait_up "$tmp/s$r" || ko "the $r-rank collector did not come up: $(cat "$tmp/c$r.log")"
  if "$produce" "$tmp/rows.npy" --insecure-plaintext --shards "$r" --connect "tcp://127.0.0.1:$port" \
       --status "ipc://$tmp/s$r.status" >"$tmp/p$r.out" 2>&1; then ok
  else ko "dps-produce --shards $r: $(cat "$tmp/p$r.out")"; kill -TERM "$cpid"; fi
  grep -q "confirmed all 16 batches" "$tmp/p$r.out" && ok || ko "$r ranks: the drain did not confirm every batch: $(cat "$tmp/p$r.out")"
  if wait "$cpid"; then ok; else ko "the $r-rank collector exited $?: $(cat "$tmp/c$r.log")"; fi
  n=$(grep -c "kind=commit" "$tmp/s$r/ledger"); [ "$n" = 2 ] && ok || ko "$r ranks: $n commit lines, not 2"
  sed 's/^/  /' "$tmp/c$r.log" | grep -E "released|stopped:"
done
# The two runs' snapshots: the entries and the sine between the spans (the
# runs differ only in the order MPI sums, ~1e-16 relative, amplified by a
# few eigenproblems: 1e-5 leaves decades; another noise draw would be ~0.1).
# To the truth: each epoch's top-4 energy is about 2000 rows x 0.25 = 500 per
# direction against the noise's spectral norm (sqrt 301 + sqrt 14) = 21 at
# rho 1; a cold epoch of 3 blocks sees a third of the rows per step, so the
# sine is about 21 / 167 = 0.13 cold and 21 / 500 = 0.04 warm: bound 0.3.
# The ledger's and the snapshots' accounting: rho 1 and 2; the power epochs
# are Gaussian mechanisms, so their total's eps at 1e-5 is the exact one of
# mu = sqrt(2 rho): 6.57 and 10.00 (the CKS conversion: 7.08 and 10.72).
res=$(same_snapshots s 1 '{"same_entries": true, "eps_total": [6.57, 10.0]}')
[ "$res" = ok ] && ok || ko "1 vs 3 ranks: $res"

# 1b. The Python ShardedProducer, 2 ranks: the same rows, the same seed, so
#     the same snapshots as above (the same bound; its slices and endpoints
#     follow the C library's rule, or the ranks would refuse them)
port=$((base + 40))
collector 2 "$port" "$tmp/s2" --seed 7 --exit-after 2 --shard-wait 5 >"$tmp/c2.log" 2>&1 &
cpid=$!
wait_up "$tmp/s2" || ko "the 2-rank collector did not come up: $(cat "$tmp/c2.log")"
res=$(PYTHONPATH="$(dirname "$col")/python" /usr/bin/python3 - "$tmp" "$port" <<'PY' 2>&1
import sys
import numpy as np
from dpsubspace import ShardedProducer
from dpsubspace.producer import shard_endpoint, shard_slice
t, port = sys.argv[1], int(sys.argv[2])
assert shard_endpoint("tcp://127.0.0.1:7780", 2) == "tcp://127.0.0.1:7782" and shard_slice(301, 3, 2) == (201, 301)
rows = np.load(f"{t}/rows.npy")
# one send of every row, a queue of one batch: the parts must take turns batch
# by batch (a part far ahead would leave rank 1 waiting for slices not sent)
with ShardedProducer(f"tcp://127.0.0.1:{port}", 301, 2, status_endpoint=f"ipc://{t}/s2.status", plaintext=True,
                     sndhwm=1) as p:
    p.send(rows)  # the batches are the same 256 rows as dps-produce's
print("sent", p.batches_sent, p.parts[0].batches_taken)
PY
)
[ "$res" = "sent 16 16" ] && ok || { ko "ShardedProducer: $res"; kill -TERM "$cpid"; }
if wait "$cpid"; then ok; else ko "the 2-rank collector exited $?: $(cat "$tmp/c2.log")"; fi
res=$(PYTHONPATH="$(dirname "$col")/python" /usr/bin/python3 - "$tmp" <<'PY'
import sys
import numpy as np
from dpsubspace.subscriber import Snapshot
t = sys.argv[1]
worst = 0
for e in (0, 1):
    a, b = (Snapshot.from_bytes(open(f"{t}/s{r}/snapshots/epoch-{e:020d}.snap", "rb").read()) for r in (1, 2))
    worst = max(worst, np.abs(a.basis - b.basis).max())
print("ok" if worst < 1e-5 else f"largest entry difference {worst}")
PY
)
[ "$res" = ok ] && ok || ko "Python producer, 2 ranks vs C producer, 1 rank: $res"

# 1c. Producers that each hold only their shard (FSDP/ZeRO training: rank r
#     has its parameters' gradients only): two processes, Producer(shard=(r,
#     2, 301, stream)) with a shared id and stream; the same rows, so the same
#     snapshots again
port=$((base + 60))
collector 2 "$port" "$tmp/s4" --seed 7 --exit-after 2 --shard-wait 5 >"$tmp/c4.log" 2>&1 &
cpid=$!
wait_up "$tmp/s4" || ko "the 2-rank collector did not come up: $(cat "$tmp/c4.log")"
fsdp() {
  PYTHONPATH="$(dirname "$col")/python" /usr/bin/python3 - "$tmp" "$port" "$1" <<'PY' 2>&1
import sys
import numpy as np
from dpsubspace import Producer
from dpsubspace.producer import shard_slice
t, port, r = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
c0, c1 = shard_slice(301, 2, r)
rows = np.load(f"{t}/rows.npy")[:, c0:c1]  # this rank's parameters' gradients only
with Producer(f"tcp://127.0.0.1:{port}", c1 - c0, producer_id="fsdp-job-1", shard=(r, 2, 301, 0x5eed),
              status_endpoint=f"ipc://{t}/s4.status" if r == 0 else None, plaintext=True) as p:
    p.send(rows)
print("sent", p.batches_sent, p.batches_taken if r == 0 else "")
PY
}
fsdp 1 >"$tmp/f1.out" &
fpid=$!
res=$(fsdp 0)
wait "$fpid"
[ "$res" = "sent 16 16" ] && ok || { ko "FSDP-style producers: $res $(cat "$tmp/f1.out")"; kill -TERM "$cpid"; }
if wait "$cpid"; then ok; else ko "the 2-rank collector exited $?: $(cat "$tmp/c4.log")"; fi
res=$(PYTHONPATH="$(dirname "$col")/python" /usr/bin/python3 - "$tmp" <<'PY'
import sys
import numpy as np
from dpsubspace.subscriber import Snapshot
t = sys.argv[1]
worst = 0
for e in (0, 1):
    a, b = (Snapshot.from_bytes(open(f"{t}/s{r}/snapshots/epoch-{e:020d}.snap", "rb").read()) for r in (1, 4))
    worst = max(worst, np.abs(a.basis - b.basis).max())
print("ok" if worst < 1e-5 else f"largest entry difference {worst}")
PY
)
[ "$res" = ok ] && ok || ko "FSDP-style producers, 2 ranks vs whole rows, 1 rank: $res"

# 2. A producer that does not split its rows, to a 2-rank collector.  With
#    --status it asks first: the status says "sharded over 2 ranks", so it
#    sends nothing and says --shards 2 (exit 2).  Without --status it cannot
#    know: rank 0 refuses its batches (whole rows are not its slice), nothing
#    is used.  d = 300: both slices 150 wide
"$gen" --d 300 --k 4 --n 600 --seed 5 --out "$tmp/rows300.npy" >/dev/null || ko "dps-gen d 300"
port=$((base + 50))
D=300 collector 2 "$port" "$tmp/s5" --shard-wait 1 >"$tmp/c5.log" 2>&1 &
cpid=$!
wait_up "$tmp/s5" || ko "the 2-rank collector did not come up: $(cat "$tmp/c5.log")"
"$produce" "$tmp/rows300.npy" --insecure-plaintext --rows-to 512 --connect "tcp://127.0.0.1:$port" \
  --status "ipc://$tmp/s5.status" --drain-timeout 5000 >"$tmp/p5.out" 2>&1
rc=$?
[ "$rc" = 2 ] && grep -q "is sharded over 2 MPI ranks: give --shards 2" "$tmp/p5.out" && ok ||
  ko "an unsplit producer with --status to 2 ranks: exit $rc: $(cat "$tmp/p5.out")"
"$status" --insecure-plaintext --connect "ipc://$tmp/s5.status" | grep -q "sharded over 2 MPI ranks" && ok ||
  ko "dps-status does not say the collector is sharded"
res=$(PYTHONPATH="$(dirname "$col")/python" /usr/bin/python3 - "$tmp" "$port" <<'PY' 2>&1
import sys
import numpy as np
from dpsubspace import Producer
t, port = sys.argv[1], int(sys.argv[2])
try:  # the Python producer asks the status first too: whole rows to 2 ranks are refused before sending
    with Producer(f"tcp://127.0.0.1:{port}", 300, status_endpoint=f"ipc://{t}/s5.status", plaintext=True) as p:
        p.send(np.zeros((10, 300), np.float32))
    print("sent")
except ValueError as e:
    print("refused" if "sharded over 2 MPI ranks: use ShardedProducer(..., shards=2)" in str(e) else str(e))
PY
)
[ "$res" = refused ] && ok || ko "the Python Producer with whole rows to 2 ranks: $res"
"$produce" "$tmp/rows300.npy" --insecure-plaintext --rows-to 512 --connect "tcp://127.0.0.1:$port" \
  >"$tmp/p5.out" 2>&1 || ko "an unsplit producer without --status: $(cat "$tmp/p5.out")"
# 2b. split for 2 ranks but its parts sent to the wrong ranks (the same
#     widths): each rank refuses a slice that is not its own, with a warning
"$produce" "$tmp/rows300.npy" --insecure-plaintext --rows-to 256 --shards 2 \
  --connect "tcp://127.0.0.1:$((port + 1)),tcp://127.0.0.1:$port" \
  --status "ipc://$tmp/s5.status" --drain-timeout 3000 >"$tmp/p5b.out" 2>&1
[ $? != 0 ] && ok || ko "a producer with its parts swapped exited 0: $(cat "$tmp/p5b.out")"
# 3. split for 3 ranks, to 2: no rank 2 to shake hands with (exit 6)
"$produce" "$tmp/rows300.npy" --insecure-plaintext --rows-to 512 --shards 3 --connect "tcp://127.0.0.1:$port" \
  --status "ipc://$tmp/s5.status" --drain-timeout 5000 --wait-ready 2000 >"$tmp/p6.out" 2>&1
[ $? != 0 ] && ok || ko "a 3-shard producer to 2 ranks exited 0: $(cat "$tmp/p6.out")"
grep -q "one of the 3 ranks' ingest endpoints" "$tmp/p6.out" && ok || ko "the 3-shard producer's error names no ranks: $(cat "$tmp/p6.out")"
# 4. a slice that never comes: a producer whose second part goes to another
#    PULL socket than rank 1's (the comma list names each part's endpoint) --
#    rank 0 takes the first slice, rank 1 waits --shard-wait (1 s), and every
#    rank drops the batch; the producer's drain hears it (refused)
/usr/bin/python3 -c "
import sys, zmq
s = zmq.Context().socket(zmq.PULL); s.bind(sys.argv[1]); s.RCVTIMEO = 20000
try:
    while True: s.recv()
except zmq.Again: pass" "tcp://127.0.0.1:$((port + 7))" &
sink=$!
"$produce" "$tmp/rows300.npy" --insecure-plaintext --rows-to 256 --shards 2 \
  --connect "tcp://127.0.0.1:$port,tcp://127.0.0.1:$((port + 7))" \
  --status "ipc://$tmp/s5.status" --drain-timeout 5000 >"$tmp/p7.out" 2>&1
[ $? != 0 ] && ok || ko "a producer whose second slice went astray exited 0: $(cat "$tmp/p7.out")"
kill "$sink" 2>/dev/null
"$status" --insecure-plaintext --connect "ipc://$tmp/s5.status" --json >"$tmp/st5.json" 2>&1 || ko "dps-status: $(cat "$tmp/st5.json")"
[ ! -s "$tmp/s5/ledger" ] && ok || ko "the ledger was charged without an epoch"
# 4b. A large send from the Python ShardedProducer (20 000 rows, 24 MB: more
#     than loopback's buffers hold) with a queue of one batch: its parts take
#     turns batch by batch, so no slice waits for another part's backlog and
#     nothing is dropped (were part 0 to send all its batches first, rank 1
#     would wait --shard-wait, 1 s here, for each and drop it).  Its 10
#     epochs spend the cap (10): a producer's warnings go to stderr (kept apart)
res=$(PYTHONPATH="$(dirname "$col")/python" /usr/bin/python3 - "$tmp" "$port" <<'PY' 2>"$tmp/p4b.err"
import sys
import numpy as np
from dpsubspace import ShardedProducer
from dpsubspace.status import query_status
t, port = sys.argv[1], int(sys.argv[2])
rows = np.random.default_rng(3).standard_normal((20000, 300)).astype(np.float32)
with ShardedProducer(f"tcp://127.0.0.1:{port}", 300, 2, status_endpoint=f"ipc://{t}/s5.status", plaintext=True,
                     sndhwm=1) as p:
    p.send(rows)
st = query_status(f"ipc://{t}/s5.status", 5000, plaintext=True)
print(st["rows_accepted"], st["counters"]["batches_dropped_slice_missing"])
PY
)
[ "$res" = "20000 1" ] && ok || ko "a large send from ShardedProducer: rows accepted, batches dropped: $res $(cat "$tmp/p4b.err")"
# stop it as an operator would: SIGTERM to rank 0, which tells the others;
# exit 4: batches were lost (the dropped one)
kill -TERM "$(sed -n 's/.*rank 0 of 2 (pid \([0-9]*\)).*/\1/p' "$tmp/c5.log")" 2>/dev/null
wait "$cpid"
crc=$?
[ "$crc" = 4 ] && ok || ko "the collector exited $crc after dropping a batch, not 4"
grep -q "stopped:" "$tmp/c5.log" && ok || ko "the collector did not stop cleanly: $(cat "$tmp/c5.log")"
res=$(/usr/bin/python3 - "$tmp/st5.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
c = s["counters"]
print(f"{s['rows_accepted']} {c['slices_refused']} {c['batches_dropped_slice_missing']}")
PY
)
echo "  2 ranks, wrong producers: rows accepted, slices refused, batches dropped: $res (collector exit $crc)"
set -- $res
[ "$1" = 0 ] && ok || ko "rows of wrong producers were used: $res"
[ "${2:-0}" -ge 3 ] && ok || ko "the unsplit and swapped batches were not refused on rank 0: $res"
[ "${3:-0}" -ge 1 ] && ok || ko "the batch without its second slice was not dropped: $res"
grep -q "dropped on every rank" "$tmp/c5.log" && ok || ko "no warning for the dropped batch: $(cat "$tmp/c5.log")"
grep -q "not this rank's" "$tmp/c5.log" && ok || ko "no warning for a slice of the wrong shape"
grep -q "is the producer sharded over 2 ranks" "$tmp/c5.log" && ok || ko "no warning for whole rows sent to a rank"

# 5. --sharded with an aggregator it does not shard: a usage error before MPI starts
mpi 1 "$col" --sharded --d 301 --k 4 --aggregator gaussian --rho 1 --cap-rho 10 --state-dir "$tmp/s8" \
  --insecure-plaintext >"$tmp/c8.log" 2>&1
rc=$?
[ "$rc" = 2 ] && grep -q "reference aggregator (the default) or the noisy power" "$tmp/c8.log" && ok ||
  ko "--sharded --aggregator gaussian: exit $rc: $(cat "$tmp/c8.log")"

# 7. A restart on the same state directory, with another number of ranks:
#    the ledger's numbering and totals go on (epoch 2, rho 3 after the 1-rank
#    run's two epochs), and an epoch closed by --epoch-seconds with fewer rows
#    than t m is released with the rows it has (its blocks by index: public)
port=$((base + 80))
collector 2 "$port" "$tmp/s1" --epoch-seconds 1 --exit-after 1 >"$tmp/c10.log" 2>&1 &
cpid=$!
wait_up "$tmp/s1" || ko "the restarted collector did not come up: $(cat "$tmp/c10.log")"
"$produce" "$tmp/rows.npy" --insecure-plaintext --rows-to 500 --shards 2 --connect "tcp://127.0.0.1:$port" \
  --status "ipc://$tmp/s1.status" >"$tmp/p10.out" 2>&1 || ko "dps-produce into the restarted collector: $(cat "$tmp/p10.out")"
if wait "$cpid"; then ok; else ko "the restarted collector exited $?: $(cat "$tmp/c10.log")"; fi
res=$(PYTHONPATH="$(dirname "$col")/python" /usr/bin/python3 - "$tmp" <<'PY' 2>&1
import sys
from dpsubspace.subscriber import Snapshot
t = sys.argv[1]
s = Snapshot.from_bytes(open(f"{t}/s1/snapshots/epoch-{2:020d}.snap", "rb").read())
print(s.status, s.rows_used, s.rho_total, s.seq)
PY
)
[ "$res" = "released 500 3.0 3" ] && ok || ko "restart and --epoch-seconds: status, rows, rho total, seq: $res"
n=$(grep -c "kind=commit" "$tmp/s1/ledger"); [ "$n" = 3 ] && ok || ko "after the restart: $n commit lines, not 3"

# 6. ranks' ingest ports on the publish or status port: refused, said why (exit 2)
port=$((base + 70))
mpi 2 "$col" --sharded --d 301 --k 4 --aggregator power --rho 1 --cap-rho 10 --state-dir "$tmp/s9" \
  --insecure-plaintext --ingest "tcp://127.0.0.1:$port" --publish "tcp://127.0.0.1:$((port + 1))" >"$tmp/c9.log" 2>&1
rc=$?
[ "$rc" = 2 ] && grep -q "rank 1's ingest endpoint .* is also the --publish endpoint" "$tmp/c9.log" && ok ||
  ko "an ingest port on the publish port: exit $rc: $(cat "$tmp/c9.log")"

# 8. The reference aggregator (the default), R = 1 and R = 3, the same seed,
#    one producer each: the same snapshots (reference_sharded.h: one mechanism
#    whatever R), near the truth, charged (rho 4, delta 1e-8) per epoch.
#    t = 80 buckets of m = 25 rows: WFC's noisy count needs about 28 buckets
#    at rho 4 (epoch_agg_wfc_min_buckets), and the radius search (which stops
#    where about tau t = 40 are friends) has a margin of 40 against its
#    noise (tests/mpi/test_reference_sharded.c: at t = 40 it often does not).
for r in 1 3; do
  port=$((base + 90 + 10 * r))
  MECH="--aggregator reference --t 80 --m 25 --rho 4" collector "$r" "$port" "$tmp/r$r" --seed 7 --exit-after 2 \
    >"$tmp/cr$r.log" 2>&1 &
  cpid=$!
  wait_up "$tmp/r$r" || ko "the $r-rank reference collector did not come up: $(cat "$tmp/cr$r.log")"
  "$produce" "$tmp/rows.npy" --insecure-plaintext --shards "$r" --connect "tcp://127.0.0.1:$port" \
    --status "ipc://$tmp/r$r.status" >"$tmp/pr$r.out" 2>&1 && ok || { ko "dps-produce --shards $r: $(cat "$tmp/pr$r.out")"; kill -TERM "$cpid"; }
  if wait "$cpid"; then ok; else ko "the $r-rank reference collector exited $?: $(cat "$tmp/cr$r.log")"; fi
  grep -q "the reference aggregator: t = 80 buckets" "$tmp/cr$r.log" && ok || ko "$r ranks: no reference aggregator in the log"
  sed 's/^/  /' "$tmp/cr$r.log" | grep -E "released|closed in"
done
# 1 vs 3 ranks: the runs differ only in MPI's order of sums (test_reference.sh:
# 1e-5 leaves decades).  To the truth: dps-gen's rows at d = 301 lie near the
# k = 4 subspace, each bucket of 25 rows finds it within a small sine, the
# items agree, so WFC's radius is small and the mean's noise (at rho 4,
# W^ near 80) is small against the mean's singular values (about sqrt(q) = 6
# and more): bound 0.3, a random basis gives about 1.
# Its epochs carry a delta: eps by the CKS conversion of rho 4 and 8 at
# 1e-5 - 1e-8 and 1e-5 - 2e-8: 16.51 and 25.92.
res=$(same_snapshots r 4 '{"delta_epoch": 1e-8, "buckets_used": 80, "aggregator": "reference", "eps_total": [16.51, 25.92]}')
[ "$res" = ok ] && ok || ko "reference, 1 vs 3 ranks: $res"
n=$(grep -c "kind=commit" "$tmp/r3/ledger"); [ "$n" = 2 ] && ok || ko "reference, 3 ranks: $n commit lines, not 2"
# 8b. An epoch closed by --epoch-seconds before WFC has buckets enough: 500
#     rows over the 80 open buckets' 2 000 slots complete none (a bucket's 25
#     slots all among 500 random ones: about 80 (1/4)^25, never), so the
#     mechanism does not run and nothing is charged -- published FAILED, the
#     ledger unchanged (the restart on 2 ranks goes on with its numbering)
port=$((base + 110))
MECH="--aggregator reference --t 80 --m 25 --rho 4" collector 2 "$port" "$tmp/r3" --epoch-seconds 1 --exit-after 1 \
  >"$tmp/cr5.log" 2>&1 &
cpid=$!
wait_up "$tmp/r3" || ko "the restarted reference collector did not come up: $(cat "$tmp/cr5.log")"
"$produce" "$tmp/rows.npy" --insecure-plaintext --rows-to 500 --shards 2 --connect "tcp://127.0.0.1:$port" \
  --status "ipc://$tmp/r3.status" >"$tmp/pr5.out" 2>&1 || ko "dps-produce into the restarted collector: $(cat "$tmp/pr5.out")"
if wait "$cpid"; then ok; else ko "the restarted reference collector exited $?: $(cat "$tmp/cr5.log")"; fi
res=$(PYTHONPATH="$(dirname "$col")/python" /usr/bin/python3 - "$tmp" <<'PY' 2>&1
import sys
from dpsubspace.subscriber import Snapshot
s = Snapshot.from_bytes(open(f"{sys.argv[1]}/r3/snapshots/epoch-{2:020d}.snap", "rb").read())
print(s.status, s.buckets_used, s.rho_total, s.rho_epoch, "not run" if "did not run" in s.reason else s.reason)
PY
)
[ "$res" = "failed 0 8.0 0.0 not run" ] && ok || ko "reference, too few buckets: status, buckets, rho total, rho epoch: $res"
n=$(grep -c "kind=commit" "$tmp/r3/ledger"); [ "$n" = 2 ] && ok || ko "reference, too few buckets: $n commit lines, not 2"

# 9. A write of the state directory that fails while running (here the
#    snapshot store, DPS_FAULT=store-fails; a full disk in life): rank 0 stops
#    every rank at once with exit code 3; the epoch is charged (its commit
#    line), its snapshot neither stored nor sent (the single-process rule).
#    At the issue's commit the sharded collector ignored the failure and ran on.
port=$((base + 120))
DPS_FAULT=store-fails collector 2 "$port" "$tmp/s9" >"$tmp/c9.log" 2>&1 &
cpid=$!
wait_up "$tmp/s9" || ko "the store-failing collector did not come up: $(cat "$tmp/c9.log")"
"$produce" "$tmp/rows.npy" --insecure-plaintext --rows-to 2000 --shards 2 --connect "tcp://127.0.0.1:$port" \
  --status "ipc://$tmp/s9.status" >"$tmp/p9.out" 2>&1
wait "$cpid"; rc=$?
[ "$rc" = 3 ] && grep -q "stopped because the state directory could not be written" "$tmp/c9.log" && ok ||
  ko "a failed snapshot store on 2 ranks: exit $rc, not 3: $(tail -5 "$tmp/c9.log")"
n=$(grep -c "kind=commit" "$tmp/s9/ledger"); [ "$n" = 1 ] && ok || ko "a failed store: $n commit lines, not 1"
[ -z "$(ls "$tmp/s9/snapshots" 2>/dev/null)" ] && ok || ko "a failed store left snapshots: $(ls "$tmp/s9/snapshots")"

# 10. No memory on a rank to hold a batch it received (DPS_FAULT=hold-fails:
#     as when the copy's malloc fails, on every rank here): each rank drops
#     its slice and counts it (batches_cut_short), rank 0 tells the producer,
#     whose drain ends at once (exit 1, well before its 30 s timeout), no row
#     is used, and the collector exits 4 when stopped
port=$((base + 90))
DPS_FAULT=hold-fails collector 2 "$port" "$tmp/s10" >"$tmp/c11.log" 2>&1 &
cpid=$!
wait_up "$tmp/s10" || ko "the hold-failing collector did not come up: $(cat "$tmp/c11.log")"
t0=$(date +%s)
"$produce" "$tmp/rows.npy" --insecure-plaintext --rows-to 512 --shards 2 --connect "tcp://127.0.0.1:$port" \
  --status "ipc://$tmp/s10.status" --drain-timeout 30000 >"$tmp/p11.out" 2>&1
rc=$?; took=$(($(date +%s) - t0))
[ "$rc" = 1 ] && [ "$took" -lt 20 ] && grep -q "refused 2 of our 2 batches" "$tmp/p11.out" && ok ||
  ko "a producer whose batches no rank could hold: exit $rc after $took s: $(cat "$tmp/p11.out")"
res=$("$status" --insecure-plaintext --connect "ipc://$tmp/s10.status" --json 2>&1 | /usr/bin/python3 -c '
import json, sys
s = json.load(sys.stdin)
print(s["rows_accepted"], s["counters"]["batches_cut_short"])' 2>&1)
[ "$res" = "0 2" ] && ok || ko "no memory to hold: rank 0's rows accepted and batches cut short: $res"
kill -TERM "$(sed -n 's/.*rank 0 of 2 (pid \([0-9]*\)).*/\1/p' "$tmp/c11.log")" 2>/dev/null
wait "$cpid"; rc=$?
[ "$rc" = 4 ] && ok || ko "the collector that could not hold batches exited $rc, not 4: $(tail -5 "$tmp/c11.log")"
[ "$(grep -c "no memory to hold a batch" "$tmp/c11.log")" = 4 ] && ok ||
  ko "not every rank's drop logged: $(grep "no memory" "$tmp/c11.log")"
[ "$(grep -c "rows were LOST this run: 2 batches could not be held" "$tmp/c11.log")" = 2 ] && ok ||
  ko "not every rank's loss said at the stop: $(tail -8 "$tmp/c11.log")"

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
