#!/usr/bin/env python3
"""test_faults - the collector and the C producer (dps-produce) under ordinary faults (issue 31): a
collector that dies mid-stream, batches above the collector's limit, replayed batches, a slice sent to a
one-process collector, a key revoked while sending, an operator's status questions, a batch under
another producer's id, a spent budget.  Runs the real dps-collector and dps-produce binaries.

usage: test_faults.py BUILD_DIR [TEST_NAME...]   (prints "N passed, N failed" last)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa: E402,F401,F403  (the shared harness: Collector, check, note, ...)

PRODUCE = os.path.join(BUILD, "producers", "dps-produce")
STATUS = os.path.join(BUILD, "src", "cli", "dps-status")


def rows_file(name, n, d, seed=5):
    path = os.path.join(TMP, f"{name}.npy")
    np.save(path, np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32))
    return path


def produce(c, path, *args, status=True):
    """A dps-produce process toward c (plaintext), its output captured."""
    cmd = [PRODUCE, path, "--insecure-plaintext", "--connect", c.ingest] + (["--status", c.status] if status else [])
    return subprocess.Popen(cmd + list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(p, timeout):
    """(exit code, output, seconds to exit) of a dps-produce process, killed if it outlives timeout."""
    t0 = time.time()
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
        return None, out, time.time() - t0
    return p.returncode, out, time.time() - t0


def push(c):
    ctx = zmq.Context()
    s = ctx.socket(zmq.PUSH)
    s.setsockopt(zmq.LINGER, 2000)
    s.connect(c.ingest)
    return ctx, s


def batch(d, seq, stream, pid="raw", rows=2, **kw):
    data = np.full(rows * d, 0.25, "<f4").tobytes()
    return wire.RowBatch(version=1, producer_id=pid, seq=seq, dim=d, rows=rows, data=data, stream=stream,
                         **kw).SerializeToString()


def test_collector_dies():
    """A collector killed (KILL, TERM) mid-stream: every dps-produce ends within its --collector-timeout
    (2 s here) plus a margin, exit 6, and says how many batches were not confirmed; without --status it
    notices the connection down that long (exit 6).  At da6099d the producers blocked until killed."""
    d = 200
    path = rows_file("dies", 40000, d)
    for sig in (signal.SIGKILL, signal.SIGTERM):
        c = Collector(f"dies-{sig}", d=d, k=2, t=400).start()
        args = ["--rate", "4000", "--batch", "100", "--collector-timeout", "2000", "--drain-timeout", "60000"]
        with_status = produce(c, path, *args)
        without = produce(c, path, *args, status=False)
        check(wait_for(lambda: c.query()["rows_accepted"] >= 4000, 20), f"{sig.name}: rows flow")
        c.proc.send_signal(sig)
        c.proc.wait(30)
        t_dead = time.time()
        # the margin: a question unanswered for the timeout (2 s), one more send slice (0.2 s), the drain's
        # first unanswered question (1 s) and process start-up under ASan on a loaded machine
        for name, p in (("--status", with_status), ("no --status", without)):
            code, out, _ = finish(p, 30)
            took = time.time() - t_dead
            check(code == 6 and took < 2 + 8, f"{sig.name}, {name}: exit {code} after {took:.1f} s: {out[-400:]}")
            if name == "--status":
                check("NOT confirmed" in out and "went silent" in out, f"{sig.name}: the unconfirmed count: {out}")
        c.log.close()


def test_idle_producer_not_gone():
    """A producer that sends less often than its --collector-timeout (here 20 rows every 2 s against 1 s) is not
    taken for one whose collector died: the silence is counted from the start of each wait.  At 1e0f5e4 it
    exited 6 "went silent" with the collector running."""
    d = 40
    c = Collector("idle", d=d, k=2, t=1000).start()
    path = rows_file("idle", 60, d)
    code, out, _ = finish(produce(c, path, "--rate", "10", "--batch", "20", "--collector-timeout", "1000"), 60)
    check(code == 0 and "confirmed all 3 batches" in out, f"exit {code}: {out}")
    c.stop()


def test_batch_limit():
    """--batch above the collector's --max-batch-rows: with --status the producer learns the limit at its
    first question and splits its batches (every row confirmed); without --status the collector drops the
    messages with the connection, counts an empty connection and logs it, and dps-produce exits 1 saying
    so.  At da6099d the first lost all 20 000 rows and both exited 0."""
    d = 200
    c = Collector("limit", d=d, k=2, t=1000).start()
    limit = c.query().get("max_batch_rows", 0)
    check(0 < limit < 2000, f"the collector names its limit: {limit}")
    path = rows_file("limit", 20000, d)
    code, out, _ = finish(produce(c, path, "--batch", "2000"), 120)
    check(code == 0 and "confirmed all" in out, f"--status: split and confirmed: exit {code}: {out}")
    check(c.query()["rows_accepted"] == 20000, f"every row taken: {c.query()['rows_accepted']}")
    # without --status the producer learns of the drop from its connection's monitor, which it reads at the
    # end: the rate keeps it sending for about a second, long after the collector dropped the first batch
    code, out, _ = finish(produce(c, path, "--batch", "2000", "--rate", "20000", status=False), 120)
    check(code == 1 and "ended our connection" in out and "LOST" in out, f"no --status: exit {code}: {out}")
    check(wait_for(lambda: c.query()["counters"].get("connections_empty", 0) >= 1, 10),
          f"the collector counted the empty connection: {c.query()['counters']}")
    check(c.query()["rows_accepted"] == 20000, "and took none of its rows")
    check("without delivering a batch" in c.tail(40), f"and logged it: {c.tail(5)}")
    c.stop()


def test_replayed_batches():
    """A run's seq taken twice is refused and counted (replayed), so no row enters an epoch twice; a new run
    under the same id starts afresh; a producer naming no run restarts only from seq 0; a slice sent to a
    one-process collector is refused (slice_not_sharded).  At da6099d seqs 5, 5, 3 were all taken."""
    d = 40
    c = Collector("replay", d=d, k=2, t=1000).start()
    ctx, s = push(c)
    for seq in (5, 5, 3):
        s.send(batch(d, seq, stream=77))
    s.send(batch(d, 0, stream=78))  # another run of the same id
    for seq in (0, 1, 1, 0):  # no run named: seq 0 is a new run, 1 again is a replay
        s.send(batch(d, seq, stream=0, pid="old"))
    s.send(batch(d, 9, stream=79, shard=0, shards=2, full_dim=2 * d))
    check(wait_for(lambda: c.query()["rows_accepted"] == 2 * 5 and
                   sum(c.query()["refusals"].values()) >= 4), f"{c.query()['refusals']}")
    st = c.query()
    check(st["rows_accepted"] == 10 and st["refusals"]["replayed"] == 3 and st["refusals"]["slice_not_sharded"] == 1,
          f"taken 5 batches of 2 rows, 3 replays and a slice refused: {st['rows_accepted']} {st['refusals']}")
    check(query_status(c.status, producer_id="raw", plaintext=True)["producer_refused"] >= 1,
          "the refusals are counted for their producer")
    s.close()
    ctx.term()
    c.stop()


def test_revoked_key_ends_producer():
    """A key removed from the authorized directory while its dps-produce sends: the producer learns it from
    the status endpoint and exits 5 within seconds, without a retry storm.  At da6099d it retried without
    backoff (717 353 refused requests in 55 s)."""
    keys = make_keys()
    ops_pub, ops_sec = zmq.curve_keypair()
    write_key(os.path.join(keys["authorized"], "ops.key"), ops_pub)
    curve = dict(keys, client_public=ops_pub, client_secret=ops_sec)
    d = 40
    c = Collector("revoke", d=d, k=2, t=1000, curve=curve).start()
    key_dir = os.path.join(keys["dir"], "server.key")  # the server's public key file, as dps-keygen writes it
    write_key(key_dir, keys["server_public"])
    path = rows_file("revoke", 200000, d)
    p = subprocess.Popen([PRODUCE, path, "--server-key", key_dir, "--key",
                          os.path.join(keys["dir"], "client.key_secret"), "--connect", c.ingest, "--status",
                          c.status, "--rate", "5000", "--batch", "50"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    check(wait_for(lambda: c.query()["rows_accepted"] >= 2000, 20), "rows flow")
    os.unlink(os.path.join(keys["authorized"], "client.key"))
    t0 = time.time()
    code, out, _ = finish(p, 30)
    took = time.time() - t0
    revoked = c.query()["refusals"]["auth_revoked"]
    # the collector reads its key directory again within 1 s; then one refused question ends the producer
    check(code == 5 and took < 5, f"exit {code} after {took:.1f} s: {out[-300:]}")
    check(revoked < 200, f"no retry storm: {revoked} refused requests")
    c.stop()


def test_operator_questions_and_foreign_batches():
    """dps-status --producer ID after that producer finished counts no lost connection (the collector's exit
    0); a wrong-dimension batch sent under its id by someone else does not make it report unconfirmed
    batches.  At da6099d three such questions made the collector log batches LOST and exit 4, and the
    foreign batch made the producer exit 1."""
    d = 40
    c = Collector("foreign", d=d, k=2, t=1000).start()
    path = rows_file("foreign", 3000, d)
    ctx, s = push(c)
    s.send(wire.RowBatch(version=1, producer_id="mine", seq=0, dim=d + 1, rows=1,
                         data=np.zeros(d + 1, "<f4").tobytes()).SerializeToString())
    check(wait_for(lambda: c.query()["refusals"]["wrong_dim"] == 1), "the foreign batch is refused")
    code, out, _ = finish(produce(c, path, "--id", "mine", "--batch", "100"), 60)
    check(code == 0 and "confirmed all" in out, f"the producer is confirmed: exit {code}: {out}")
    for _ in range(4):
        r = subprocess.run([STATUS, "--insecure-plaintext", "--connect", c.status, "--producer", "mine"],
                           capture_output=True, text=True)
        time.sleep(0.25)
    check(r.returncode == 0 and "3000" in r.stdout, f"dps-status --producer: {r.stdout[-300:]}")
    check(c.query()["counters"]["connections_dropped"] == 0, "no connection counted as dropped")
    s.close()
    ctx.term()
    check(c.stop() == 0 and "LOST" not in c.tail(30), f"the collector exits 0: {c.tail(4)}")


def test_no_memory_for_buckets():
    """A collector that cannot have its buckets' buffers (dps-collector-faults, which refuses every buffer
    of m d floats, as a machine out of memory would): each batch is counted (batches_cut_short), logged with
    its numbers and told to its producer as refused, whose drain then ends at once saying so (exit 1, not a
    timeout); the collector takes no row and exits 4."""
    d, m = 20, 4
    c = Collector("nomem", d=d, k=2, t=8, m=m, binary=os.path.join(BUILD, "tests", "dps-collector-faults"),
                  extra=["--window", "2", "--rho", "100"], env={"DPS_TEST_REFUSE_FLOATS": str(m * d)}).start()
    path = rows_file("nomem", 30, d)
    code, out, took = finish(produce(c, path, "--batch", "10", "--drain-timeout", "30000"), 60)
    check(code == 1 and "refused 3 of our 3 batches" in out and took < 20,
          f"the producer learns of it: exit {code} after {took:.1f} s: {out}")
    st = c.query()
    check(st["counters"].get("batches_cut_short") == 3 and st["rows_accepted"] == 0,
          f"counted, nothing taken: {st['counters'].get('batches_cut_short')}, {st['rows_accepted']} rows")
    check("10 rows from producer" in c.tail(40) and "0 rows taken, the other 10 dropped" in c.tail(40),
          f"logged with its numbers: {c.tail(5)}")
    code = c.stop()
    check(code == 4 and "rows were LOST this run: 3 batches" in c.tail(3), f"exit {code}: {c.tail(3)}")


def test_budget_spent_warns():
    """Rows sent after the collector's cap is spent are confirmed, and dps-produce says no snapshot will
    come of them; rows all in the epoch that spent the cap (released) draw no warning.  At da6099d it said
    only "confirmed"."""
    d = 40
    c = Collector("spent", d=d, k=2, t=100, extra=["--cap-rho", "1"]).start()  # one epoch of rho 1
    path = rows_file("spent", 2100, d)  # 5 epochs of 400 rows and 100 in the open one
    code, out, _ = finish(produce(c, path, "--batch", "100"), 60)
    check(code == 0 and "confirmed all" in out and "spent its privacy budget cap" in out, f"exit {code}: {out}")
    c.stop()
    c = Collector("spent-exact", d=d, k=2, t=100, extra=["--cap-rho", "1"]).start()
    code, out, _ = finish(produce(c, rows_file("spent-exact", 400, d), "--batch", "100"), 60)
    check(code == 0 and "confirmed all" in out and "spent its" not in out, f"one released epoch: {out}")
    c.stop()


if __name__ == "__main__":
    sys.exit(run([test_collector_dies, test_idle_producer_not_gone, test_batch_limit, test_replayed_batches, test_revoked_key_ends_producer,
                  test_operator_questions_and_foreign_batches, test_no_memory_for_buckets, test_budget_spent_warns]))
