"""Stream rows to a dps-collector (ZeroMQ PUSH, RowBatch messages).

    with Producer("tcp://127.0.0.1:7780", dim=784, plaintext=True) as p:
        p.send(per_example_gradients)      # numpy (n, dim) or a torch tensor

Sends block while the collector is behind (its queue and ours are full).
Give status_endpoint so that close() waits until the collector confirms it
has taken every batch: libzmq discards messages still queued toward a PULL
socket when their sender disconnects, so without it rows sent just before
close() can be lost.  A refused key raises PermissionError.
"""
import os
import time

import numpy as np
import zmq

from . import wire
from .keys import apply_client_security


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


class Producer:
    def __init__(self, endpoint, dim, batch_rows=256, producer_id=None, server_public_key=None,
                 public_key=None, secret_key=None, plaintext=False, sndhwm=64, linger_ms=30000,
                 status_endpoint=None):
        if producer_id is None:  # unique: the collector's per-producer counts are ours alone
            producer_id = f"python-{os.getpid()}-{os.urandom(4).hex()}"
        self._sec = dict(server_public_key=server_public_key, public_key=public_key, secret_key=secret_key,
                         plaintext=plaintext)
        self.status_endpoint, self.linger_ms, self.batches_sent = status_endpoint, linger_ms, 0
        self._drained = False
        if dim <= 0 or batch_rows <= 0:
            raise ValueError("dim and batch_rows must be positive")
        if len(producer_id.encode()) > 64:
            raise ValueError("producer_id is at most 64 bytes")
        self.dim, self.batch_rows, self.producer_id = dim, batch_rows, producer_id
        self.seq = self.rows_sent = 0
        self._pending = np.empty((0, dim), dtype="<f4")
        self._ctx = zmq.Context()
        self._sock = self._ctx.socket(zmq.PUSH)
        apply_client_security(self._sock, endpoint, server_public_key, public_key, secret_key, plaintext)
        self._sock.setsockopt(zmq.IMMEDIATE, 1)
        self._sock.setsockopt(zmq.SNDHWM, sndhwm)
        self._sock.setsockopt(zmq.SNDTIMEO, 200)
        self._sock.setsockopt(zmq.LINGER, linger_ms)
        self._mon = self._sock.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_HANDSHAKE_FAILED_AUTH)
        self._ready = self._refused = False
        self._sock.connect(endpoint)

    def _events(self, timeout_ms=0):
        from zmq.utils.monitor import recv_monitor_message
        while self._mon.poll(timeout_ms):
            ev = recv_monitor_message(self._mon)["event"]
            if ev == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                self._ready = True
            elif ev == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
                self._refused = True
            timeout_ms = 0

    def wait_ready(self, timeout_ms=5000):
        """True once the handshake succeeded; PermissionError if our key was refused."""
        import time
        end = time.monotonic() + timeout_ms / 1000
        while not self._ready:
            self._events(50)
            if self._refused:
                raise PermissionError("the collector refused our CURVE key (not in its authorized keys)")
            if time.monotonic() > end:
                return False
        return True

    def _send_batch(self, rows):
        m = wire.RowBatch(version=wire.WIRE_VERSION, producer_id=self.producer_id, seq=self.seq,
                          dim=self.dim, rows=rows.shape[0], data=rows.tobytes())
        data = m.SerializeToString()
        while True:
            try:
                self._sock.send(data)
                break
            except zmq.Again:  # the collector is behind: wait, but notice a refusal
                self._events(0)
                if self._refused and not self._ready:
                    raise PermissionError("the collector refused our CURVE key (not in its authorized keys)")
        self.seq += 1
        self.batches_sent += 1
        self.rows_sent += rows.shape[0]

    def send(self, rows):
        """Queue rows (numpy or torch, shape (n, dim) or (dim,)) and send full batches."""
        a = _as_rows(rows, self.dim)
        if self._pending.shape[0]:
            a = np.concatenate([self._pending, a])
        full = (a.shape[0] // self.batch_rows) * self.batch_rows
        for i in range(0, full, self.batch_rows):
            self._send_batch(a[i:i + self.batch_rows])
        self._pending = a[full:].copy()

    def flush(self):
        """Send the partial batch, if any."""
        if self._pending.shape[0]:
            self._send_batch(self._pending)
            self._pending = self._pending[:0]

    def drain(self, timeout_ms=None):
        """Flush, then wait until the collector answered for every batch: True when all were taken,
        False on timeout, ValueError if it refused some (wrong dimension, too large)."""
        from .status import query_status
        if not self.status_endpoint:
            raise RuntimeError("drain needs status_endpoint")
        self.flush()
        self._drained = True  # close() does not wait a second time
        end = time.monotonic() + (self.linger_ms if timeout_ms is None else timeout_ms) / 1000
        while True:
            try:
                st = query_status(self.status_endpoint, 1000, producer_id=self.producer_id, **self._sec)
                if st["producer_batches"] + st["producer_refused"] >= self.batches_sent:
                    if st["producer_refused"]:
                        raise ValueError(f"the collector refused {st['producer_refused']} of our batches as a whole "
                                         f"(wrong dimension or too large: its status counters say which)")
                    return True
            except TimeoutError:
                pass
            if time.monotonic() > end:
                return False
            time.sleep(0.02)

    def close(self):
        """Flush; drain if there is a status endpoint, else linger up to linger_ms; close."""
        if self._sock is None:
            return
        if not self._refused:
            self.flush()
            if self.status_endpoint and self.batches_sent and not self._drained:
                self.drain()
        else:
            self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.disable_monitor()
        self._mon.close(0)
        self._sock.close()
        self._ctx.term()
        self._sock = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
