#!/usr/bin/env python3
"""test_ingest - the ingest memory bound: 16 producers under an address-space limit, and
many producers with credit, peak RSS within the stated bound.
Runs the real dps-collector binary.

usage: test_ingest.py BUILD_DIR [TEST_NAME...]   (prints "N passed, N failed" last)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa: E402,F401,F403  (the shared harness: Collector, check, note, ...)


def test_ingest_memory():
    """16 producers at d = 1e4 under a memory limit: every row confirmed, peak RSS within the stated bound.

    Issue 9 item 5: with a per-producer queue of 100 batches the collector held producers x 100 x 10 MB,
    and under an address-space limit libzmq dropped connections with their batches, silently.  Here 16
    dps-produce processes send 8 batches of 256 rows (10 MB each, 1.3 GB in all) at once to a collector
    with --ingest-buffer-mb 500, which holds 16 producers at 3 batches each plus 2 in its loop
    (50 x 10.24 MB = 512 MB < 500 MiB = 524 MB, checked by the collector at start-up).  The bound the
    collector states is its RSS after a first epoch (400 rows) + the buffer + the estimator's bound (from its log);
    the address-space limit set on it then is its VmSize (OpenBLAS's buffers included) + the buffer +
    the estimator + 300 MB of slack for thread arenas, so a collector that queued every batch sent
    (1.3 GB) would run out and drop connections."""
    ingest_memory_run("ingest-mem", n_prod=16, batches=8, buf_mb=500, holds=16, limit=True)


def test_ingest_memory_many():
    """24 producers at d = 1e4 with a buffer that holds 4 producers without credit: within the bound.

    Issue 9 item 5: the bound held only up to the number of producers the buffer holds (each could queue
    rcvhwm + 2 batches in libzmq); beyond that memory grew with the number of producers.  With credit
    (src/collector/credit.h) every dps-produce (it has --status) sends only the batches granted, at most
    (buffer - 2 batches) / batch for all producers together.  --ingest-buffer-mb 160 holds
    (160 MiB - 2 x 10.24 MB) / (3 x 10.24 MB) = 4 producers without credit; 24 producers send 3 batches each
    (737 MB in all, 24 x 3 batches that libzmq alone would queue at once).  No address-space limit: the
    peak RSS itself is checked against the stated bound (a collector without credit passed it by ~400 MB)."""
    ingest_memory_run("ingest-many", n_prod=24, batches=3, buf_mb=160, holds=4, limit=False)


def ingest_memory_run(name, n_prod, batches, buf_mb, holds, limit):
    """n_prod dps-produce processes (with --status) send `batches` batches of 256 x 1e4 at once to a collector with
    --ingest-buffer-mb buf_mb; checks every row confirmed and the peak RSS within the stated bound (see
    test_ingest_memory), under the address-space limit described there when `limit`."""
    d = 10000
    produce = os.path.join(BUILD, "producers", "dps-produce")
    rows = np.random.default_rng(21).standard_normal((256, d)).astype(np.float32)
    data = os.path.join(TMP, "ingest-256.npy")
    np.save(data, rows)
    c = Collector(name, d=d, k=2, t=100, extra=["--window", "32", "--ingest-buffer-mb", str(buf_mb),
                                                "--cap-rho", "1000"]).start()
    ok = wait_for(lambda: "The estimator adds at most" in c.tail(30), 5)
    check(ok and f"holds {holds} of those" in c.tail(30), f"the collector states the bound: {c.tail(3)}")
    est_mb = float(c.tail(30).split("The estimator adds at most ")[1].split()[0]) if ok else 0.0
    send_rows(c, np.vstack([rows, rows[:144]]))  # one epoch (t m = 400 rows): the workers and the loop call OpenBLAS
    check(wait_for(lambda: c.query()["epoch"] >= 1, 20), "a first epoch closed")
    idle_kb, vm_kb = proc_kb(c.proc.pid, "VmRSS"), proc_kb(c.proc.pid, "VmSize")
    bound_kb = idle_kb + (buf_mb + est_mb) * 1024
    lim = int((vm_kb + (buf_mb + est_mb + 300) * 1024) * 1024)
    if limit:
        import resource
        resource.prlimit(c.proc.pid, resource.RLIMIT_AS, (lim, lim))
    t0 = time.time()
    procs = [subprocess.Popen([produce, data, "--repeat", str(batches), "--insecure-plaintext", "--connect", c.ingest,
                               "--status", c.status, "--id", f"{name}-{i}", "--drain-timeout", "60000"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for i in range(n_prod)]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    confirmed = sum(p.returncode == 0 and f"confirmed all {batches} batches" in o for p, o in zip(procs, outs))
    hwm_kb = proc_kb(c.proc.pid, "VmHWM")
    st = c.query()
    note(f"{n_prod} producers x {batches} batches of 256 x {d} in {time.time() - t0:.1f} s: {confirmed} confirmed; "
         f"peak RSS {hwm_kb / 1024:.0f} MB, bound {bound_kb / 1024:.0f} MB (before {idle_kb / 1024:.0f} + buffer "
         f"{buf_mb} + estimator {est_mb:.0f})" + (f", address-space limit {lim / 2**20:.0f} MB" if limit else "") +
         f"; credit grants {st['counters'].get('credit_grants')}, waits {st['counters'].get('credit_waits')}")
    for p, o in zip(procs, outs):
        if p.returncode != 0:
            note(f"producer exit {p.returncode}: {o.strip()[-300:]}")
    check(confirmed == n_prod, f"every producer's batches confirmed ({confirmed} of {n_prod})")
    check(st["rows_accepted"] == 400 + n_prod * batches * 256, f"every row taken ({st['rows_accepted']})")
    if SANITIZED:  # ASan's quarantine and shadow memory are not the collector's: the bound is for real builds
        note(f"sanitizer build: peak RSS {hwm_kb / 1024:.0f} MB not compared with the bound")
    else:
        check(hwm_kb <= bound_kb, f"peak RSS {hwm_kb / 1024:.0f} MB within the stated bound {bound_kb / 1024:.0f} MB")
    check(st["counters"].get("connections_dropped", 0) == 0 and st["counters"]["seq_gaps"] == 0,
          f"no connection dropped, no gap: {st['counters']}")
    check(c.stop() == 0, "clean exit: nothing lost")


if __name__ == "__main__":
    sys.exit(run([
        test_ingest_memory,
        test_ingest_memory_many,
    ]))
