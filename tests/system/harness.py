#!/usr/bin/env python3
"""harness - what the system tests share: the real dps-collector started and stopped (Collector), a scripted
collector speaking its side of the producer protocol (ScriptedCollector), data,
waiting, keys, the ledger's invariants, and the runner.  Each tests/system/test_*.py is one ctest entry
(so that ctest -j runs them side by side); each prints "N passed, N failed" last.

usage: test_GROUP.py BUILD_DIR [TEST_NAME...]
"""
# Modules the test files use too (they take the harness with "from harness import *").
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


def build_is_sanitized():
    """1 for an ASan build (DPS_SANITIZE): its library cannot be loaded into Debian's python3 (the ASan
    runtime must come first), so tests that load it in process skip there."""
    try:
        with open(os.path.join(BUILD, "CMakeCache.txt")) as f:
            return "DPS_SANITIZE:BOOL=ON" in f.read()
    except OSError:
        return False

sys.path.insert(0, os.path.join(BUILD, "python"))
import numpy as np  # noqa: E402
import zmq  # noqa: E402

from dpsubspace import Producer, Subscriber, UnconfirmedBatchesError, wire  # noqa: E402
from dpsubspace.keys import apply_client_security  # noqa: E402
from dpsubspace.status import query_status  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from pycheck import check, summary  # noqa: E402,F401  (check: the test files take it from here)

COLLECTOR = os.path.join(BUILD, "dps-collector")
with open(COLLECTOR, "rb") as f:  # built with AddressSanitizer (tools/check's second run)?
    SANITIZED = b"__asan_init" in f.read()
TMP = tempfile.mkdtemp(prefix="dps-system-")


def note(msg):
    print("  " + msg, flush=True)


def free_port():
    """A free TCP port on loopback below the kernel's ephemeral range (10000-19999): a port the kernel hands
    out (bind to 0) may be taken, between this check and the collector's bind, as the local end of any
    process's outgoing connection (a test running beside this one); one below the range never is.  (The
    MPI test's ports are 20000-32123.)"""
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randrange(10000, 20000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 10000-19999 on 127.0.0.1")


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
                 state=None, binary=COLLECTOR):
        self.name, self.d, self.k, self.t, self.m = name, d, k, t, m or 2 * k
        self.state = state or os.path.join(TMP, name + "-state")
        if transport == "ipc":
            base = os.path.join(TMP, name)
            self.ingest, self.publish, self.status = (f"ipc://{base}.in", f"ipc://{base}.pub", f"ipc://{base}.st")
        else:
            self.ingest, self.publish, self.status = (f"tcp://127.0.0.1:{free_port()}" for _ in range(3))
        self.curve = curve
        args = [binary, "--d", str(d), "--k", str(k), "--t", str(t), "--m", str(self.m), "--state-dir",
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
        total += float(e["rho_epoch"])
        ok &= abs(float(e["rho_total"]) - total) < 1e-9
    check(ok, f"{label}: ledger totals add up")
    for s in c.snapshots():
        if s.rho_epoch > 0:
            check(s.epoch in epochs, f"{label}: snapshot of epoch {s.epoch} has no ledger commit")
            check(s.rho_total <= total + 1e-12, f"{label}: snapshot total {s.rho_total} above ledger {total}")
    return total, epochs


def proc_kb(pid, field):
    """A /proc/<pid>/status figure in kB (VmRSS, VmHWM, VmSize)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


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
        # the producer asks the status endpoint before its first batch: a collector being restarted under
        # ASan on a loaded machine took over 10 s (the default) to answer once; wait for it as a producer would
        fill_epochs(c, n_epochs, rng, status_timeout_ms=60000, **SHORT_LINGER)
    except UnconfirmedBatchesError as e:
        return e.unconfirmed
    return 0


def write_key(path, public):
    """A public key file as dps-keygen writes it (0644, 'public-key = <Z85>')."""
    with open(path, "w") as f:
        f.write(f"public-key = {public.decode() if isinstance(public, bytes) else public}\n")


class ScriptedCollector:
    """The collector's side of the protocol, scripted: batches arriving on `ingest` (PULL) are recorded as
    (seq, rows, stream, the credit granted when it arrived, its values); questions on `status` (REP) are
    recorded and answered with d, the batch limit, credit (cumulative: at most `ahead` sequence numbers past
    those taken; None: all asked) and, once `confirm_after` seconds have passed (None: never), the count of
    batches taken."""

    def __init__(self, name, d, limit=1000, ahead=None, confirm_after=0.0, status=True):
        self.d, self.limit, self.ahead, self.confirm_after = d, limit, ahead, confirm_after
        self.ingest, self.status = f"ipc://{TMP}/{name}.in", (f"ipc://{TMP}/{name}.st" if status else None)
        self.ctx = zmq.Context()
        self.pull = self.ctx.socket(zmq.PULL)
        self.pull.bind(self.ingest)
        self.rep = None
        if status:
            self.rep = self.ctx.socket(zmq.REP)
            self.rep.bind(self.status)
        self.batches, self.questions, self.granted, self.t0, self.stop = [], [], 0, time.time(), False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stop:
            if self.pull.poll(2):
                m = wire.RowBatch.FromString(self.pull.recv())
                vals = np.frombuffer(m.data, dtype="<f4").reshape(m.rows, -1) if m.rows else None
                self.batches.append(dict(seq=m.seq, rows=m.rows, stream=m.stream, granted=self.granted, vals=vals))
            if self.rep is not None and self.rep.poll(2):
                q = wire.StatusRequest.FromString(self.rep.recv())
                self.questions.append(dict(run=q.run, credit_from=q.credit_from, credit_seq_end=q.credit_seq_end,
                                           producer_id=q.producer_id))
                if q.credit_seq_end:
                    cap = q.credit_seq_end if self.ahead is None else len(self.batches) + self.ahead
                    self.granted = max(self.granted, min(q.credit_seq_end, cap))
                confirmed = self.confirm_after is not None and time.time() - self.t0 >= self.confirm_after
                r = wire.StatusReply(version=1, d=self.d, credit=True, credit_seq_end=self.granted,
                                     max_batch_rows=self.limit,
                                     producer_batches=len(self.batches) if confirmed else 0,
                                     producer_rows=sum(b["rows"] for b in self.batches) if confirmed else 0)
                self.rep.send(r.SerializeToString())

    def close(self):
        self.stop = True
        self.thread.join()
        for s in (self.pull, self.rep):
            if s is not None:
                s.close(0)
        self.ctx.term()


def run(tests):
    """Run the test functions (or those named on the command line after BUILD_DIR); the exit code."""
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
    return summary()
