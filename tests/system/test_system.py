#!/usr/bin/env python3
"""test_system - the streaming system over real sockets (tcp on 127.0.0.1 and
ipc): end-to-end accuracy, the late joiner, every bad-input class counted, an
unauthorized producer refused, the budget cap, producers blocked (not dropped)
behind a slow collector, kill -9 and injected crashes at the moments around a
release, clean shutdown.  Runs the real dps-collector binary.

usage: test_system.py BUILD_DIR   (prints "N passed, N failed" last)
"""
import math
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
sys.path.insert(0, os.path.join(BUILD, "python"))
import numpy as np  # noqa: E402
import zmq  # noqa: E402

from dpsubspace import Producer, Subscriber, wire  # noqa: E402
from dpsubspace.status import query_status  # noqa: E402

COLLECTOR = os.path.join(BUILD, "dps-collector")
PASS = FAIL = 0
TMP = tempfile.mkdtemp(prefix="dps-system-")


def check(cond, what):
    global PASS, FAIL
    if cond:
        PASS += 1
    else:
        FAIL += 1
        print(f"FAIL: {what}", file=sys.stderr, flush=True)


def note(msg):
    print("  " + msg, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def synth(n, d, k, tau, rng, basis=None):
    """The paper's generator (DESIGN 4) in numpy; returns rows and an orthonormal basis (k, d)."""
    if basis is None:
        b = rng.choice([-1.0, 1.0], size=(k, d))
        basis = np.linalg.qr(b.T)[0].T
    g = rng.standard_normal((n, k))
    u = (g / np.linalg.norm(g, axis=1, keepdims=True)) @ basis
    nu = rng.choice([-1.0, 1.0], size=(n, d)) / tau
    x = u + nu
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32), basis


def sin_angle(A, B):
    """sin of the largest principal angle between row spans (orthonormal rows)."""
    E = B - (B @ A.T) @ A
    return float(np.sqrt(max(0.0, np.linalg.eigvalsh(E @ E.T).max())))


class Collector:
    """A dps-collector process with its own state dir and endpoints."""

    def __init__(self, name, d=60, k=2, t=60, m=None, transport="ipc", curve=None, extra=(), env=None,
                 state=None):
        self.name, self.d, self.k, self.t, self.m = name, d, k, t, m or 2 * k
        self.state = state or os.path.join(TMP, name + "-state")
        if transport == "ipc":
            base = os.path.join(TMP, name)
            self.ingest, self.publish, self.status = (f"ipc://{base}.in", f"ipc://{base}.pub", f"ipc://{base}.st")
        else:
            self.ingest, self.publish, self.status = (f"tcp://127.0.0.1:{free_port()}" for _ in range(3))
        self.curve = curve
        args = [COLLECTOR, "--d", str(d), "--k", str(k), "--t", str(t), "--m", str(self.m), "--state-dir",
                self.state, "--ingest", self.ingest, "--publish", self.publish, "--status", self.status,
                "--seed", "7", "--workers", "2"]
        if curve:
            args += ["--server-key", curve["server_secret_file"], "--authorized-keys", curve["authorized"]]
        else:
            args += ["--insecure-plaintext"]
        self.args = args + list(extra)
        self.env = dict(os.environ, **(env or {}))
        self.log_path = os.path.join(TMP, name + ".log")
        self.proc = None

    def start(self, wait=True):
        self.log = open(self.log_path, "a")
        self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=self.log, env=self.env)
        if wait:
            self.wait_up()
        return self

    def wait_up(self, timeout=10):
        end = time.time() + timeout
        while time.time() < end:
            try:
                return self.query(500)
            except TimeoutError:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"collector {self.name} exited: {self.tail()}")
        raise RuntimeError(f"collector {self.name} did not answer: {self.tail()}")

    def sec(self):
        if not self.curve:
            return dict(plaintext=True)
        return dict(server_public_key=self.curve["server_public"], public_key=self.curve["client_public"],
                    secret_key=self.curve["client_secret"])

    def query(self, timeout_ms=2000):
        return query_status(self.status, timeout_ms, **self.sec())

    def producer(self, **kw):
        return Producer(self.ingest, self.d, **dict(self.sec(), status_endpoint=self.status, **kw))

    def subscriber(self):
        return Subscriber(self.publish, **self.sec())

    def stop(self, sig=signal.SIGTERM, timeout=20):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc:
            self.log.close()
        return self.proc.returncode if self.proc else None

    def tail(self, n=15):
        with open(self.log_path) as f:
            return "".join(f.readlines()[-n:])

    def ledger(self):
        """Parsed ledger lines: list of dicts."""
        out = []
        path = os.path.join(self.state, "ledger")
        if not os.path.exists(path):
            return out
        with open(path) as f:
            for line in f:
                out.append(dict(kv.split("=", 1) for kv in line.split()[1:]))
        return out

    def snapshots(self):
        d = os.path.join(self.state, "snapshots")
        res = []
        for fn in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            if fn.endswith(".snap"):
                with open(os.path.join(d, fn), "rb") as f:
                    res.append(wire.Snapshot.FromString(f.read()))
        return res


def send_rows(c, rows, **kw):
    with c.producer(**kw) as p:
        p.send(rows)


def wait_for(pred, timeout=20, step=0.05):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return True
        time.sleep(step)
    return False


def make_keys():
    """Server and two client key pairs in dps-keygen's file format; one client authorized."""
    d = tempfile.mkdtemp(dir=TMP)
    auth = os.path.join(d, "authorized")
    os.mkdir(auth)
    keys = {}
    for name in ("server", "client", "stranger"):
        pub, sec = zmq.curve_keypair()
        keys[name] = (pub, sec)
        with open(os.path.join(d, name + ".key_secret"), "w") as f:
            f.write(f"# test key\npublic-key = {pub.decode()}\nsecret-key = {sec.decode()}\n")
    with open(os.path.join(auth, "client.key"), "w") as f:
        f.write(f"public-key = {keys['client'][0].decode()}\n")
    return dict(server_secret_file=os.path.join(d, "server.key_secret"), authorized=auth, dir=d,
                server_public=keys["server"][0], client_public=keys["client"][0], client_secret=keys["client"][1],
                stranger_public=keys["stranger"][0], stranger_secret=keys["stranger"][1])


def ledger_invariants(c, label):
    """Every stored snapshot that spent budget has a commit line; totals add up; an epoch commits once."""
    led = c.ledger()
    commits = [e for e in led if e["kind"] == "commit"]
    epochs = [int(e["epoch"]) for e in commits]
    check(len(epochs) == len(set(epochs)), f"{label}: an epoch committed twice: {epochs}")
    total = 0.0
    ok = True
    for e in commits:
        total += float(e["rho"])
        ok &= abs(float(e["total_rho"]) - total) < 1e-9
    check(ok, f"{label}: ledger totals add up")
    for s in c.snapshots():
        if s.rho_epoch > 0:
            check(s.epoch in epochs, f"{label}: snapshot of epoch {s.epoch} has no ledger commit")
            check(s.rho_total <= total + 1e-12, f"{label}: snapshot total {s.rho_total} above ledger {total}")
    return total, epochs


# --------------------------------------------------------------------- tests
def test_end_to_end_tcp_curve():
    """3 producers over tcp+CURVE, 2 epochs of the paper's data (d=1000, k=4, n=250k per epoch)."""
    keys = make_keys()
    d, k = 1000, 4
    c = Collector("e2e", d=d, k=k, t=125, transport="tcp", curve=keys).start()
    sub = c.subscriber()
    rng = np.random.default_rng(1)
    rows, truth = synth(2000, d, k, 10.0 * d, rng)
    threads = [threading.Thread(target=send_rows, args=(c, rows[i::3]), kwargs=dict(producer_id=f"p{i}"))
               for i in range(3)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    snaps = [sub.recv(30000) for _ in range(2)]
    check(all(s is not None for s in snaps), "two snapshots arrived")
    for s in snaps:
        if s is None:
            continue
        check(s.status == "released", f"epoch {s.epoch} released ({s.reason})")
        if s.basis is not None:
            err = sin_angle(s.basis, truth)
            note(f"e2e tcp+CURVE: epoch {s.epoch} seq {s.seq} sin to truth {err:.4f}, total rho {s.rho_total}")
            # test_estimator checks the estimator against a bound derived from each run
            # (0.13 at d = 1000); here the rows travel over sockets in another order, so the
            # quality is the same in distribution: 0.3 leaves a factor > 2.
            check(err < 0.3, f"e2e accuracy {err}")
            check(s.seeded, "seeded run says so")
            check(not s.weak, "a good basis is not flagged weak")
    check([s.seq for s in snaps if s] == [1, 2], "sequence numbers 1, 2")
    st = c.query()
    check(st["rows_accepted"] == 2000 and st["epoch"] == 2, f"status rows {st['rows_accepted']} epoch {st['epoch']}")
    check(abs(st["rho_spent"] - 2.0) < 1e-12, "status rho spent")
    # late joiner: gets the latest snapshot at once
    t0 = time.time()
    late = c.subscriber()
    s = late.recv(5000)
    check(s is not None and s.seq == 2 and s.epoch == 1, f"late joiner got the latest at once ({s and s.seq})")
    note(f"late joiner: latest snapshot (seq {s and s.seq}) after {1000 * (time.time() - t0):.0f} ms")
    late.close()
    sub.close()
    # an unauthorized producer is refused, its rows never counted; the authorized one works
    bad = Producer(c.ingest, d, server_public_key=keys["server_public"], public_key=keys["stranger_public"],
                   secret_key=keys["stranger_secret"])
    refused = False
    try:
        bad.wait_ready(5000)
    except PermissionError:
        refused = True
    bad.close()
    check(refused, "unauthorized producer told it was refused")
    st = c.query()
    check(st["rows_accepted"] == 2000, "no rows from the unauthorized producer")
    check(st["rejected"].get("auth_refused", 0) >= 1, "auth refusal counted")
    # ...until its key is added to the directory: no restart needed
    time.sleep(1.1)  # a new mtime second for the directory
    with open(os.path.join(keys["authorized"], "stranger.key"), "w") as f:
        f.write(f"public-key = {keys['stranger_public'].decode()}\n")
    p = Producer(c.ingest, d, server_public_key=keys["server_public"], public_key=keys["stranger_public"],
                 secret_key=keys["stranger_secret"])
    check(p.wait_ready(5000), "key added at runtime is accepted")
    p.send(rows[:10])
    p.close()
    check(wait_for(lambda: c.query()["rows_accepted"] == 2010), "its rows are accepted")
    # a plaintext client cannot talk to a CURVE collector
    rc = c.stop()
    check(rc == 0, f"SIGTERM: clean exit ({rc})")
    check("stopping" in c.tail(), "shutdown logged")
    ledger_invariants(c, "e2e")


def test_bad_input_ipc():
    """Every refusal class counted exactly; the collector stays up."""
    d = 60
    c = Collector("bad", d=d, k=2, t=60).start()
    ctx = zmq.Context()
    s = ctx.socket(zmq.PUSH)
    s.connect(c.ingest)

    def batch(version=1, dim=d, rows=1, nbytes=None, pid="t", data=None):
        if data is None:
            data = np.full(rows * dim, 0.5, "<f4").tobytes() if nbytes is None else b"\0" * nbytes
        return wire.RowBatch(version=version, producer_id=pid, seq=0, dim=dim, rows=rows, data=data)

    msgs = [b"\xff\xff\xffgarbage", batch(version=2).SerializeToString(), batch(dim=d + 1).SerializeToString(),
            batch(rows=2, nbytes=4 * d).SerializeToString(), batch(rows=0, nbytes=0).SerializeToString(),
            batch(pid="x" * 65).SerializeToString(), batch().SerializeToString()[:-7]]
    for m in msgs:
        s.send(m)
    s.send_multipart([batch().SerializeToString(), b"extra"])
    bad_rows = np.ones((4, d), "<f4")
    bad_rows[0, 3] = np.nan
    bad_rows[1, 0] = np.inf
    bad_rows[2] = 0
    s.send(batch(rows=4, data=bad_rows.tobytes()).SerializeToString())
    want = {"undecodable": 3, "bad_version": 1, "wrong_dim": 1, "count_mismatch": 1, "empty_batch": 1,
            "bad_producer_id": 1, "rows_nan": 1, "rows_inf": 1, "rows_zero": 1}
    # the truncated message and the multipart one are both undecodable (or truncated into another
    # error); the 4-row batch is accepted with three rows entering as zero vectors
    ok = wait_for(lambda: c.query()["rows_accepted"] == 4)
    st = c.query()
    note("refusals: " + ", ".join(f"{k}={v}" for k, v in st["rejected"].items() if v))
    check(ok, f"the good batch arrived ({st['rows_accepted']} rows)")
    rj = st["rejected"]
    truncated_ok = rj["undecodable"] + rj["count_mismatch"] + rj["wrong_dim"] + rj["bad_version"] + \
        rj["empty_batch"] + rj["bad_producer_id"] == 8
    check(truncated_ok, "8 whole messages refused in all")
    for name in ("bad_version", "wrong_dim", "empty_batch", "bad_producer_id", "rows_nan", "rows_inf", "rows_zero"):
        check(rj.get(name) == want[name], f"{name}: {rj.get(name)} want {want[name]}")
    # an oversized message: libzmq drops the connection (MAXMSGSIZE from d); counted, collector up
    big = ctx.socket(zmq.PUSH)
    big.connect(c.ingest)
    big.send(b"\0" * (4096 * d * 4 + 4096))
    check(wait_for(lambda: c.query()["rejected"].get("disconnects", 0) >= 1, 10), "oversized: connection dropped")
    s.send(batch(rows=3).SerializeToString())
    check(wait_for(lambda: c.query()["rows_accepted"] == 7), "still accepting after all that")
    s.close(0)
    big.close(0)
    ctx.term()
    # a producer of the wrong dimension learns it from its drain instead of timing out
    p = Producer(c.ingest, d + 3, plaintext=True, status_endpoint=c.status, linger_ms=5000)
    p.send(np.ones((5, d + 3), np.float32))
    told = False
    try:
        p.drain()
    except ValueError as e:
        told = "refused 1 of our batches" in str(e)
    p.close()
    check(told, "a refused batch is reported by the drain")
    check(c.stop() == 0, "clean exit")


def test_plaintext_rules():
    c = Collector("pt", transport="tcp")
    c.args = [a.replace("127.0.0.1", "0.0.0.0") if a.startswith("tcp://") and "ingest" not in a else a
              for a in c.args]
    i = c.args.index("--ingest")
    c.args[i + 1] = "tcp://0.0.0.0:%d" % free_port()
    p = subprocess.run(c.args, capture_output=True, text=True, timeout=20)
    check(p.returncode == 2 and "plaintext" in p.stderr, f"plaintext on a public address refused: {p.stderr.strip()}")
    refused = False
    try:
        Producer("tcp://10.1.2.3:5555", 4, plaintext=True)
    except ValueError:
        refused = True
    check(refused, "python producer refuses plaintext to a non-local endpoint")
    p = subprocess.run([COLLECTOR, "--d", "10", "--k", "2", "--state-dir", os.path.join(TMP, "x")],
                       capture_output=True, text=True)
    check(p.returncode == 2 and "CURVE" in p.stderr, "no keys and no --insecure-plaintext: refused with a reason")


def test_budget_cap():
    # t = 60: with t = 10 the noisy count (sd 6.7 at rho 0.1) can never clear its threshold and
    # every epoch FAILs (spending its budget) -- see the crash tests, which do not need a release
    c = Collector("cap", d=40, k=2, t=60, extra=["--cap-rho", "1.5"]).start()
    sub = c.subscriber()
    rng = np.random.default_rng(2)
    rows, _ = synth(240 * 2, 40, 2, 400.0, rng)
    send_rows(c, rows)
    s1, s2 = sub.recv(10000), sub.recv(10000)
    check(s1 is not None and s1.status == "released", "first epoch released")
    check(s2 is not None and s2.status == "refused", f"second epoch refused ({s2 and s2.status})")
    if s2:
        check(s2.rho_epoch == 0 and abs(s2.rho_total - 1.0) < 1e-12, "refusal spends nothing")
        note(f"cap: {s2.describe()}")
    check(wait_for(lambda: "would pass the privacy budget cap" in c.tail(), 5), "refusal logged")
    check(any(e["kind"] == "refused" for e in c.ledger()), "refusal in the ledger")
    st = c.query()
    check(st["budget_unit"] == "rho" and abs(st["budget_left"] - 0.5) < 1e-12, "status: budget left 0.5 rho")
    sub.close()
    c.stop()


def test_backpressure():
    """A stopped collector blocks producers; nothing is dropped when it resumes."""
    d = 200
    c = Collector("bp", d=d, k=2, t=60, extra=["--rcvhwm", "2"]).start()
    c.proc.send_signal(signal.SIGSTOP)
    rows = np.random.default_rng(3).standard_normal((400, d)).astype(np.float32)
    done = threading.Event()

    def produce():
        with c.producer(batch_rows=4, sndhwm=2) as p:
            p.send(rows)
        done.set()

    th = threading.Thread(target=produce)
    th.start()
    time.sleep(1.5)
    check(not done.is_set(), "producer is blocked while the collector is stopped")
    c.proc.send_signal(signal.SIGCONT)
    th.join(30)
    check(done.is_set(), "producer finished after the collector resumed")
    check(c.query()["rows_accepted"] == 400, "all 400 rows taken before the producer returned: none dropped")
    # without SIGSTOP, many short-lived producers over ipc with a tiny queue: the drain keeps every row
    for i in range(5):
        with c.producer(batch_rows=4, sndhwm=2) as p:
            p.send(rows[:100])
    st = c.query()
    check(st["rows_accepted"] == 900 and st["rejected"]["seq_gaps"] == 0, f"900 rows, no gaps ({st['rows_accepted']})")
    c.stop()


def test_period_and_config_file():
    """--epoch-seconds closes a partial epoch; settings can come from a config file."""
    conf = os.path.join(TMP, "period.conf")
    base = os.path.join(TMP, "period")
    with open(conf, "w") as f:
        f.write(f"# a config file: name = value\nd = 40\nk = 2\nt = 60\nepoch-seconds = 1.0\n"
                f"insecure-plaintext = true\nstate-dir = {base}-state\ningest = ipc://{base}.in\n"
                f"publish = ipc://{base}.pub\nstatus = ipc://{base}.st\nseed = 3\n")
    c = Collector("period", d=40, k=2, t=60)
    c.args = [COLLECTOR, "--config", conf]
    c.ingest, c.publish, c.status = f"ipc://{base}.in", f"ipc://{base}.pub", f"ipc://{base}.st"
    c.start()
    st = c.query()
    check(st["d"] == 40 and st["k"] == 2 and st["epoch_rows"] == 240, "settings read from the config file")
    sub = c.subscriber()
    rows, _ = synth(200, 40, 2, 400.0, np.random.default_rng(9))
    send_rows(c, rows)
    s = sub.recv(5000)
    check(s is not None, "a partial epoch closed by --epoch-seconds")
    if s is not None:
        st = c.query()
        check(s.rows_used == 4 * s.buckets_used and st["rejected"]["rows_discarded"] == 200 - s.rows_used,
              f"{s.buckets_used} complete buckets used, the other {200 - s.rows_used} rows discarded")
        note(f"period close: {s.buckets_used} buckets of 4 complete out of 200 rows; {s.describe()}")
    sub.close()
    c.stop()
    bad = os.path.join(TMP, "bad.conf")
    with open(bad, "w") as f:
        f.write("d = 40\nbogus = 1\n")
    p = subprocess.run([COLLECTOR, "--config", bad], capture_output=True, text=True)
    check(p.returncode == 2 and "bad.conf:2: unknown setting 'bogus'" in p.stderr, f"config errors name the line: {p.stderr.strip()}")


def test_weak_snapshot():
    """Buckets of isotropic rows cannot agree: the released basis is flagged WEAK everywhere."""
    c = Collector("weak", d=300, k=2, t=60).start()
    sub = c.subscriber()
    send_rows(c, np.random.default_rng(5).standard_normal((240, 300)).astype(np.float32))
    s = sub.recv(10000)
    check(s is not None and s.status == "released" and s.weak, f"isotropic data: released but weak ({s and s.describe()})")
    if s:
        note(f"weak: radius {s.radius:.3g} of {s.radius_unrelated:.3g} between unrelated buckets")
    check(wait_for(lambda: "carries little information" in c.tail(), 5), "the collector warns")
    sub.close()
    c.stop()


def test_other_mechanisms():
    """The collector runs the histogram aggregator and the covariance mechanism end to end."""
    rng = np.random.default_rng(12)
    # covariance: no buckets, every row of the epoch used, pure eps-DP charged (rho, 0).  With eps = 2,
    # n = 240 rows near a 2-dim span in d = 20, each exponential-mechanism draw has sin^2 about
    # chi^2_18 / (eps n / 2) = 18/240 (see tests/test_estimator.c): sin < 0.6 with a wide margin.
    c = Collector("cov", d=20, k=2, t=60, extra=("--aggregator", "covariance", "--rho-epoch", "2")).start()
    sub = c.subscriber()
    rows, basis = synth(240, 20, 2, 2e4, rng)
    send_rows(c, rows)
    s = sub.recv(10000)
    ok = s is not None and s.status == "released" and s.aggregator == "covariance"
    check(ok, f"covariance snapshot released ({s and s.describe()})")
    if ok:
        check(s.rows_used == 240 and s.buckets_used == 0, "covariance: all 240 rows used, no buckets")
        check(s.rho_epoch == 2.0 and s.delta_epoch == 0.0, "covariance: charged (rho 2, delta 0)")
        sn = sin_angle(s.basis, basis)
        check(sn < 0.6 and not s.weak, f"covariance: sin {sn:.3f} to the truth, not flagged weak")
    total, epochs = ledger_invariants(c, "covariance")
    check(epochs == [0] and abs(total - 2.0) < 1e-12, "covariance: the ledger has epoch 0 at rho 2")
    sub.close()
    c.stop()
    bad = subprocess.run([COLLECTOR, "--d", "5000", "--k", "2", "--aggregator", "covariance", "--insecure-plaintext",
                          "--state-dir", os.path.join(TMP, "covbig")], capture_output=True, text=True)
    check(bad.returncode == 2 and "4096" in bad.stderr, f"covariance refuses d = 5000: {bad.stderr.strip()}")
    # histogram: nearly exact rows (tau = 1e6 d), so every bucket lands in one cell.
    c = Collector("hist", d=40, k=2, t=60, extra=("--aggregator", "histogram")).start()
    sub = c.subscriber()
    rows, basis = synth(240, 40, 2, 4e7, rng)
    send_rows(c, rows)
    s = sub.recv(10000)
    ok = s is not None and s.status == "released" and s.aggregator == "histogram"
    check(ok, f"histogram snapshot released ({s and s.describe()})")
    if ok:
        sn = sin_angle(s.basis, basis)
        check(sn < 0.2, f"histogram: sin {sn:.3f} to the truth")
    sub.close()
    c.stop()


def proc_kb(pid, field):
    """A /proc/<pid>/status figure in kB (VmRSS, VmHWM, VmSize)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def test_ingest_memory():
    """16 producers at d = 1e4 under a memory limit: every row confirmed, peak RSS within the stated bound.

    Issue 9 item 5: with a per-producer queue of 100 batches the collector held producers x 100 x 10 MB,
    and under an address-space limit libzmq dropped connections with their batches, silently.  Here 16
    dps-produce processes send 8 batches of 256 rows (10 MB each, 1.3 GB in all) at once to a collector
    with --ingest-buffer-mb 500, which holds 16 producers at 3 batches each plus 3 in its loop
    (51 x 10.24 MB = 522 MB < 500 MiB = 524 MB, checked by the collector at start-up).  The bound the
    collector states is its RSS after a first epoch (400 rows) + the buffer + the estimator's bound (from its log);
    the address-space limit set on it then is its VmSize (OpenBLAS's buffers included) + the buffer +
    the estimator + 300 MB of slack for thread arenas, so a collector that queued every batch sent
    (1.3 GB) would run out and drop connections."""
    d, n_prod, batches, buf_mb = 10000, 16, 8, 500
    produce = os.path.join(BUILD, "src", "cli", "dps-produce")
    rows = np.random.default_rng(21).standard_normal((256, d)).astype(np.float32)
    data = os.path.join(TMP, "ingest-256.npy")
    np.save(data, rows)
    c = Collector("ingest-mem", d=d, k=2, t=100, extra=["--window", "32", "--ingest-buffer-mb", str(buf_mb),
                                                        "--cap-rho", "1000"]).start()
    ok = wait_for(lambda: "The estimator adds at most" in c.tail(30), 5)
    check(ok and f"holds {n_prod} producers" in c.tail(30), f"the collector states the bound: {c.tail(3)}")
    est_mb = float(c.tail(30).split("The estimator adds at most ")[1].split()[0]) if ok else 0.0
    send_rows(c, np.vstack([rows, rows[:144]]))  # one epoch (t m = 400 rows): the workers and the loop call OpenBLAS
    check(wait_for(lambda: c.query()["epoch"] >= 1, 20), "a first epoch closed")
    idle_kb, vm_kb = proc_kb(c.proc.pid, "VmRSS"), proc_kb(c.proc.pid, "VmSize")
    bound_kb = idle_kb + (buf_mb + est_mb) * 1024
    limit = int((vm_kb + (buf_mb + est_mb + 300) * 1024) * 1024)
    import resource
    resource.prlimit(c.proc.pid, resource.RLIMIT_AS, (limit, limit))
    t0 = time.time()
    procs = [subprocess.Popen([produce, data, "--repeat", str(batches), "--insecure-plaintext", "--connect", c.ingest,
                               "--status", c.status, "--id", f"mem-{i}", "--drain-timeout", "60000"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for i in range(n_prod)]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    confirmed = sum(p.returncode == 0 and f"confirmed all {batches} batches" in o for p, o in zip(procs, outs))
    hwm_kb = proc_kb(c.proc.pid, "VmHWM")
    st = c.query()
    note(f"{n_prod} producers x {batches} batches of 256 x {d} in {time.time() - t0:.1f} s: {confirmed} confirmed; "
         f"peak RSS {hwm_kb / 1024:.0f} MB, bound {bound_kb / 1024:.0f} MB (before {idle_kb / 1024:.0f} + buffer "
         f"{buf_mb} + estimator {est_mb:.0f}), address-space limit {limit / 2**20:.0f} MB")
    for p, o in zip(procs, outs):
        if p.returncode != 0:
            note(f"producer exit {p.returncode}: {o.strip()[-300:]}")
    check(confirmed == n_prod, f"every producer's batches confirmed ({confirmed} of {n_prod})")
    check(st["rows_accepted"] == 400 + n_prod * batches * 256, f"every row taken ({st['rows_accepted']})")
    check(hwm_kb <= bound_kb, f"peak RSS {hwm_kb / 1024:.0f} MB within the stated bound {bound_kb / 1024:.0f} MB")
    check(st["rejected"].get("connections_dropped", 0) == 0 and st["rejected"]["seq_gaps"] == 0,
          f"no connection dropped, no gap: {st['rejected']}")
    check(c.stop() == 0, "clean exit: nothing lost")


def test_lost_batches_loud():
    """A connection libzmq drops with batches in flight is logged, counted, and makes the exit code 4.

    Issue 9 item 5: the collector took no notice when libzmq dropped a producer's connection (a batch it
    could not allocate, or one above --max-batch-rows) and exited 0.  Producer A sends seq 0 and 1, then a
    batch above --max-batch-rows (the connection is dropped), then seq 3 on the connection libzmq makes
    again: the collector sees A again after its connection ended, and seq 2 missing.  Producer B is
    dropped the same way and then asks for its count: once (an operator's question, not counted), then
    again and again, as a draining producer does.  The buffer holds one
    producer ((20971 - 3 x 2944) / (3 x 2944) bytes): the second to connect is let in with a warning."""
    d = 60
    c = Collector("lost", d=d, k=2, t=60, extra=["--max-batch-rows", "8", "--ingest-buffer-mb", "0.02",
                                                 "--cap-rho", "1000"]).start()
    ctx = zmq.Context()

    def batch(pid, seq, rows):
        return wire.RowBatch(version=1, producer_id=pid, seq=seq, dim=d, rows=rows,
                             data=np.full(rows * d, 0.5, "<f4").tobytes()).SerializeToString()

    def drop(sock, pid, seq, taken):
        sock.send(batch(pid, 0, 4))
        if seq:
            sock.send(batch(pid, 1, 4))
        check(wait_for(lambda: c.query()["rows_accepted"] == taken, 10), f"{pid}: first batches taken")
        before = c.query()["rejected"]["disconnects"]
        sock.send(batch(pid, seq + 1, 16))  # above 8 x 4d + 1 KiB: libzmq drops the connection with it
        check(wait_for(lambda: c.query()["rejected"]["disconnects"] > before, 10), f"{pid}: connection dropped")

    a = ctx.socket(zmq.PUSH)
    a.connect(c.ingest)
    drop(a, "lost-a", 1, 8)
    a.send(batch("lost-a", 3, 4))  # libzmq reconnects; seq 2 never arrived
    check(wait_for(lambda: c.query()["rows_accepted"] == 12, 10), "lost-a: seq 3 taken on the new connection")
    b = ctx.socket(zmq.PUSH)
    b.connect(c.ingest)
    drop(b, "lost-b", 0, 16)
    query_status(c.status, 2000, plaintext=True, producer_id="lost-b")  # once: an operator's question
    check(c.query()["rejected"].get("connections_dropped") == 1, "one question after the end is not a drain")
    # a drain asks again and again (every 20 ms) for a count that does not come
    wait_for(lambda: query_status(c.status, 2000, plaintext=True, producer_id="lost-b") and
             c.query()["rejected"].get("connections_dropped") == 2, 5, 0.05)
    st = c.query()
    check(st["rejected"].get("connections_dropped") == 2 and st["rejected"]["seq_gaps"] == 1,
          f"2 connections dropped, 1 batch missing: {st['rejected']}")
    log = c.tail(40)
    check("producer lost-a sent again after its connection ended" in log and "lost-b kept asking for its count" in log
          and "before seq 3 never arrived: LOST" in log, f"each logged: {log}")
    check("so it holds 1 producers" in log and "2 producers connected, more than the 1" in log,
          "more producers than the buffer holds: a warning")
    a.close(0)
    b.close(0)
    ctx.term()
    check(c.stop() == 4 and "batches were LOST in transit this run" in c.tail(3), f"exit code 4: {c.tail(2)}")


def fill_epochs(c, n_epochs, rng, seed_rows=None):
    rows, _ = synth(c.t * c.m * n_epochs, c.d, c.k, 10.0 * c.d, rng)
    send_rows(c, rows)


def test_crashes():
    rng = np.random.default_rng(4)
    # (a) kill -9 in the middle of an epoch: nothing was spent on it; the epoch number is reused
    c = Collector("crash-mid", d=40, k=2, t=60).start()
    fill_epochs(c, 1, rng)
    wait_for(lambda: c.query()["epoch"] == 1)
    rows, _ = synth(100, 40, 2, 400.0, rng)
    send_rows(c, rows)
    wait_for(lambda: c.query()["rows_in_epoch"] == 100)
    c.stop(signal.SIGKILL)
    total, epochs = ledger_invariants(c, "mid-epoch kill")
    check(epochs == [0] and abs(total - 1.0) < 1e-12, f"mid-epoch kill: only epoch 0 spent ({epochs})")
    c2 = Collector("crash-mid", d=40, k=2, t=60, state=c.state).start()
    st = c2.query()
    check(st["epoch"] == 1 and abs(st["rho_spent"] - 1.0) < 1e-12, "restart: epoch 1 next, rho 1 spent")
    fill_epochs(c2, 1, rng)
    check(wait_for(lambda: c2.query()["epoch"] == 2), "epoch 1 completes after restart")
    c2.stop()
    total, epochs = ledger_invariants(c2, "after restart")
    check(epochs == [0, 1] and abs(total - 2.0) < 1e-12, "no double spend")

    # (b) injected deaths at the moments around a release
    for point in ("before-commit", "after-commit", "after-store"):
        c = Collector("crash-" + point, d=40, k=2, t=60, env={"DPS_FAULT": point}).start()
        sub = c.subscriber()
        fill_epochs(c, 1, rng)
        c.proc.wait(20)
        check(c.proc.returncode == -signal.SIGKILL, f"{point}: died by the injected kill")
        got = sub.recv(500)
        check(got is None, f"{point}: nothing was published before the crash")
        sub.close()
        c.log.close()
        total, epochs = ledger_invariants(c, point)
        snaps = c.snapshots()
        if point == "before-commit":
            check(epochs == [] and not snaps, "before-commit: nothing spent, nothing stored")
        elif point == "after-commit":
            check(epochs == [0] and not snaps, "after-commit: spent, but no snapshot exists")
        else:
            check(epochs == [0] and len(snaps) == 1, "after-store: spent and stored, not yet published")
        c2 = Collector("crash-" + point, d=40, k=2, t=60, state=c.state).start()
        st = c2.query()
        want_epoch = 0 if point == "before-commit" else 1
        check(st["epoch"] == want_epoch, f"{point}: resumes at epoch {want_epoch} (got {st['epoch']})")
        check(abs(st["rho_spent"] - (0.0 if point == "before-commit" else 1.0)) < 1e-12,
              f"{point}: budget spent survives the crash")
        late = c2.subscriber()
        s = late.recv(1500)
        if point == "after-store":
            check(s is not None and s.epoch == 0, "after-store: the stored snapshot is published on restart")
        else:
            check(s is None, f"{point}: no snapshot for the lost epoch")
        fill_epochs(c2, 1, rng)
        s = late.recv(15000)
        check(s is not None and s.epoch == want_epoch and abs(s.rho_total - (want_epoch + 1.0)) < 1e-12,
              f"{point}: next epoch {want_epoch} released with total rho {want_epoch + 1}")
        late.close()
        c2.stop()
        ledger_invariants(c2, point + " restarted")

    # (c) kill -9 at random moments while three epochs stream, five times
    state = os.path.join(TMP, "crash-random-state")
    for trial in range(5):
        c = Collector("crash-random", d=40, k=2, t=60, state=state).start()
        before = sum(float(e["rho"]) for e in c.ledger() if e["kind"] == "commit")
        th = threading.Thread(target=lambda: fill_epochs(c, 3, rng))
        th.start()
        time.sleep(random.Random(trial).uniform(0.05, 0.6))
        c.stop(signal.SIGKILL)
        th.join(30)
        total, epochs = ledger_invariants(c, f"random kill {trial}")
        check(total >= before, "spent never decreases")
    c = Collector("crash-random", d=40, k=2, t=60, state=state).start()
    st = c.query()
    total, epochs = ledger_invariants(c, "random kills final")
    check(abs(st["rho_spent"] - total) < 1e-12 and st["epoch"] == (max(epochs) + 1 if epochs else 0),
          f"restart after random kills agrees with the ledger ({st['rho_spent']} vs {total})")
    note(f"random kills: {len(epochs)} epochs committed over 5 kills, total rho {total}")
    # two collectors on one state dir would double spend: refused
    p = subprocess.run(Collector("crash-random-2", d=40, k=2, t=60, state=state).args, capture_output=True,
                       text=True, timeout=20)
    check(p.returncode == 3 and "in use" in p.stderr, "a second collector on the same state dir is refused")
    c.stop()


def main():
    tests = [test_end_to_end_tcp_curve, test_bad_input_ipc, test_plaintext_rules, test_budget_cap,
             test_backpressure, test_period_and_config_file, test_weak_snapshot, test_other_mechanisms, test_crashes,
             test_ingest_memory, test_lost_batches_loud]
    for t in tests:
        t0 = time.time()
        print(f"{t.__name__}:", flush=True)
        try:
            t()
        except Exception as e:  # a crash of the harness is a failure, not a pass
            check(False, f"{t.__name__} raised {type(e).__name__}: {e}")
        note(f"({time.time() - t0:.1f} s)")
    shutil.rmtree(TMP, ignore_errors=True)
    print(f"{PASS} passed, {FAIL} failed")
    return 1 if FAIL else 0


if __name__ == "__main__":
    sys.exit(main())
