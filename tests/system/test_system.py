#!/usr/bin/env python3
"""test_system - the streaming system over real sockets (tcp on 127.0.0.1 and
ipc): end-to-end accuracy, the late joiner, every bad-input class counted, an
unauthorized producer refused, the budget cap, producers blocked (not dropped)
behind a slow collector, kill -9 and injected crashes at the moments around a
release, clean shutdown.  Runs the real dps-collector binary.

usage: test_system.py BUILD_DIR [TEST_NAME...]   (prints "N passed, N failed" last)
"""
import math
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import warnings

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
sys.path.insert(0, os.path.join(BUILD, "python"))
import numpy as np  # noqa: E402
import zmq  # noqa: E402

from dpsubspace import Producer, Subscriber, UnconfirmedBatchesError, wire  # noqa: E402
from dpsubspace.keys import apply_client_security  # noqa: E402
from dpsubspace.status import query_status  # noqa: E402

COLLECTOR = os.path.join(BUILD, "dps-collector")
with open(COLLECTOR, "rb") as f:  # built with AddressSanitizer (tools/check's second run)?
    SANITIZED = b"__asan_init" in f.read()
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
        if not {"--cap-rho", "--cap-eps", "--no-cap", "--config"} & set(extra):
            args += ["--cap-rho", "1000"]  # a collector needs a budget cap (or --no-cap)
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
    check(st["rejected"].get("credit_grants", 0) >= 3 and st["rejected"].get("credit_overruns", 1) == 0,
          f"the 3 producers took credit over CURVE, none sent beyond it: {st['rejected']}")
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


def write_key(path, public):
    """A public key file as dps-keygen writes it (0644, 'public-key = <Z85>')."""
    with open(path, "w") as f:
        f.write(f"public-key = {public.decode() if isinstance(public, bytes) else public}\n")


def test_key_rotation():
    """Keys replaced (same file name, same size), removed and added at runtime: a key that left the
    authorized directory is refused for new connections at once and for connected producers' batches
    within the collector's key refresh period (1 s); a removed subscriber key loses its connection.
    SIGHUP reloads keys and configuration and does not stop the collector."""
    keys = make_keys()
    ops_pub, ops_sec = zmq.curve_keypair()
    write_key(os.path.join(keys["authorized"], "ops.key"), ops_pub)
    subs = os.path.join(keys["dir"], "subscribers")
    os.mkdir(subs)
    sub_pub, sub_sec = zmq.curve_keypair()
    sub2_pub, sub2_sec = zmq.curve_keypair()
    write_key(os.path.join(subs, "dash.key"), sub_pub)
    write_key(os.path.join(subs, "archive.key"), sub2_pub)
    conf = os.path.join(TMP, "keys.conf")
    with open(conf, "w") as f:
        f.write("cap-rho = 5\n")
    # status queries use the operator's key, which stays authorized throughout
    curve = dict(keys, client_public=ops_pub, client_secret=ops_sec)
    c = Collector("keys", d=40, k=2, t=60, curve=curve,
                  extra=["--subscriber-keys", subs, "--config", conf]).start()

    def producer(pub, sec):
        return Producer(c.ingest, c.d, server_public_key=keys["server_public"], public_key=pub, secret_key=sec,
                        batch_rows=10, linger_ms=1000)

    def refused(pub, sec, timeout_ms=3000):
        p = producer(pub, sec)
        try:
            p.wait_ready(timeout_ms)
            return False
        except PermissionError:
            return True
        finally:
            p.close()

    def counter(name):
        return c.query()["rejected"].get(name, 0)

    rows = np.random.default_rng(21).standard_normal((500, c.d)).astype(np.float32)
    trainer = os.path.join(keys["authorized"], "client.key")  # the "trainer" of the issue
    old = producer(keys["client_public"], keys["client_secret"])
    check(old.wait_ready(5000), "the old key is accepted before the rotation")
    old.send(rows[:10])
    check(wait_for(lambda: c.query()["rows_accepted"] == 10), "its first batch is taken")

    # rotate: overwrite the file in place (same name, inode and size), and even put its mtime back
    # as `cp -p` would: the directory's mtime does not change, the file's ctime does
    new_pub, new_sec = zmq.curve_keypair()
    st0 = os.stat(trainer)
    t0 = time.time()
    write_key(trainer, new_pub)
    os.utime(trainer, ns=(st0.st_atime_ns, st0.st_mtime_ns))
    check(refused(keys["client_public"], keys["client_secret"]), "after the rotation a new connection with the old "
          "key is refused")
    note(f"rotation: old key refused for a new connection after {time.time() - t0:.2f} s")
    old.send(rows[10:20])
    ok = wait_for(lambda: counter("auth_revoked") >= 1, 3)
    note(f"rotation: the connected old producer's batch refused after {time.time() - t0:.2f} s")
    check(ok and time.time() - t0 < 3, "the connected producer's batch with the old key is refused within the "
          "refresh period")
    check(c.query()["rows_accepted"] == 10, "no rows taken from the old key after the rotation")
    old.close()
    new = producer(new_pub, new_sec)
    check(new.wait_ready(5000), "the new key in the same file is accepted")
    new.send(rows[20:30])
    check(wait_for(lambda: c.query()["rows_accepted"] == 20), "its rows are taken")
    log = c.tail(40)
    check(new_pub.decode() in log and keys["client_public"].decode() in log and "removed" in log and "added" in log,
          "the log names the key removed and the key added")

    # remove: the file goes away.  No handshake may happen meanwhile (a new connection would make the
    # handler look at once), so the periodic refresh alone must catch it: the operator asks on a
    # connection made before, and the producer sends a batch every 50 ms until one is refused.
    ctx = zmq.Context()
    ops = ctx.socket(zmq.REQ)
    apply_client_security(ops, c.status, keys["server_public"], ops_pub, ops_sec, False)
    ops.connect(c.status)

    def revoked_now():
        ops.send(wire.StatusRequest(version=wire.WIRE_VERSION).SerializeToString())
        if not ops.poll(5000):
            raise TimeoutError("no status answer")
        return {x.name: x.value for x in wire.StatusReply.FromString(ops.recv()).rejected}.get("auth_revoked", 0)

    check(revoked_now() == 1, "one refusal so far")
    t0 = time.time()
    os.remove(trainer)
    while revoked_now() < 2 and time.time() - t0 < 5:
        new.send(rows[30:40])
        time.sleep(0.05)
    took = time.time() - t0
    note(f"removal: the connected producer's batches refused {took:.2f} s after the file went (no handshake)")
    # the handler refreshes every 1 s; the rest is room for a loaded machine (ASan, other jobs)
    check(revoked_now() >= 2 and took < 2.0, f"removed key: the connected producer's batches are refused within the "
          f"refresh period, without any handshake ({took:.2f} s)")
    ops.close(0)
    ctx.term()
    accepted = c.query()["rows_accepted"]
    for _ in range(3):
        new.send(rows[:10])
    check(wait_for(lambda: counter("auth_revoked") >= 5, 3) and c.query()["rows_accepted"] == accepted,
          "removed key: every later batch is refused too")
    check(refused(new_pub, new_sec), "removed key: a new connection is refused")
    new.close()

    # add: a new file is accepted without a restart
    write_key(os.path.join(keys["authorized"], "late.key"), keys["stranger_public"])
    p = producer(keys["stranger_public"], keys["stranger_secret"])
    check(p.wait_ready(5000), "a key added at runtime is accepted")
    p.send(rows[40:50])
    check(wait_for(lambda: c.query()["rows_accepted"] == accepted + 10), "its rows are taken")
    p.close()

    # subscribers: removing dash.key cuts dash off; archive keeps receiving
    dash = Subscriber(c.publish, server_public_key=keys["server_public"], public_key=sub_pub, secret_key=sub_sec)
    archive = Subscriber(c.publish, server_public_key=keys["server_public"], public_key=sub2_pub,
                         secret_key=sub2_sec)
    time.sleep(0.5)
    os.remove(os.path.join(subs, "dash.key"))
    time.sleep(2.0)  # the refresh period, and the subscribers' reconnection
    write_key(os.path.join(keys["authorized"], "feeder.key"), keys["client_public"])
    synth_rows, _ = synth(240, c.d, c.k, 400.0, np.random.default_rng(22))
    p = producer(keys["client_public"], keys["client_secret"])
    p.send(synth_rows)
    p.flush()
    got = archive.recv(15000)
    check(got is not None and got.epoch == 0, "a subscriber whose key stays gets the snapshot")
    late = dash.recv(1500)
    check(late is None, "a subscriber whose key was removed gets nothing more")
    p.close()
    dash.close()
    archive.close()

    # SIGHUP: reload keys and configuration, keep running
    with open(conf, "w") as f:
        f.write("cap-rho = 7\nmax-batch-rows = 100\n")
    c.proc.send_signal(signal.SIGHUP)
    time.sleep(0.5)
    check(c.proc.poll() is None, f"SIGHUP does not stop the collector (exit {c.proc.returncode})")
    st = c.query()
    check(st["budget_unit"] == "rho" and abs(st["budget_left"] - (7 - st["rho_spent"])) < 1e-9,
          f"SIGHUP: the cap from the reloaded configuration applies (left {st['budget_left']} {st['budget_unit']})")
    log = c.tail(40)
    check("SIGHUP" in log and "cap" in log and "restart" in log,
          "SIGHUP logged: what changed, and what waits for a restart")
    with open(conf, "w") as f:
        f.write("cap-rho = oops\n")
    c.proc.send_signal(signal.SIGHUP)
    time.sleep(0.5)
    check(c.proc.poll() is None and c.query()["budget_left"] == st["budget_left"],
          "a broken configuration on SIGHUP is refused; the running one stays")
    check("oops" in c.tail(10), "the broken configuration is logged")
    check(c.stop() == 0, "clean exit")


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
    # a producer of the wrong dimension learns it from the collector's status before sending anything
    p = Producer(c.ingest, d + 3, plaintext=True, status_endpoint=c.status, linger_ms=5000, batch_rows=5)
    told = ""
    try:
        p.send(np.ones((5, d + 3), np.float32))
    except ValueError as e:
        told = str(e)
    p.close()
    check(f"expects rows of d = {d}" in told and "nothing was sent" in told,
          f"wrong dimension found before sending: {told!r}")
    check(p.batches_sent == 0 and c.query()["rejected"]["wrong_dim"] == 1, "... and nothing was sent")
    # past that check (as if it had asked another collector), the collector refuses the batch: the
    # drain says so instead of timing out, and close() raises with the count
    p = Producer(c.ingest, d + 3, plaintext=True, status_endpoint=c.status, linger_ms=5000)
    p._checked = True
    p.send(np.ones((5, d + 3), np.float32))
    told = False
    try:
        p.drain()
    except ValueError as e:
        told = "refused 1 of our batches" in str(e)
    check(told, "a refused batch is reported by the drain")
    unconfirmed = None
    try:
        p.close()
    except UnconfirmedBatchesError as e:
        unconfirmed = (e.unconfirmed, e.refused)
    check(unconfirmed == (1, 1), f"close() after a refusal raises: 1 batch unconfirmed, 1 refused ({unconfirmed})")
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
    # every snapshot, and every line that shows one, says what is left
    for s in (s1, s2):
        ok = s is not None and s.budget_unit == "rho" and abs(s.budget_left - 0.5) < 1e-12
        check(ok, f"snapshot says budget left 0.5 rho ({s and (s.budget_left, s.budget_unit)})")
        check(s is not None and "budget left 0.5 rho" in s.describe(), f"describe() shows it: {s and s.describe()}")
    check(c.tail().count("budget left 0.5 rho") >= 2, "the collector's snapshot lines show it")
    sub.close()
    c.stop()

    # no default: a collector starts only with a cap or an explicit --no-cap
    base = [COLLECTOR, "--d", "10", "--k", "2", "--insecure-plaintext", "--state-dir", os.path.join(TMP, "nocap0")]
    p = subprocess.run(base, capture_output=True, text=True, timeout=20)
    check(p.returncode == 2 and "--cap-rho" in p.stderr and "--no-cap" in p.stderr,
          f"no cap and no --no-cap: refused with a reason ({p.returncode}: {p.stderr.strip()})")
    p = subprocess.run(base + ["--no-cap", "--cap-eps", "3"], capture_output=True, text=True, timeout=20)
    check(p.returncode == 2 and "--no-cap" in p.stderr, f"--no-cap with a cap: refused ({p.stderr.strip()})")
    # --no-cap runs, and warns at every release
    c = Collector("nocap", d=40, k=2, t=60, extra=["--no-cap"]).start()
    sub = c.subscriber()
    rows, _ = synth(240 * 2, 40, 2, 400.0, rng)
    send_rows(c, rows)
    got = [sub.recv(10000) for _ in range(2)]
    check(all(g is not None and g.budget_unit == "none" and math.isinf(g.budget_left) for g in got),
          "--no-cap: snapshots say there is no cap")
    check(all(g is not None and "no budget cap" in g.describe() for g in got), "--no-cap: describe() says so")
    check(wait_for(lambda: c.tail().count("no privacy budget cap (--no-cap)") >= 2, 5), "--no-cap: a warning at "
          "every release")
    check(c.query()["budget_unit"] == "none", "--no-cap: status says none")
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
                f"publish = ipc://{base}.pub\nstatus = ipc://{base}.st\nseed = 3\ncap-rho = 10\n")
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
    # the config example in the repository is valid and sets a budget cap (its keys, endpoints and state
    # directory are replaced here by the harness's command line, which wins)
    example = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tools",
                           "dps-collector.conf.example")
    c = Collector("example", d=40, k=2, t=60, extra=["--config", example])
    try:
        c.start()
        st = c.query()
        with open(example) as f:
            cap = [float(ln.split("=")[1]) for ln in f if ln.replace(" ", "").startswith("cap-rho=")]
        check(len(cap) == 1 and st["budget_unit"] == "rho" and abs(st["budget_left"] - cap[0]) < 1e-12,
              f"the config example sets a cap ({st['budget_left']} {st['budget_unit']})")
    except (RuntimeError, OSError) as e:
        check(False, f"the config example starts a collector: {e}")
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
    # chi^2_18 / (eps n / 2) = 18/240 (see tests/stream/test_estimator.c): sin < 0.6 with a wide margin.
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
                          "--no-cap", "--state-dir", os.path.join(TMP, "covbig")], capture_output=True, text=True)
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
    ingest_memory_run("ingest-mem", n_prod=16, batches=8, buf_mb=500, holds=16, limit=True)


def test_ingest_memory_many():
    """24 producers at d = 1e4 with a buffer that holds 4 producers without credit: within the bound.

    Issue 9 item 5: the bound held only up to the number of producers the buffer holds (each could queue
    rcvhwm + 2 batches in libzmq); beyond that memory grew with the number of producers.  With credit
    (src/collector/credit.h) every dps-produce (it has --status) sends only the batches granted, at most
    (buffer - 3 batches) / batch for all producers together.  --ingest-buffer-mb 160 holds
    (160 MiB - 3 x 10.24 MB) / (3 x 10.24 MB) = 4 producers without credit; 24 producers send 3 batches each
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
         f"; credit grants {st['rejected'].get('credit_grants')}, waits {st['rejected'].get('credit_waits')}")
    for p, o in zip(procs, outs):
        if p.returncode != 0:
            note(f"producer exit {p.returncode}: {o.strip()[-300:]}")
    check(confirmed == n_prod, f"every producer's batches confirmed ({confirmed} of {n_prod})")
    check(st["rows_accepted"] == 400 + n_prod * batches * 256, f"every row taken ({st['rows_accepted']})")
    if SANITIZED:  # ASan's quarantine and shadow memory are not the collector's: the bound is for real builds
        note(f"sanitizer build: peak RSS {hwm_kb / 1024:.0f} MB not compared with the bound")
    else:
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
    check("so the buffer holds 1 of those" in log and "2 producers connected without credit" in log and
          "more than the 1" in log,
          "more producers than the buffer holds: a warning")
    a.close(0)
    b.close(0)
    ctx.term()
    check(c.stop() == 4 and "batches were LOST in transit this run" in c.tail(3), f"exit code 4: {c.tail(2)}")


def fill_epochs(c, n_epochs, rng, seed_rows=None, **producer_kw):
    rows, _ = synth(c.t * c.m * n_epochs, c.d, c.k, 10.0 * c.d, rng)
    send_rows(c, rows, **producer_kw)


# Producers sending to a collector that a test kills: without a confirmation close() gives up after
# linger_ms (default 30 s).  2 s leaves a live collector of d = 40 (an epoch closes in milliseconds)
# ample time to confirm, also under ASan on a loaded machine.
SHORT_LINGER = dict(linger_ms=2000)


def fill_until_killed(c, n_epochs, rng):
    """fill_epochs toward a collector that is killed meanwhile: the unconfirmed count, or 0 if all confirmed."""
    try:
        fill_epochs(c, n_epochs, rng, **SHORT_LINGER)
    except UnconfirmedBatchesError as e:
        return e.unconfirmed
    return 0


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
        # the collector dies while it takes the one batch (240 rows) that closes the epoch
        lost = fill_until_killed(c, 1, rng)
        check(lost == 1, f"{point}: the producer's close() says 1 batch was not confirmed ({lost})")
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
    unconfirmed = []
    for trial in range(5):
        c = Collector("crash-random", d=40, k=2, t=60, state=state).start()
        before = sum(float(e["rho"]) for e in c.ledger() if e["kind"] == "commit")
        th = threading.Thread(target=lambda: unconfirmed.append(fill_until_killed(c, 3, rng)))
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
    note(f"random kills: {len(epochs)} epochs committed over 5 kills, total rho {total}; batches not confirmed "
         f"by each producer: {unconfirmed}")
    check(len(unconfirmed) == 5, f"every producer's close() returned within the join ({len(unconfirmed)} of 5)")
    # two collectors on one state dir would double spend: refused
    p = subprocess.run(Collector("crash-random-2", d=40, k=2, t=60, state=state).args, capture_output=True,
                       text=True, timeout=20)
    check(p.returncode == 3 and "in use" in p.stderr, "a second collector on the same state dir is refused")
    c.stop()


def test_producer_credit():
    """The Python producer sends only the batches a collector grants, and against an old collector (a reply
    without the credit field) it sends as before.  A fake collector: a PULL socket and a REP thread that
    answers every StatusRequest with d = 8, the asked producer's batches as taken, and the grant set here."""
    ctx = zmq.Context()
    pull, rep = ctx.socket(zmq.PULL), ctx.socket(zmq.REP)
    ingest, status = f"ipc://{TMP}/credit.in", f"ipc://{TMP}/credit.st"
    pull.bind(ingest)
    rep.bind(status)
    fake = {"credit": False, "grant": 0, "taken": 0, "asked": 0, "stop": False}

    def serve():
        while not fake["stop"]:
            if rep.poll(20):
                q = wire.StatusRequest.FromString(rep.recv())
                fake["asked"] += q.credit_seq_end > 0
                r = wire.StatusReply(version=1, d=8, producer_batches=fake["taken"])
                if fake["credit"]:  # an old collector's reply leaves both fields out
                    r.credit, r.credit_seq_end = True, fake["grant"]
                rep.send(r.SerializeToString())

    def arrived(ms=300):
        n = 0
        while pull.poll(ms):
            pull.recv()
            n += 1
        return n

    th = threading.Thread(target=serve, daemon=True)
    th.start()
    fake["taken"] = 3
    with Producer(ingest, 8, batch_rows=4, plaintext=True, status_endpoint=status, linger_ms=2000) as p:
        p.send(np.ones((12, 8)))
        n = arrived()
    check(n == 3 and fake["asked"] == 0, f"old collector: 3 batches sent without asking for credit ({n}, "
                                         f"{fake['asked']} questions)")
    fake.update(credit=True, grant=2, asked=0)
    p = Producer(ingest, 8, batch_rows=4, plaintext=True, status_endpoint=status, linger_ms=2000)
    sender = threading.Thread(target=p.send, args=(np.ones((12, 8)),), daemon=True)
    sender.start()
    n = arrived(500)
    check(n == 2 and sender.is_alive() and fake["asked"] >= 2,
          f"granted 2: 2 batches sent, the third waits, asking again ({n}, {fake['asked']} questions)")
    fake["grant"] = 3
    sender.join(5)
    n = arrived()
    check(n == 1 and not sender.is_alive(), f"granted 3: the third batch sent ({n})")
    p.close()
    fake["stop"] = True
    th.join()
    pull.close(0)
    rep.close(0)
    ctx.term()


def test_producer_confirmation():
    """A producer checks the collector's d first, warns without a status endpoint, and raises from close()
    (naming the count) when the collector died before confirming its batches."""
    c = Collector("lost", d=40, k=2, t=60, extra=["--cap-rho", "100"]).start()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        Producer(c.ingest, 40, plaintext=True).close()
        n_without = sum("without status_endpoint" in str(x.message) for x in w)
        c.producer().close()
        n_with = sum("without status_endpoint" in str(x.message) for x in w) - n_without
    check(n_without == 1 and n_with == 0, f"one warning without a status endpoint, none with ({n_without}, {n_with})")
    told = ""
    p = Producer(c.ingest, 41, plaintext=True, status_endpoint=c.status, batch_rows=4)
    try:
        p.send(np.ones((4, 41)))
    except ValueError as e:
        told = str(e)
    p.close()
    check("expects rows of d = 40" in told, f"the collector's d is checked before the first batch: {told!r}")
    check(c.query()["rejected"]["wrong_dim"] == 0, "... and nothing was sent")
    rows = np.random.default_rng(6).standard_normal((512, 40)).astype(np.float32)
    # the case: whole batches sent, the collector killed before anyone asked it
    raised, t0 = None, time.time()
    try:
        with c.producer(linger_ms=1500) as p:
            p.wait_ready(5000)
            p.send(rows)  # 2 batches of 256
            c.stop(signal.SIGKILL)
    except UnconfirmedBatchesError as e:
        raised = e
    took = time.time() - t0
    check(raised is not None and raised.unconfirmed == 2 and raised.sent == 2,
          f"collector killed: close() raises, 2 of 2 batches not confirmed ({raised})")
    # linger 1.5 s, then one status query cut to ~1 ms; 2 s more is ample for the rest
    check(took < 3.5, f"... after about linger_ms ({took:.1f} s)")
    # a partial batch left when the collector is gone: close() must not block on sending it
    c2 = Collector("lost", d=40, k=2, t=60, state=c.state + "2", extra=["--cap-rho", "100"]).start()
    p = c2.producer(linger_ms=1500)
    p.wait_ready(5000)
    p.send(rows[:300])  # 1 batch of 256 sent, 44 rows buffered
    c2.stop(signal.SIGKILL)
    out = []

    def close():
        try:
            p.close()
            out.append(None)
        except UnconfirmedBatchesError as e:
            out.append(e)

    th = threading.Thread(target=close, daemon=True)
    t0 = time.time()
    th.start()
    th.join(10)
    took = time.time() - t0
    e = out[0] if out else None
    check(e is not None and e.unconfirmed == 2, f"partial batch to a dead collector: close() raised in {took:.1f} s, "
          f"2 batches not confirmed ({e if out else 'still blocked after 10 s'})")


def test_subscriber_from_epoch():
    """A subscriber from epoch E skips older snapshots, the collector's welcome message included."""
    rng = np.random.default_rng(8)
    c = Collector("from-epoch", d=40, k=2, t=60, extra=["--cap-rho", "100"]).start()
    fill_epochs(c, 1, rng)
    check(wait_for(lambda: c.query()["epoch"] == 1), "epoch 0 closed")
    old = c.subscriber()
    s = old.recv(5000)
    check(s is not None and s.epoch == 0, "a plain subscriber gets the latest (epoch 0) as its welcome")
    start = c.query()["epoch"]
    new = Subscriber(c.publish, from_epoch=start, **c.sec())
    s = new.recv(1500)
    check(s is None and new.latest is None, f"from epoch {start}: the welcome (epoch 0) is skipped ({s})")
    fill_epochs(c, 1, rng)
    s = new.recv(10000)
    check(s is not None and s.epoch == 1 and new.latest is s and new.missed == 0,
          f"from epoch {start}: epoch 1 received ({s and s.epoch}), nothing counted as missed")
    old.close()
    new.close()
    c.stop()


def test_train_loop_example():
    """python/examples/train_loop.py reports the collector's total and its own share, and a second job does
    not start from the first job's basis."""
    c = Collector("train", d=200, k=4, t=60, m=8, extra=["--cap-rho", "1000"]).start()
    example = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python", "examples",
                           "train_loop.py")
    env = dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python"))

    def run(*extra):
        p = subprocess.run([sys.executable, example, "--plaintext", "--synthetic", "--steps", "20", "--ingest",
                            c.ingest, "--publish", c.publish, "--status", c.status] + list(extra),
                           capture_output=True, text=True, env=env, timeout=300)
        out = p.stdout

        def num(pattern):
            m = re.search(pattern, out)
            return float(m.group(1)) if m else None
        return dict(rc=p.returncode, out=out, err=p.stderr, start_epoch=num(r"at the start: epoch (\d+) open"),
                    first=num(r"before the first basis \(epoch (\d+)\)"),
                    total=num(r"the collector's ledger total: rho ([0-9.e+-]+)"),
                    share=num(r"this run's share: rho ([0-9.e+-]+)"))

    spent = []
    for job in range(2):
        r = run()
        check(r["rc"] == 0, f"job {job}: exit 0 ({r['err'].strip()[-300:]})")
        ledger_total, _ = ledger_invariants(c, f"train job {job}")
        st = c.query()
        check(r["total"] is not None and abs(r["total"] - ledger_total) < 1e-9 and
              abs(st["rho_spent"] - ledger_total) < 1e-9,
              f"job {job}: prints the collector's total, rho {r['total']} = ledger {ledger_total}")
        want_share = ledger_total - (spent[-1] if spent else 0.0)
        check(r["share"] is not None and abs(r["share"] - want_share) < 1e-9,
              f"job {job}: prints its own share, rho {r['share']} (want {want_share})")
        check(r["first"] is not None and r["start_epoch"] is not None and r["first"] >= r["start_epoch"],
              f"job {job}: first basis of epoch {r['first']}, not before its start (epoch {r['start_epoch']})")
        check("WARNING" not in r["err"], f"job {job}: no warning about an old basis")
        spent.append(ledger_total)
        note(f"train job {job}: collector total rho {r['total']}, its share rho {r['share']}, "
             f"first basis epoch {r['first']} (started at epoch {r['start_epoch']})")
    # asking for any basis, a third job gets the second's last one first: it is told so
    r = run("--from-epoch", "0")
    check(r["rc"] == 0 and "predates this run" in r["err"], f"--from-epoch 0: warned that the first basis "
          f"(epoch {r['first']}) predates the run (epoch {r['start_epoch']}): {r['err'].strip()[-200:]}")
    c.stop()


def main():
    tests = [test_end_to_end_tcp_curve, test_key_rotation, test_bad_input_ipc, test_plaintext_rules, test_budget_cap,
             test_backpressure, test_period_and_config_file, test_weak_snapshot, test_other_mechanisms, test_crashes]
    tests += [test_producer_credit, test_producer_confirmation, test_subscriber_from_epoch, test_train_loop_example]
    tests += [test_ingest_memory, test_ingest_memory_many, test_lost_batches_loud]
    only = sys.argv[2:]  # test names, to run a few while working on them
    for t in tests:
        if only and t.__name__ not in only:
            continue
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
