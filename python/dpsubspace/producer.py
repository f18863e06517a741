"""Stream rows to a dps-collector (ZeroMQ PUSH, RowBatch messages): the
Python twin of the C producer (src/net/producer.c), the same rules.

    with Producer("tcp://127.0.0.1:7780", dim=784, plaintext=True,
                  status_endpoint="tcp://127.0.0.1:7782") as p:
        p.send(per_example_gradients)      # numpy (n, dim) or a torch tensor

Sends block while the collector is behind (its queue and ours are full).
Give status_endpoint: the producer then checks the collector's d before its
first batch, and close() waits (up to linger_ms) until the collector confirms
it has taken every batch, raising UnconfirmedBatchesError if it did not (the
collector died, is overloaded, or refused batches).  libzmq discards messages
still queued toward a PULL socket when their sender disconnects, so without a
status endpoint rows sent just before close() can be lost and nobody can
know: the producer warns once when it is made without one.  A refused key
raises PermissionError.

Run: each producer draws a random nonzero 64-bit run number once, at
construction, and sends it with every batch (RowBatch.stream) and every
status question (StatusRequest.run); the collector counts seqs, credit and
batches taken per (producer_id, run) and refuses a seq of the run that it
has already passed (a replay).  A shard part's run is its shard stream, so
the parts of a ShardedProducer share one.

Credit (with a status endpoint; src/collector/credit.h): the producer sends a
batch only once the collector has granted its sequence number, asking for
1, 2, 4, ... up to CREDIT_AHEAD batches at a time, again without waiting for
the reply when half of them are left, and, while it has none, again after
2 ms doubling to 50 ms.  The collector shares its ingest buffer between the
producers that ask, so many producers slow down instead of growing its
memory.  A collector that grants no credit (an old one: its reply says
credit = false) leaves it sending as before.

Batch limit: the collector's status reply names the most rows a batch may
hold (max_batch_rows: libzmq drops a larger message together with its
connection).  The producer learns it from the answer it asks for before its
first batch and from every reply after, and sends a larger batch in pieces
of that limit, each piece its own seq and credit -- except a shard part,
whose seqs must be the same on every rank.

A dead collector: once the collector has been heard (any status reply;
without a status endpoint, a handshake on the ingest connection), every
wait for it -- credit, a blocked send, the drain -- raises
CollectorGoneError (an UnconfirmedBatchesError naming the endpoint, the
timeout and how many batches were not confirmed) when it has been silent for
collector_timeout_ms (COLLECTOR_TIMEOUT_MS = 15 000 ms by default; 0: wait
for ever), counted from its last word or from the start of the wait,
whichever is later.  With a status endpoint silent means no reply to our
questions (one at least every PING_S = 1 s while a send is blocked, asked
again when unanswered that long; the collector answers them while its
ingest waits for a release); without one, the connection down.  A collector
never heard is waited for as before (status_timeout_ms, wait_ready).
close() after that raises it again at once.

A revoked key: a status reply saying the collector refused the question
because our key left its authorized keys (refused = "key_revoked") raises
PermissionError at once; nothing more is sent.

Without a status endpoint, a collector that ended our connection while we
sent (a batch above its --max-batch-rows, or a restart) makes close() raise
UnconfirmedBatchesError: the batches in flight on that connection were lost.

After a confirmed drain, a collector whose budget cap is spent (budget_unit
not "none", budget_left <= 0) gets a UserWarning: it took the rows but will
release no further snapshot from them.
"""
import os
import time
import warnings

import numpy as np
import zmq

from . import wire
from .keys import apply_client_security

CREDIT_AHEAD = 64  # batches asked for at a time, at most (the collector grants at most a fair share)
# The default collector_timeout_ms: the same figure as the C producer's DPS_PRODUCER_COLLECTOR_TIMEOUT_MS
# (include/dpsubspace_net.h), which this package does not link; tests/system/test_producer_faults.py checks
# that the two agree.
COLLECTOR_TIMEOUT_MS = 15000
PING_S = 1.0  # while a send is blocked: a status question at least this often; one unanswered this long is asked again


class UnconfirmedBatchesError(RuntimeError):
    """close() could not confirm that the collector took every batch.

    unconfirmed: batches not confirmed taken (refused, unanswered, or a last
    partial batch that could not be sent); sent: batches sent; refused: batches
    the collector refused (wrong dimension or too large: whole; no memory to
    take them all: the rest of their rows dropped)."""

    def __init__(self, message, unconfirmed, sent, refused=0):
        super().__init__(message)
        self.unconfirmed, self.sent, self.refused = unconfirmed, sent, refused


class CollectorGoneError(UnconfirmedBatchesError):
    """The collector, heard before, was silent for collector_timeout_ms while the producer waited for it
    (killed, crashed, unreachable): raised by send, flush, drain and close.  unconfirmed: batches sent and not
    confirmed taken (all of them without a status endpoint) plus the batches the rows not sent make; sent:
    batches sent plus those; endpoint: the endpoint that went silent (the status endpoint, or without one the
    ingest endpoint); timeout_ms: collector_timeout_ms."""

    def __init__(self, message, unconfirmed, sent, endpoint, timeout_ms):
        super().__init__(message, unconfirmed, sent)
        self.endpoint, self.timeout_ms = endpoint, timeout_ms


def _as_rows(x, dim):
    """A C-contiguous little-endian float32 (n, dim) array from numpy or torch."""
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # a torch tensor, without importing torch
        x = x.detach().cpu().numpy()
    a = np.asarray(x)
    if a.ndim == 1:
        a = a.reshape(1, -1)
    if a.ndim != 2 or a.shape[1] != dim:
        raise ValueError(f"rows must have shape (n, {dim}); got {a.shape}")
    return np.ascontiguousarray(a, dtype="<f4")


def _ceil_div(a, b):
    return -(-a // b)


class Producer:
    """A connection to a collector's ingest endpoint that sends rows in batches of batch_rows.

    status_endpoint (the collector's --status) is what makes delivery known: the
    collector's d is checked before the first batch (ValueError on a mismatch,
    TimeoutError if it does not answer within status_timeout_ms; nothing is sent
    either way), and close() waits up to linger_ms for the collector to confirm
    every batch, raising UnconfirmedBatchesError (with the count) if it does not.
    That first answer also names the collector's batch limit (max_batch_rows):
    a batch of more rows is sent in pieces of the limit.  Without it the producer
    cannot know whether its rows arrived: close() only lingers up to linger_ms, and
    a UserWarning says so once, at construction; close() raises
    UnconfirmedBatchesError when the collector ended our connection meanwhile
    (disconnects counts it: a batch above its limit, or a restart).

    collector_timeout_ms (default COLLECTOR_TIMEOUT_MS = 15 000; 0: no limit): once the collector has been
    heard, send, flush, drain and close raise CollectorGoneError when it has been silent that long during a
    wait (see the module's docstring).  A status reply saying our key was revoked raises PermissionError.

    run: this producer's random nonzero 64-bit run, sent with every batch and status question (a shard
    part's: its shard stream).  Rows not sent when a send raises stay queued (counted as unconfirmed).

    shard=(r, R, full_dim, stream): this producer holds only shard r of rows of full_dim coordinates, for a
    collector sharded over R ranks (dps-collector --sharded) -- an FSDP/ZeRO training rank's own
    parameters' gradients.  dim must be shard_slice(full_dim, R, r)'s width; the rows go to
    shard_endpoint(endpoint, r).  The R producers of one stream of rows share producer_id and stream (a
    nonzero random 64-bit number drawn once, e.g. by the job's rank 0, and broadcast: their run) and
    batch_rows, send the same rows in the same order, and only shard 0's gives status_endpoint (rank 0
    confirms a batch once every rank took its slice).  A part's batches are not cut to the collector's limit
    (their seqs must match across ranks).  To split whole rows, use ShardedProducer.
    """

    def __init__(self, endpoint, dim, batch_rows=256, producer_id=None, server_public_key=None,
                 public_key=None, secret_key=None, plaintext=False, sndhwm=64, linger_ms=30000,
                 status_endpoint=None, status_timeout_ms=10000, shard=None,
                 collector_timeout_ms=COLLECTOR_TIMEOUT_MS):
        if producer_id is None:  # unique: the collector's per-producer counts are ours alone
            producer_id = f"python-{os.getpid()}-{os.urandom(4).hex()}"
        self._sec = dict(server_public_key=server_public_key, public_key=public_key, secret_key=secret_key,
                         plaintext=plaintext)
        self.status_endpoint, self.linger_ms, self.batches_sent = status_endpoint, linger_ms, 0
        self.status_timeout_ms = status_timeout_ms
        if collector_timeout_ms < 0:
            raise ValueError("collector_timeout_ms must be >= 0 (0: wait for the collector without limit)")
        self.collector_timeout_ms = collector_timeout_ms
        self.batches_taken = self.batches_refused = 0  # the collector's last answer about our batches
        self._drained_at = None  # batches_sent when the last drain ended, and whether it confirmed all
        self._drain_ok = False
        self._checked = not status_endpoint  # the collector's d: checked before the first batch
        self._bad_collector = None  # the mismatch found: nothing is ever sent
        self._credit = None  # None: not known yet; True: the collector grants credit; False: send without
        self._credit_end = self._ahead = 0  # we may send every seq below _credit_end; batches asked next
        self._creq = None  # REQ socket to the status endpoint, kept for credit questions
        self._asking, self._asked_at = False, 0.0  # a question out on _creq (its reply not read), asked when
        self.max_batch_rows = 0  # the collector's batch limit, from its status replies (0: not known)
        self._heard = None  # when the collector last answered a status question (monotonic; None: never)
        self._revoked = ""  # a reply's refusal ("key_revoked"): our key left the collector's authorized keys
        self._told_revoked = False  # the PermissionError for it was raised
        self._gone = None  # how a CollectorGoneError found it (True: questions unanswered): no more waiting
        self._warned_spent = False
        # shard: (r, R, full_dim, stream) when this producer holds only shard r of rows of full_dim
        # coordinates (an FSDP/ZeRO rank's own gradients, or a ShardedProducer's part): dim is that shard's
        # width (shard_slice), sent to shard_endpoint(endpoint, r); the R producers of one stream share
        # producer_id, stream (nonzero) and batch_rows, send the same rows in the same order, and only shard
        # 0's gives status_endpoint.  None: whole rows.
        self._shard = shard
        if shard is not None:
            r, nr, full, stream = shard
            if not (1 < nr <= full and 0 <= r < nr and stream and producer_id is not None
                    and dim == shard_slice(full, nr, r)[1] - shard_slice(full, nr, r)[0]):
                raise ValueError(f"shard {shard}: needs 0 <= r < R, 1 < R <= full_dim, a nonzero stream, a "
                                 f"producer_id shared by the R producers, and dim = shard r's width")
            endpoint = shard_endpoint(endpoint, r)
        if shard is not None and status_endpoint is None:
            self._checked = True  # a part after the first: rank 0 (the first part's) answers for all
        # the run: nonzero (0 tells the collector "no run named")
        self.run = shard[3] if shard is not None else int.from_bytes(os.urandom(8), "little") | 1
        if dim <= 0 or batch_rows <= 0:
            raise ValueError("dim and batch_rows must be positive")
        if len(producer_id.encode()) > 64:
            raise ValueError("producer_id is at most 64 bytes")
        self.dim, self.batch_rows, self.producer_id = dim, batch_rows, producer_id
        self.seq = self.rows_sent = 0
        self._pending = np.empty((0, dim), dtype="<f4")  # rows not sent yet (any number)
        self._sock = None
        self._ctx = zmq.Context()
        self._sock = self._ctx.socket(zmq.PUSH)
        try:
            apply_client_security(self._sock, endpoint, server_public_key, public_key, secret_key, plaintext)
        except Exception:
            self._sock.close(0)
            self._ctx.term()
            self._sock = None
            raise
        self._sock.setsockopt(zmq.IMMEDIATE, 1)
        self._sock.setsockopt(zmq.SNDHWM, sndhwm)
        self._sock.setsockopt(zmq.SNDTIMEO, 200)
        self._sock.setsockopt(zmq.LINGER, linger_ms)
        self._mon = self._sock.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_HANDSHAKE_FAILED_AUTH |
                                                  zmq.EVENT_DISCONNECTED)
        self._ready = self._refused = False
        self._up, self._down_at = False, None  # the ingest connection: up after a handshake, down since when
        self.disconnects = 0  # times the collector ended our connection after a handshake
        self.endpoint = endpoint  # the endpoint connected to (a shard's: its rank's)
        self._sock.connect(endpoint)
        if not status_endpoint and shard is None:
            warnings.warn(f"Producer to {endpoint} without status_endpoint: nobody can confirm that the collector "
                          "took the rows (rows still queued when the producer closes can be lost unnoticed); "
                          "give the collector's status endpoint", UserWarning, stacklevel=2)

    def _events(self, timeout_ms=0):
        """Read the ingest socket's monitor: a handshake (the connection up), our key refused, the connection
        ended after a handshake (down from then on; counted in disconnects)."""
        from zmq.utils.monitor import recv_monitor_message
        while self._mon.poll(timeout_ms):
            ev = recv_monitor_message(self._mon)["event"]
            if ev == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                self._ready = self._up = True
            elif ev == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
                self._refused = True
            elif ev == zmq.EVENT_DISCONNECTED and self._up:
                self._up, self._down_at = False, time.monotonic()
                self.disconnects += 1
            timeout_ms = 0

    def _key_refused(self):
        """PermissionError if the collector refused our key at the handshake (and no handshake succeeded)."""
        if self._refused and not self._ready:
            raise PermissionError("the collector refused our CURVE key (not in its authorized keys)")

    def wait_ready(self, timeout_ms=5000):
        """True once the handshake succeeded; PermissionError if our key was refused."""
        end = time.monotonic() + timeout_ms / 1000
        while not self._ready:
            self._events(50)
            self._key_refused()
            if time.monotonic() > end:
                return False
        return True

    def _heard_from(self, refused, max_batch_rows):
        """What any status reply tells: the collector is there, its batch limit (a shard part keeps its batches
        whole: their seqs must match across ranks), or that it refused our key."""
        self._heard = time.monotonic()
        if refused:
            self._revoked = refused
        elif max_batch_rows and self._shard is None:
            self.max_batch_rows = max_batch_rows

    def _revoked_error(self):
        self._told_revoked = True
        return PermissionError(f"the collector at {self.status_endpoint} refused our question ({self._revoked}): "
                               "our key was revoked (it left the collector's authorized keys); nothing more is sent")

    def _pending_batches(self):
        """The batches the rows not sent yet would make (batches of batch_rows, cut to the collector's limit)."""
        full, rest = divmod(self._pending.shape[0], self.batch_rows)
        piece = min(self.batch_rows, self.max_batch_rows or self.batch_rows)
        return full * _ceil_div(self.batch_rows, piece) + _ceil_div(rest, piece)

    def _gone_error(self, by_questions):
        """The CollectorGoneError for a collector silent for collector_timeout_ms (by_questions: unanswered
        status questions; else the ingest connection down), with the counts as they are now."""
        self._gone = by_questions
        endpoint = self.status_endpoint if by_questions else self.endpoint
        taken = self.batches_taken if self.status_endpoint else 0  # without one nobody confirmed anything
        pending = self._pending_batches()
        n, sent = max(0, self.batches_sent - taken) + pending, self.batches_sent + pending
        how = "no answer to our status questions" if by_questions else "our connection to it down"
        unsent = f", {pending} not sent" if pending else ""
        return CollectorGoneError(
            f"the collector at {endpoint} went silent for collector_timeout_ms = {self.collector_timeout_ms} ms "
            f"({how}): killed, crashed or unreachable; {n} of our {sent} batches not confirmed taken ({taken} "
            f"confirmed{unsent}), and those rows may be lost", n, sent, endpoint, self.collector_timeout_ms)

    def _check_alive(self, since, by_questions=None):
        """In a wait that began at since (monotonic): PermissionError once a reply said our key was revoked;
        CollectorGoneError once the collector, heard before, has been silent for collector_timeout_ms, counted
        from its last word or since, whichever is later.  by_questions (default: a collector that answers
        our credit questions): silent = no status reply; else the ingest connection down."""
        if self._revoked:
            raise self._revoked_error()
        if not self.collector_timeout_ms:
            return
        if by_questions is None:
            by_questions = bool(self.status_endpoint and self._credit)
        if by_questions:
            last = self._heard
        else:
            self._events(0)
            last = None if self._up else self._down_at
        if last is not None and time.monotonic() - max(last, since) >= self.collector_timeout_ms / 1000:
            raise self._gone_error(by_questions)

    def _check_collector(self):
        """Before the first batch: the collector's d must be ours (ValueError; nothing is sent); learns its
        batch limit and whether it grants credit."""
        from .status import query_status
        try:
            st = query_status(self.status_endpoint, self.status_timeout_ms, producer_id=self.producer_id,
                              run=self.run, **self._sec)
        except TimeoutError:
            raise TimeoutError(f"no answer from the collector's status endpoint {self.status_endpoint} in "
                               f"{self.status_timeout_ms} ms: is it running there, with the same security? "
                               "Nothing was sent") from None
        self._heard_from(st["refused"], st["max_batch_rows"])
        if self._revoked:
            raise self._revoked_error()
        self._credit = bool(st.get("credit", False))  # an old collector's reply has no credit field
        d = self._shard[2] if self._shard is not None else self.dim  # a part: the whole rows' dimension
        if st["d"] != d:
            self._bad_collector = (f"the collector at {self.status_endpoint} expects rows of d = {st['d']} but this "
                                   f"producer was made with dim = {d}; nothing was sent")
            raise ValueError(self._bad_collector)
        ranks, ours = max(1, st.get("shards", 0)), self._shard[1] if self._shard is not None else 1
        if ranks != ours:  # whole rows to a sharded collector, or slices for another number of ranks
            self._bad_collector = (
                f"the collector at {self.status_endpoint} is sharded over {ranks} MPI ranks: use "
                f"ShardedProducer(..., shards={ranks}) (or shard=(r, {ranks}, d, stream)); nothing was sent"
                if ranks > 1 else
                f"the collector at {self.status_endpoint} is one process, not sharded: use Producer without "
                f"shards; nothing was sent")
            raise ValueError(self._bad_collector)
        self._checked = True

    def _ask(self, want_end):
        """A question on the kept status socket: credit for every seq below want_end (0: none, a question that
        only hears the collector answer).  Its reply is read by _read_reply."""
        if self._creq is None:
            self._creq = self._ctx.socket(zmq.REQ)
            apply_client_security(self._creq, self.status_endpoint, **self._sec)
            self._creq.setsockopt(zmq.REQ_RELAXED, 1)  # an unanswered question does not block the next
            self._creq.setsockopt(zmq.REQ_CORRELATE, 1)  # and its late reply is dropped
            self._creq.setsockopt(zmq.LINGER, 0)
            self._creq.connect(self.status_endpoint)
        self._creq.send(wire.StatusRequest(version=wire.WIRE_VERSION, producer_id=self.producer_id, run=self.run,
                                           credit_from=self.seq, credit_seq_end=want_end).SerializeToString())
        self._asking, self._asked_at = True, time.monotonic()

    def _ask_credit(self):
        """Ask for credit up to seq + ahead, ahead doubling from 1 up to CREDIT_AHEAD at each question (a
        producer with a few batches to send does not hold credit it will not use)."""
        self._ahead = min(CREDIT_AHEAD, 2 * self._ahead) if self._ahead else 1
        self._ask(self.seq + self._ahead)

    def _read_reply(self, timeout_ms):
        """The reply to the question out, if it comes within timeout_ms (else None), and what it tells: the
        collector heard, its limit, its grant (or credit off: an old collector), our batches taken."""
        if not self._asking:
            return None
        end = time.monotonic() + timeout_ms / 1000
        while True:
            if not self._creq.poll(max(0, int((end - time.monotonic()) * 1000))):
                return None
            # without waiting: the poll also wakes for a late reply to a question asked again since, which
            # REQ_CORRELATE drops inside recv; a blocking recv would then wait for ever on a collector gone
            try:
                data = self._creq.recv(zmq.NOBLOCK)
                break
            except zmq.Again:
                pass
        m = wire.StatusReply.FromString(data)
        self._asking = False
        self._heard_from(m.refused, m.max_batch_rows)
        if m.refused:  # nothing else in it
            return m
        self.batches_taken, self.batches_refused = m.producer_batches, m.producer_refused
        if not m.credit:
            self._credit = False
        else:
            self._credit = True
            self._credit_end = max(self._credit_end, m.credit_seq_end)
        return m

    def _await_credit(self, deadline):
        """Wait until the collector grants self.seq (at once without credit): True, or False if deadline (a
        monotonic time, or None) passed first."""
        if not self.status_endpoint or self._credit is False:
            return True
        self._read_reply(0)
        if self._revoked:
            raise self._revoked_error()
        if self.seq < self._credit_end:
            if self._credit and not self._asking and self._credit_end - self.seq <= self._ahead // 2:
                self._ask_credit()  # half of the last grant left: ask on, the reply read at a later batch
            return True
        start, backoff = time.monotonic(), 0.002
        while True:
            self._check_alive(start)
            now = time.monotonic()
            if not self._asking or now - self._asked_at >= PING_S:  # unanswered that long: asked again
                self._ask_credit()
            wait = PING_S if deadline is None else max(0.0, min(PING_S, deadline - now))
            m = self._read_reply(int(min(wait, 0.2) * 1000) + 1)  # slices: the silence is checked between them
            if self._revoked:
                raise self._revoked_error()
            if self._credit is False or self.seq < self._credit_end:
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False
            if m is not None:  # no credit yet: ask again soon
                time.sleep(backoff)
                backoff = min(0.05, 2 * backoff)

    def _ping(self):
        """While a send is blocked: read a reply that came, and ask a question that takes no credit when none
        was asked for PING_S (one unanswered that long is asked again: a collector restarted meanwhile never
        answers it), so that a collector that is gone is noticed."""
        if self._creq is None or not self._credit:
            return
        self._read_reply(0)
        if time.monotonic() - self._asked_at >= PING_S:
            self._ask(0)

    def _send_piece(self, rows, deadline):
        """Send one message of rows (within the collector's limit; its seq granted), blocking while the
        collector is behind: True when sent; False if deadline (monotonic, or None) passed first."""
        m = wire.RowBatch(version=wire.WIRE_VERSION, producer_id=self.producer_id, seq=self.seq,
                          dim=self.dim, rows=rows.shape[0], data=rows.tobytes(), stream=self.run)
        if self._shard is not None:
            m.shard, m.shards, m.full_dim = self._shard[:3]
        data = m.SerializeToString()
        start = time.monotonic()
        while True:
            try:
                self._sock.send(data)
                break
            except zmq.Again:  # the collector is behind (a slice of SNDTIMEO, 200 ms): is it still there?
                self._events(0)
                self._key_refused()
                self._ping()
                self._check_alive(start)
                if deadline is not None and time.monotonic() > deadline:
                    return False
        self.seq += 1
        self.batches_sent += 1
        self.rows_sent += rows.shape[0]
        return True

    def _push(self, whole, deadline=None, given=None):
        """Send the pending rows in batches of batch_rows, each in pieces of the collector's limit (a piece:
        its own seq and credit); with whole, the last partial batch too.  Rows not sent stay pending, also
        when it raises (copied, so that they hold neither the caller's array `given` nor a large one they
        were cut from).  False if deadline (monotonic, or None) passed first."""
        if self._bad_collector:
            raise ValueError(self._bad_collector)
        try:
            if not self._checked and self._pending.shape[0]:
                self._check_collector()
            while self._pending.shape[0] >= self.batch_rows or (whole and self._pending.shape[0]):
                left = min(self.batch_rows, self._pending.shape[0])
                while left:
                    if not self._await_credit(deadline):  # a credit reply may name the limit
                        return False
                    n = min(left, self.max_batch_rows or left)
                    if not self._send_piece(self._pending[:n], deadline):
                        return False
                    self._pending = self._pending[n:]
                    left -= n
            return True
        finally:
            if self._pending.base is not None or (given is not None and np.may_share_memory(self._pending, given)):
                self._pending = self._pending.copy()

    def send(self, rows):
        """Queue rows (numpy or torch, shape (n, dim) or (dim,)) and send full batches."""
        a = _as_rows(rows, self.dim)
        self._pending = np.concatenate([self._pending, a]) if self._pending.shape[0] else a
        self._push(False, given=a)

    def flush(self):
        """Send the rows queued, the last partial batch too."""
        self._push(True)

    def _drain(self, deadline):
        """Ask the status endpoint until the collector answered for every batch, or until deadline:
        True when it did (refused ones included); records its counts.  The questions go on the kept status
        socket, whose connection has passed the handshake, so that a key revoked since is told by the reply
        (PermissionError) rather than by a handshake refused in silence; CollectorGoneError if the collector
        is silent for collector_timeout_ms; a UserWarning when it confirmed all but its budget cap is spent."""
        if self._credit and self._credit_end > self.seq:  # the credit we will not use goes back at once
            self._ask(self.seq)
            m = self._read_reply(100)
            if m is not None and not m.refused:
                self._credit_end = m.credit_seq_end
        ok, start, m, fresh = False, time.monotonic(), None, True
        try:
            while True:
                if fresh or time.monotonic() - self._asked_at >= PING_S:  # unanswered that long: asked again
                    self._ask(0)  # no credit asked: the reply holds the whole status (the budget too)
                    fresh = False
                left_ms = int((deadline - time.monotonic()) * 1000)
                m = self._read_reply(max(1, min(200, left_ms + 1)))  # slices: the silence is checked between
                if m is not None and not m.refused:
                    if self.batches_taken + self.batches_refused >= self.batches_sent:
                        ok = True
                        break
                    fresh = True
                # a collector that grants no credit (a sharded one) does not answer while it releases an
                # epoch: its connection, not its answers, tells whether it is there (as the C producer)
                self._check_alive(start)
                if time.monotonic() > deadline:
                    break
                if m is not None:  # not all taken yet: ask again soon
                    time.sleep(0.02)
        finally:
            self._drained_at, self._drain_ok = self.batches_sent, ok
        if ok and not self.batches_refused:
            self._warn_if_budget_spent(m)
        return ok

    def _warn_if_budget_spent(self, st):
        """Once: the collector took our rows, but its budget cap is spent (st: its status reply) and rows
        wait in its open epoch, so no snapshot will come of them (rows of an epoch already released, the one
        that spent the cap, need no warning)."""
        if self._warned_spent or st.budget_unit in ("", "none") or st.budget_left > 0 or not st.rows_in_epoch:
            return
        self._warned_spent = True
        spent = st.rho_total if st.budget_unit == "rho" else st.eps_total
        warnings.warn(f"the collector at {self.status_endpoint} has spent its privacy budget cap "
                      f"({st.budget_unit} left {st.budget_left:g}, {spent:g} spent): it took our rows but will "
                      "release no further snapshot from them; an operator raises the cap or starts a new state "
                      "directory", UserWarning, stacklevel=4)

    def drain(self, timeout_ms=None):
        """Flush, then wait until the collector answered for every batch: True when all were taken,
        False on timeout, ValueError if it refused some (wrong dimension, too large); CollectorGoneError or
        PermissionError as send."""
        if not self.status_endpoint:
            raise RuntimeError("drain needs status_endpoint")
        self.flush()
        ok = self._drain(time.monotonic() + (self.linger_ms if timeout_ms is None else timeout_ms) / 1000)
        if ok and self.batches_refused:
            raise ValueError(f"the collector refused {self.batches_refused} of our batches (wrong dimension or "
                             f"too large: refused whole; or no memory to take them all: its status counters say "
                             f"which)")
        return ok

    def close(self):
        """Flush; with a status endpoint, drain: wait up to linger_ms until the collector confirms every batch
        (not again if a drain already ended for the same batches); close.  Raises UnconfirmedBatchesError
        naming how many batches it did not confirm (the connection is closed either way), CollectorGoneError
        when it went silent (also again, at once, after send or drain raised it), PermissionError when it says
        our key was revoked (unless already raised).  Without a status endpoint: linger up to linger_ms to
        deliver, and nobody knows whether the rows arrived; it raises if the last batch could not even be sent
        within linger_ms, or if the collector ended our connection while we sent (the batches on it were
        lost)."""
        if self._sock is None:
            return
        deadline = time.monotonic() + self.linger_ms / 1000
        # a reason already found: nothing more is sent
        stopped = self._refused or self._revoked or self._bad_collector or self._gone is not None
        pending = 0
        try:
            if not stopped and self._pending.shape[0]:
                self._push(True, deadline)  # a collector that is gone must not hold close() past linger_ms
            # rows left unsent: counted, unless the reason was already raised (refused key, wrong d)
            pending = self._pending_batches() if not (self._bad_collector or self._refused) else 0
            confirmed = True
            if self.status_endpoint and self.batches_sent and not stopped:
                if self._drained_at != self.batches_sent:
                    self._drain(deadline)
                confirmed = self._drain_ok and not self.batches_refused
            self._events(0)
            if not confirmed or pending or stopped:
                # lingering would only delay the report: the collector drops what it has not taken when we go
                self._sock.setsockopt(zmq.LINGER, 0)
        except BaseException:
            self._sock.setsockopt(zmq.LINGER, 0)
            self._close_sockets()
            raise
        self._close_sockets()
        if self._gone is not None:
            raise self._gone_error(self._gone)
        if self._revoked:
            if not self._told_revoked:
                raise self._revoked_error()
            return
        if pending and not self.status_endpoint:  # nobody confirmed anything, and the last rows never left
            raise UnconfirmedBatchesError(f"the last batch could not be sent within linger_ms = {self.linger_ms} "
                                          f"ms (the collector is gone or not keeping up); none of the "
                                          f"{self.batches_sent + pending} batches was confirmed (no "
                                          f"status_endpoint)", self.batches_sent + pending,
                                          self.batches_sent + pending)
        if not self.status_endpoint and self.disconnects and not self._refused:
            n = self.disconnects
            raise UnconfirmedBatchesError(
                f"the collector at {self.endpoint} ended our connection {n} time{'s' if n > 1 else ''} while we "
                f"sent: the batches in flight on it were LOST (a batch of batch_rows = {self.batch_rows} above "
                f"its --max-batch-rows, or it restarted); none of the {self.batches_sent} batches was confirmed.  "
                "Give status_endpoint: the collector then names its limit, larger batches are sent in pieces, "
                "and every batch is confirmed", self.batches_sent, self.batches_sent)
        if self.status_endpoint and (not confirmed or pending):
            n = max(0, self.batches_sent - self.batches_taken) + pending
            if self.batches_refused:
                why = (f"it refused {self.batches_refused} (wrong dimension or too large: refused whole; or no "
                       f"memory to take them all: its status counters say which)")
            else:
                why = (f"no confirmation within linger_ms = {self.linger_ms} ms: the collector at "
                       f"{self.status_endpoint} is gone or overloaded, and those rows may be lost")
            raise UnconfirmedBatchesError(f"{n} of {self.batches_sent + pending} batches not confirmed taken by "
                                          f"the collector ({self.batches_taken} taken): {why}",
                                          n, self.batches_sent + pending, self.batches_refused)

    def _close_sockets(self):
        if self._creq is not None:
            self._creq.close(0)
            self._creq = None
        self._sock.disable_monitor()
        self._mon.close(0)
        self._sock.close()
        self._ctx.term()
        self._sock = None

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        _close_on_exit(self, exc_type, exc)


def _close_on_exit(producer, exc_type, exc):
    """A with-block's end: close; when an exception is already on its way, do not replace it (a failed
    close is added to it as a note)."""
    if exc_type is None:
        producer.close()
        return
    try:
        producer.close()
    except UnconfirmedBatchesError as e:
        if hasattr(exc, "add_note") and not isinstance(exc, CollectorGoneError):  # not the same news again
            exc.add_note(f"and on closing the producer: {e}")


def shard_slice(d, shards, shard):
    """Coordinates [c0, c1) of shard `shard` of rows of d split over `shards` ranks: the C library's
    dps_shard_slice (the first d % shards shards one wider)."""
    q, extra = divmod(d, shards)
    c0 = shard * q + min(shard, extra)
    return c0, c0 + q + (1 if shard < extra else 0)


def shard_endpoint(base, shard):
    """Rank `shard`'s ingest endpoint of a sharded collector whose --ingest is base: the C library's
    dps_shard_endpoint (the shard-th of a comma-separated list; else base for shard 0, tcp://HOST:PORT+shard,
    ipc://PATH-shard)."""
    if "," in base:
        items = base.split(",")
        if shard >= len(items) or not items[shard]:
            raise ValueError(f"{base!r} names no endpoint for shard {shard}")
        return items[shard]
    if shard == 0:
        return base
    if base.startswith("tcp://"):
        host, _, port = base.rpartition(":")
        if not port.isdigit() or host == "tcp:/" or int(port) == 0 or int(port) + shard > 65535:
            raise ValueError(f"{base!r}: no port to add {shard} to")
        return f"{host}:{int(port) + shard}"
    if base.startswith("ipc://"):
        return f"{base}-{shard}"
    raise ValueError(f"{base!r}: a sharded collector's ranks need tcp://, ipc:// or a list")


class RanksNotReadyError(TimeoutError):
    """A ShardedProducer's ranks did not all shake hands within ready_timeout_ms (raised before anything is
    sent).  ranks: [(r, endpoint), ...] of the ranks that did not answer -- no collector rank there (fewer
    ranks than shards: mpirun -np R must match), or another security."""

    def __init__(self, message, ranks):
        super().__init__(message)
        self.ranks = ranks


class ShardedProducer:
    """Rows to a collector sharded by coordinate over `shards` ranks (mpirun -np R dps-collector --sharded):
    each row is split into R slices (shard_slice) and slice r sent to rank r's ingest endpoint
    (shard_endpoint of endpoint), by R parts, each a Producer, all under one producer id and one random
    stream (their run) so that every rank pairs its slice with rank 0's.  status_endpoint is rank 0's: it
    confirms a batch only once every rank took its slice, so close() (part 0's drain) confirms them all.  A
    part's batches are not cut to the collector's batch limit (their seqs must be the same on every rank):
    keep batch_rows within it.  collector_timeout_ms and the other keywords go to every part.  The same
    interface as Producer: send, flush, drain, close, a context manager.  After a part failed, nothing
    more is sent (a retry would send the same rows under different seqs on different parts).

    Before its first batch it waits up to ready_timeout_ms for every rank's handshake (as dps-produce
    --shards does with --wait-ready) and raises RanksNotReadyError, a TimeoutError naming the ranks'
    endpoints that did not answer, with nothing sent: a rank that is not there (a producer split for more
    ranks than the collector has) would block its part's send for good, and the ranks that are there would
    drop every batch whose slice never comes.  A later send checks again.  ready_timeout_ms=None: no check
    (sends block until every rank is there).  wait_ready(timeout_ms) is Producer.wait_ready for all ranks
    at once: True or False, the ranks still waiting in not_ready."""

    def __init__(self, endpoint, dim, shards, status_endpoint=None, producer_id=None, ready_timeout_ms=10000,
                 **kw):
        if not 1 <= shards <= dim:
            raise ValueError(f"shards must be in 1..dim (got {shards} for dim {dim})")
        if producer_id is None:
            producer_id = f"python-{os.getpid()}-{os.urandom(4).hex()}"
        stream = int.from_bytes(os.urandom(8), "little") | 1  # nonzero: a sharded batch must name its stream
        self.dim, self.shards, self.producer_id = dim, shards, producer_id
        self.endpoint, self.ready_timeout_ms = endpoint, ready_timeout_ms
        self._cols = [shard_slice(dim, shards, r) for r in range(shards)]
        self._failed = False
        self._all_ready = ready_timeout_ms is None  # every rank shook hands (checked before the first batch)
        self.not_ready = []  # [(r, endpoint)]: the ranks the last wait_ready did not hear from
        self.parts = []
        try:
            for r, (c0, c1) in enumerate(self._cols):
                shard = (r, shards, dim, stream) if shards > 1 else None
                self.parts.append(Producer(endpoint, c1 - c0, producer_id=producer_id,
                                           status_endpoint=status_endpoint if r == 0 else None, shard=shard, **kw))
        except BaseException:
            for part in self.parts:
                part.linger_ms = 0
                part._close_sockets()
            raise

    def wait_ready(self, timeout_ms=5000):
        """True once every rank's handshake succeeded, within one timeout_ms for all; False if some did not
        (not_ready lists them as (r, endpoint)); PermissionError if a rank refused our key."""
        end = time.monotonic() + timeout_ms / 1000
        while True:
            waiting = []
            for r, part in enumerate(self.parts):
                if not part._ready:
                    part._events(0)
                if part._refused and not part._ready:
                    raise PermissionError(f"rank {r} of the sharded collector ({part.endpoint}) refused our CURVE "
                                          "key (not in its authorized keys)")
                if not part._ready:
                    waiting.append((r, part.endpoint))
            self.not_ready = waiting
            if not waiting:
                self._all_ready = True
                return True
            if time.monotonic() > end:
                return False
            waiting_part = self.parts[waiting[0][0]]
            waiting_part._events(20)  # wait on one that is still waiting: its handshake, or 20 ms

    def _check_ready(self):
        """Before the first batch: every rank's handshake within ready_timeout_ms, or RanksNotReadyError."""
        if self._all_ready or self.wait_ready(self.ready_timeout_ms):
            return
        which = ", ".join(f"rank {r} ({ep})" for r, ep in self.not_ready)
        raise RanksNotReadyError(
            f"no handshake within {self.ready_timeout_ms} ms with {which} of the {self.shards} ranks of the sharded "
            f"collector at {self.endpoint} (rank r at its port + r, or the r-th of a list): is the collector running "
            f"on {self.shards} ranks (mpirun -np {self.shards} dps-collector --sharded), with the same security? "
            f"Nothing was sent", self.not_ready)

    def _each(self, call):
        if self._failed:
            raise RuntimeError("a part of this sharded producer failed: nothing more is sent")
        try:
            for r, part in enumerate(self.parts):
                call(r, part)
        except BaseException:
            self._failed = True
            raise

    def send(self, rows):
        """Split rows (numpy or torch, (n, dim) or (dim,)) by coordinate and queue each part's slice, a batch's
        worth at a time for every part in turn (as the C producer): a part that sent many batches ahead of the
        others would leave the ranks waiting for slices still unsent (--shard-wait drops them)."""
        a = _as_rows(rows, self.dim)
        if not self._failed:
            self._check_ready()
        b = self.parts[0].batch_rows
        for i in range(0, a.shape[0], b):
            self._each(lambda r, part: part.send(a[i:i + b, self._cols[r][0]:self._cols[r][1]]))

    def flush(self):
        self._each(lambda r, part: part.flush())

    def drain(self, timeout_ms=None):
        """Every part's batches out, then rank 0 confirms all (Producer.drain)."""
        self.flush()
        return self.parts[0].drain(timeout_ms)

    @property
    def rows_sent(self):
        return self.parts[0].rows_sent

    @property
    def run(self):
        """The run every part sends (the shard stream)."""
        return self.parts[0].run

    @property
    def batches_sent(self):
        return self.parts[0].batches_sent

    def close(self):
        """Flush every part, close part 0 (its drain confirms every rank's slices: it raises as
        Producer.close does), then the others (what they raise counts only without a status endpoint: then
        their own closes are all there is)."""
        try:
            if not self._failed:
                for part in self.parts[1:]:
                    part.flush()
        finally:
            try:
                self.parts[0].close()
            finally:
                first = None
                for part in self.parts[1:]:
                    try:
                        part.close()
                    except UnconfirmedBatchesError as e:
                        first = first or e
                if first is not None and not self.parts[0].status_endpoint:
                    raise first

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        _close_on_exit(self, exc_type, exc)
