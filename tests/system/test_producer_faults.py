#!/usr/bin/env python3
"""test_producer_faults - the Python Producer (python/dpsubspace/producer.py) under the faults of issue 31,
as tests/system/test_faults.py tests the C dps-produce: its run sent with every batch and question, a
collector that dies mid-stream, batches above the collector's limit (with and without a status endpoint), a
key revoked while sending, a spent budget; its default collector timeout is the C producer's.  Runs the real
dps-collector binary (and, for the run, fake sockets that record what the producer sends).

usage: test_producer_faults.py BUILD_DIR [TEST_NAME...]   (prints "N passed, N failed" last)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa: E402,F401,F403  (the shared harness: Collector, check, note, ...)

import dpsubspace.producer as producer_mod  # noqa: E402  (its names are looked up in the tests that use them)

# the producers made here without a status endpoint are so on purpose
warnings.filterwarnings("ignore", "Producer to .* without status_endpoint", UserWarning)

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def sending(c, rows, rows_per_s, chunk=100, producer_kw=None):
    """A thread that sends rows through a Producer toward c, `chunk` rows at a time at about rows_per_s, then
    closes it (a with-block): out["exc"] is what it raised (None: nothing), out["t"] when it ended
    (time.time()), out["p"] the producer."""
    out = {}

    def go():
        try:
            with Producer(c.ingest, c.d, **dict(c.sec(), **(producer_kw or {}))) as p:
                out["p"] = p
                for i in range(0, rows.shape[0], chunk):
                    p.send(rows[i:i + chunk])
                    time.sleep(chunk / rows_per_s)
            out["exc"] = None
        except Exception as e:  # what the test looks at
            out["exc"] = e
        out["t"] = time.time()

    th = threading.Thread(target=go, daemon=True)
    th.start()
    return th, out


def test_timeout_default_is_the_c_producers():
    """COLLECTOR_TIMEOUT_MS, the Producer's default collector_timeout_ms, is DPS_PRODUCER_COLLECTOR_TIMEOUT_MS
    of include/dpsubspace_net.h (the package does not link the C producer: one figure, stated twice)."""
    import inspect
    with open(os.path.join(SOURCE, "include", "dpsubspace_net.h")) as f:
        m = re.search(r"#define DPS_PRODUCER_COLLECTOR_TIMEOUT_MS (\d+)", f.read())
    c_ms = int(m.group(1)) if m else None
    py_ms = getattr(producer_mod, "COLLECTOR_TIMEOUT_MS", None)
    param = inspect.signature(Producer).parameters.get("collector_timeout_ms")
    check(c_ms is not None and py_ms == c_ms and param is not None and param.default == c_ms,
          f"the C default {c_ms} ms = COLLECTOR_TIMEOUT_MS {py_ms} = Producer's default "
          f"{param.default if param else None}")


def test_run_sent():
    """Every batch names the producer's run (RowBatch.stream, random and nonzero) and so does every status
    question (StatusRequest.run: the check before the first batch, credit, the drain); a batch above the
    collector's limit goes in pieces, each its own seq; a ShardedProducer's parts share one run.  A scripted
    collector (the harness's ScriptedCollector): d = 8, a limit of 3 rows, credit for all asked, the batches
    it received confirmed as taken.  At da6099d batches and questions named no run (0)."""
    from dpsubspace import ShardedProducer
    sc = ScriptedCollector("run", 8, limit=3)  # the harness's: credit for all asked, batches confirmed as taken
    p = Producer(sc.ingest, 8, batch_rows=4, plaintext=True, status_endpoint=sc.status, linger_ms=5000)
    p.send(np.ones((8, 8), np.float32))
    p.close()
    other = Producer(sc.ingest, 8, plaintext=True, status_endpoint=sc.status)
    other_run = other.run
    other.close()
    sc.close()
    b, runs = sc.batches, [q["run"] for q in sc.questions]
    run = getattr(p, "run", 0)
    check(run != 0 and all(m["stream"] == run for m in b) and runs and all(r == run for r in runs),
          f"the run {run} on every batch ({[m['stream'] for m in b]}) and question ({set(runs)})")
    check([m["seq"] for m in b] == [0, 1, 2, 3] and [m["rows"] for m in b] == [3, 1, 3, 1],
          f"2 batches of 4 rows, a limit of 3: pieces of 3 and 1, seqs 0..3 ({[(m['seq'], m['rows']) for m in b]})")
    check(other_run != run, "each producer draws its own run")

    ctx = zmq.Context()
    ranks = [ctx.socket(zmq.PULL) for _ in range(2)]
    base = f"ipc://{TMP}/runs.in"
    for r, s in enumerate(ranks):
        s.bind(producer_mod.shard_endpoint(base, r))
    with ShardedProducer(base, 9, 2, plaintext=True, batch_rows=2) as sp:
        sp.send(np.ones((4, 9), np.float32))
    streams = [[wire.RowBatch.FromString(s.recv()).stream for _ in range(2) if s.poll(5000)] for s in ranks]
    check(all(part.run == sp.run for part in sp.parts) and streams == [[sp.run] * 2] * 2,
          f"sharded: both parts send the run {sp.run}: {streams}")
    for s in ranks:
        s.close(0)
    ctx.term()


def test_collector_dies():
    """A collector killed (KILL, TERM) mid-stream: a Producer with collector_timeout_ms = 2000 raises
    CollectorGoneError within that plus a margin, naming the endpoint, the timeout and how many batches were
    not confirmed -- with a status endpoint (its questions go unanswered) and without (its connection stays
    down) -- and its close() does not wait again.  At da6099d both blocked until the collector came back."""
    CollectorGoneError = producer_mod.CollectorGoneError
    d = 200
    rows = np.random.default_rng(5).standard_normal((40000, d)).astype(np.float32)
    for sig in (signal.SIGKILL, signal.SIGTERM):
        c = Collector(f"pydies-{sig.name}", d=d, k=2, t=400).start()
        kw = dict(collector_timeout_ms=2000, linger_ms=60000)
        # 4 000 rows a second: 10 s of rows, the collector killed after the first second
        senders = {"status": sending(c, rows, 4000, producer_kw=dict(kw, status_endpoint=c.status)),
                   "no status": sending(c, rows, 4000, producer_kw=kw)}
        check(wait_for(lambda: c.query()["rows_accepted"] >= 4000, 20), f"{sig.name}: rows flow")
        t_kill = time.time()
        c.proc.send_signal(sig)
        c.proc.wait(30)
        t_dead = time.time()
        for name, (th, out) in senders.items():
            th.join(30)
            e, p = out.get("exc", "still blocked after 30 s"), out.get("p")
            took = out["t"] - t_dead if "t" in out else float("inf")
            # the margin: after the timeout (2 s) a send slice (0.2 s) and a reply slice (0.2 s) before the
            # silence is seen, and the thread's turn on a machine running other tests beside (ctest -j2)
            check(isinstance(e, CollectorGoneError) and out["t"] > t_kill and took < 2 + 4,
                  f"{sig.name}, {name}: CollectorGoneError after {took:.1f} s: {e!r}")
            if not isinstance(e, CollectorGoneError):
                continue
            taken = p.batches_taken if name == "status" else 0  # without a status endpoint nothing is confirmed
            check(e.unconfirmed >= 1 and e.unconfirmed == e.sent - taken and e.sent >= p.batches_sent and
                  f"{e.unconfirmed} of our {e.sent} batches" in str(e) and "2000 ms" in str(e) and
                  e.endpoint == (c.status if name == "status" else c.ingest) and e.endpoint in str(e),
                  f"{sig.name}, {name}: the endpoint, the timeout and the unconfirmed count: {e}")
            note(f"{sig.name}, {name}: raised {took:.1f} s after the collector's end: {e}")
        c.log.close()


def test_collector_frozen_during_drain():
    """A collector that stops answering (SIGSTOP: its connections stay up) while close() waits for its
    confirmation: CollectorGoneError after collector_timeout_ms (2 s) plus a margin, not after linger_ms
    (60 s).  At da6099d close() waited out linger_ms."""
    CollectorGoneError = producer_mod.CollectorGoneError
    c = Collector("pyfrozen", d=40, k=2, t=1000).start()
    p = c.producer(batch_rows=100, collector_timeout_ms=2000, linger_ms=60000)
    p.send(np.ones((1000, 40), np.float32))
    c.proc.send_signal(signal.SIGSTOP)
    t0 = time.time()
    err = None
    try:
        p.close()
    except UnconfirmedBatchesError as e:
        err = e
    took = time.time() - t0
    c.proc.send_signal(signal.SIGCONT)
    # the margin: the drain's reply slices (0.2 s) and a loaded machine
    check(isinstance(err, CollectorGoneError) and took < 2 + 3 and err.endpoint == c.status,
          f"CollectorGoneError after {took:.1f} s: {err!r}")
    c.stop()


def test_late_reply_then_silence():
    """A reply that comes after the producer asked again (the question before it dropped by REQ_CORRELATE),
    from a collector that then goes silent: close() ends with CollectorGoneError after collector_timeout_ms,
    instead of waiting in a receive for the answer that never comes.  A fake collector: a PULL socket and a
    REP thread that answers d = 8 and credit, then, told to, answers the next question 1.3 s late (after the
    producer's PING_S of 1 s) and no more."""
    CollectorGoneError = producer_mod.CollectorGoneError
    ctx = zmq.Context()
    pull, rep = ctx.socket(zmq.PULL), ctx.socket(zmq.REP)
    ingest, status = f"ipc://{TMP}/late.in", f"ipc://{TMP}/late.st"
    pull.bind(ingest)
    rep.bind(status)
    fake = {"late": False, "stop": False}

    def serve():
        while not fake["stop"]:
            while pull.poll(0):
                pull.recv()
            if rep.poll(5):
                q = wire.StatusRequest.FromString(rep.recv())
                if fake["late"]:
                    time.sleep(1.3)
                r = wire.StatusReply(version=1, d=8, credit=True, credit_seq_end=max(q.credit_seq_end, 1000))
                rep.send(r.SerializeToString())
                if fake["late"]:
                    return  # silent from now on

    th = threading.Thread(target=serve, daemon=True)
    th.start()
    p = Producer(ingest, 8, batch_rows=4, plaintext=True, status_endpoint=status, linger_ms=30000,
                 collector_timeout_ms=2000)
    p.send(np.ones((8, 8), np.float32))
    fake["late"] = True
    out = {}

    def close():
        try:
            p.close()
            out["exc"] = None
        except Exception as e:  # what the test looks at
            out["exc"] = e

    t0 = time.time()
    closer = threading.Thread(target=close, daemon=True)
    closer.start()
    closer.join(20)
    took = time.time() - t0
    # the margin: the timeout (2 s) counted from the drain's start, its reply slices (0.2 s), a loaded machine
    check(isinstance(out.get("exc"), CollectorGoneError) and took < 2 + 3,
          f"CollectorGoneError after {took:.1f} s: {out.get('exc', 'close() still blocked after 20 s')!r}")
    fake["stop"] = True
    th.join(5)
    pull.close(0)
    rep.close(0)
    if not closer.is_alive():  # a producer blocked in a receive keeps the context busy
        ctx.term()


def test_idle_is_not_silence():
    """A producer that sends nothing for longer than collector_timeout_ms (a training step between batches)
    is not told its live collector is gone: the silence counts from the start of a wait, not from the last
    reply before it."""
    c = Collector("pyidle", d=20, k=2, t=1000).start()
    for kw in (dict(status_endpoint=c.status), {}):
        err = None
        try:
            with Producer(c.ingest, 20, plaintext=True, batch_rows=10, collector_timeout_ms=500, **kw) as p:
                for _ in range(3):
                    p.send(np.ones((10, 20), np.float32))
                    time.sleep(1.0)  # twice the timeout
        except UnconfirmedBatchesError as e:
            err = e
        check(err is None, f"{'status endpoint' if kw else 'no status endpoint'}: 3 batches a second apart: {err}")
    check(c.query()["rows_accepted"] == 60, f"every row taken: {c.query()['rows_accepted']}")
    c.stop()


def test_batch_limit():
    """batch_rows above the collector's --max-batch-rows: with a status endpoint the producer learns the
    limit from its first answer and sends each batch in pieces (every row taken and confirmed); without one
    the collector drops the messages with the connection, and close() raises saying it ended our connection
    and the batches were lost.  At da6099d the first lost its rows and waited for a confirmation that never
    came, the second closed without a word."""
    d = 200
    c = Collector("pylimit", d=d, k=2, t=1000).start()
    limit = c.query().get("max_batch_rows", 0)
    check(0 < limit < 2000, f"the collector names its limit: {limit}")
    rows = np.random.default_rng(6).standard_normal((20000, d)).astype(np.float32)
    err = None
    try:
        with c.producer(batch_rows=2000, linger_ms=20000) as p:
            p.send(rows)
    except UnconfirmedBatchesError as e:
        err = e
    pieces = 10 * -(-2000 // limit) if limit else None
    check(err is None and c.query()["rows_accepted"] == 20000 and p.batches_sent == pieces,
          f"status endpoint: {p.batches_sent} pieces (want {pieces}), every row confirmed "
          f"({c.query()['rows_accepted']} taken): {err}")
    p = Producer(c.ingest, d, plaintext=True, batch_rows=2000, linger_ms=5000)
    p.wait_ready(5000)
    p.send(rows[:4000])
    check(wait_for(lambda: c.query()["counters"].get("disconnects", 0) >= 1, 10), "the collector drops them")
    time.sleep(0.2)  # our end of the same connection ends within milliseconds of the collector's
    err = None
    try:
        p.close()
    except UnconfirmedBatchesError as e:
        err = e
    check(err is not None and "ended our connection" in str(err) and "LOST" in str(err) and
          err.unconfirmed == err.sent == 2, f"no status endpoint: close() says the batches were lost: {err}")
    c.stop()


def test_revoked_key():
    """A key removed from the authorized directory while its Producer sends: the producer learns it from a
    status reply and raises PermissionError within seconds, without a retry storm.  At da6099d it retried
    without backoff."""
    keys = make_keys()
    ops_pub, ops_sec = zmq.curve_keypair()  # the test's own status questions: a key that stays authorized
    write_key(os.path.join(keys["authorized"], "ops.key"), ops_pub)
    c = Collector("pyrevoke", d=40, k=2, t=1000, curve=dict(keys, client_public=ops_pub, client_secret=ops_sec))
    c.start()
    trainer = dict(server_public_key=keys["server_public"], public_key=keys["client_public"],
                   secret_key=keys["client_secret"])
    rows = np.random.default_rng(7).standard_normal((200000, 40)).astype(np.float32)
    # 5 000 rows a second in batches of 50 (100 batches a second, as the C test's dps-produce)
    th, out = sending(c, rows, 5000, chunk=50,
                      producer_kw=dict(trainer, plaintext=False, status_endpoint=c.status, batch_rows=50))
    check(wait_for(lambda: c.query()["rows_accepted"] >= 2000, 20), "rows flow")
    os.unlink(os.path.join(keys["authorized"], "client.key"))
    t0 = time.time()
    th.join(30)
    e, took = out.get("exc", "still sending after 30 s"), out.get("t", time.time()) - t0
    revoked = c.query()["refusals"].get("auth_revoked", 0)
    # the collector reads its key directory again within 1 s; then one refused question ends the producer
    check(isinstance(e, PermissionError) and "key was revoked" in str(e) and took < 5,
          f"PermissionError after {took:.1f} s: {e!r}")
    check(revoked < 200, f"no retry storm: {revoked} refused requests")
    c.stop()


def test_budget_spent_warns():
    """Rows confirmed after the collector's cap is spent: close() warns that no snapshot will come of them.
    At da6099d it said nothing."""
    c = Collector("pyspent", d=40, k=2, t=100, extra=["--cap-rho", "1"]).start()  # one epoch of rho 1
    rows = np.random.default_rng(8).standard_normal((2100, 40)).astype(np.float32)  # 5 epochs and 100 rows open
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with c.producer(batch_rows=100) as p:
            p.send(rows)
    said = [str(x.message) for x in w if "spent its privacy budget cap" in str(x.message)]
    check(len(said) == 1 and "no further snapshot" in said[0], f"one warning: {said}")
    c.stop()


if __name__ == "__main__":
    sys.exit(run([test_timeout_default_is_the_c_producers, test_run_sent, test_collector_dies,
                  test_collector_frozen_during_drain, test_late_reply_then_silence, test_idle_is_not_silence,
                  test_batch_limit, test_revoked_key, test_budget_spent_warns]))
