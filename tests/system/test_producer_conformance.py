#!/usr/bin/env python3
"""test_producer_conformance - the producer protocol has two implementations, the C library's (src/net/producer.c,
here through dps-produce) and the Python package's (python/dpsubspace/producer.py), kept apart on purpose: the
package must run on a machine with Python and ZeroMQ alone.  This test holds them to one behaviour: each case
runs both against the same scripted collector (a PULL socket and a status REP thread that record what arrives
and answer as the collector's protocol says) and checks both by the same rule:
- every batch and every status question about the producer (one with its producer_id) names the producer's
  run, one nonzero number (a question without producer_id is an operator's, run 0: dps-produce asks one
  before it starts and one at the end, for the budget);
- a batch above the collector's limit goes in pieces, each its own sequence number, none skipped;
- with credit, no batch is sent before the collector granted its sequence number;
- close (the drain) returns only once the collector confirmed every batch, and fails when it never does;
- sharded by column over R ranks, each rank gets its own columns of every row, and the pieces are the rows.

usage: test_producer_conformance.py BUILD_DIR [TEST_NAME...]   (prints "N passed, N failed" last)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa: E402,F401,F403  (the shared harness: check, note, TMP, ...)

from dpsubspace import ShardedProducer  # noqa: E402
import dpsubspace.producer as producer_mod  # noqa: E402

PRODUCE = os.path.join(BUILD, "producers", "dps-produce")
IMPLEMENTATIONS = ("C", "Python")


def produce(impl, sc, rows, batch, drain_ms=10000, shards=None):
    """Send rows toward the scripted collector with the implementation impl, `batch` rows a message, and close
    (drain up to drain_ms); the error it ended with (None: success) and the seconds it took."""
    t0 = time.time()
    if impl == "C":
        path = os.path.join(TMP, f"rows-{os.getpid()}-{random.getrandbits(32)}.npy")
        np.save(path, rows)
        cmd = [PRODUCE, path, "--insecure-plaintext", "--connect", sc.ingest, "--batch", str(batch),
               "--drain-timeout", str(drain_ms)] + (["--status", sc.status] if sc.status else []) + \
            (["--shards", str(shards)] if shards else [])
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        err = None if p.returncode == 0 else f"exit {p.returncode}: {p.stderr.strip()[-300:]}"
    else:
        err = None
        try:
            if shards:
                with ShardedProducer(sc.ingest, rows.shape[1], shards, plaintext=True, batch_rows=batch,
                                     linger_ms=drain_ms) as sp:
                    sp.send(rows)
            else:
                with Producer(sc.ingest, rows.shape[1], batch_rows=batch, plaintext=True,
                              status_endpoint=sc.status, linger_ms=drain_ms) as p:
                    p.send(rows)
        except Exception as e:  # what the case looks at
            err = f"{type(e).__name__}: {e}"
    return err, time.time() - t0


def rows_of(n, d, seed):
    return np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32) / np.sqrt(d)


def test_runs_and_pieces():
    """8 rows of d = 8 in batches of 4 toward a collector whose limit is 3 rows: pieces of 3 and 1, sequence
    numbers 0..3 in order, every batch and every question with the producer's id naming one nonzero run,
    the rows as sent."""
    for impl in IMPLEMENTATIONS:
        sc = ScriptedCollector(f"pieces-{impl}", 8, limit=3)
        rows = rows_of(8, 8, 1)
        err, _ = produce(impl, sc, rows, batch=4)
        time.sleep(0.1)
        sc.close()
        b, q = sc.batches, sc.questions
        mine = [x for x in q if x["producer_id"]]
        runs = {m["stream"] for m in b} | {x["run"] for x in mine}
        check(err is None, f"{impl}: sent and closed ({err})")
        check([(m["seq"], m["rows"]) for m in b] == [(0, 3), (1, 1), (2, 3), (3, 1)],
              f"{impl}: pieces of 3 and 1, seqs 0..3: {[(m['seq'], m['rows']) for m in b]}")
        check(len(runs) == 1 and 0 not in runs and mine and all(x["run"] == 0 for x in q if not x["producer_id"]),
              f"{impl}: one nonzero run on batches and the producer's questions: {runs}")
        got = np.concatenate([m["vals"] for m in b]) if b else None
        check(got is not None and np.array_equal(got, rows), f"{impl}: the rows arrive as sent")


def test_credit():
    """A collector that grants at most 2 sequence numbers past those it has taken: 20 batches of one row
    arrive, every one after its sequence number was granted, and the producer asked for credit."""
    for impl in IMPLEMENTATIONS:
        sc = ScriptedCollector(f"credit-{impl}", 6, ahead=2)
        err, _ = produce(impl, sc, rows_of(20, 6, 2), batch=1)
        time.sleep(0.1)
        sc.close()
        late = [m["seq"] for m in sc.batches if m["seq"] >= m["granted"]]
        asked = [x for x in sc.questions if x["credit_seq_end"]]
        check(err is None and len(sc.batches) == 20, f"{impl}: 20 batches sent and closed ({err})")
        check(not late, f"{impl}: no batch before its credit (sent ahead of the grant: {late})")
        check(len(asked) >= 20 // 2, f"{impl}: it asked for credit as it went ({len(asked)} questions)")


def test_drain_waits_for_confirmation():
    """close returns only once the collector confirms every batch: a collector that confirms after 1.5 s
    holds close that long and it succeeds; one that never confirms makes close fail after the drain
    timeout (1 s), saying so."""
    for impl in IMPLEMENTATIONS:
        sc = ScriptedCollector(f"drain-{impl}", 5, confirm_after=1.5)
        err, took = produce(impl, sc, rows_of(10, 5, 3), batch=5)
        sc.close()
        check(err is None and took >= 1.4, f"{impl}: close waited for the confirmation ({took:.2f} s, {err})")
        sc = ScriptedCollector(f"never-{impl}", 5, confirm_after=None)
        err, took = produce(impl, sc, rows_of(10, 5, 4), batch=5, drain_ms=1000)
        sc.close()
        check(err is not None and 0.9 <= took < 30,
              f"{impl}: unconfirmed batches fail close after the drain timeout ({took:.2f} s): {err}")


def test_sharded_columns():
    """Over 2 ranks (a comma-separated list of their endpoints), d = 9: each rank gets its own contiguous
    columns of every row, the same split from both implementations (producer_mod.shard_columns, the C
    library's dps_shard_columns), and the pieces side by side are the rows."""
    splits = {}
    for impl in IMPLEMENTATIONS:
        ranks = [ScriptedCollector(f"shard-{impl}-{r}", 9, status=False) for r in range(2)]
        base = ",".join(sc.ingest for sc in ranks)
        for sc in ranks:
            sc.ingest = base  # what the producer is given: the list
        rows = rows_of(6, 9, 5)
        err, _ = produce(impl, ranks[0], rows, batch=3, shards=2)
        time.sleep(0.2)
        for sc in ranks:
            sc.close()
        parts = [np.concatenate([m["vals"] for m in sc.batches]) if sc.batches else None for sc in ranks]
        check(err is None and all(p is not None for p in parts), f"{impl}: sent to both ranks ({err})")
        if all(p is not None for p in parts):
            splits[impl] = [p.shape[1] for p in parts]
            check(np.array_equal(np.concatenate(parts, axis=1), rows),
                  f"{impl}: rank 0's columns then rank 1's are the rows (widths {splits[impl]})")
    check(len(splits) == 2 and splits["C"] == splits["Python"], f"both split d = 9 alike: {splits}")


if __name__ == "__main__":
    sys.exit(run([test_runs_and_pieces, test_credit, test_drain_waits_for_confirmation, test_sharded_columns]))
