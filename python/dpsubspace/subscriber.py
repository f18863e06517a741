"""Receive a dps-collector's snapshots (ZeroMQ SUB) and project onto the latest.

    sub = Subscriber("tcp://127.0.0.1:7781", plaintext=True)
    snap = sub.recv(timeout_ms=10000)          # the latest arrives at once
    g_low = sub.project(g)                     # V^T V g with the latest released basis

A new subscriber gets the collector's latest snapshot at once (the welcome
message), which may be the last basis of a previous job on the same collector.
A job that wants only bases learned from its own start on asks the collector's
open epoch first and passes it as from_epoch:

    start = query_status("tcp://127.0.0.1:7782", plaintext=True)["epoch"]
    sub = Subscriber("tcp://127.0.0.1:7781", plaintext=True, from_epoch=start)
"""
import math
import time
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import zmq

from . import wire
from .keys import apply_client_security

STATUS_NAMES, AGGREGATOR_NAMES = wire.STATUS_NAMES, wire.AGGREGATOR_NAMES
# The noise level at and above which a released snapshot is weak (DPS_NOISE_LEVEL_WEAK in dpsubspace.h).
NOISE_LEVEL_WEAK = 0.75


@dataclass
class Snapshot:
    seq: int
    epoch: int
    d: int
    k: int
    status: str
    aggregator: str
    rows_used: int
    buckets_used: int
    radius: float
    rho_epoch: float
    delta_epoch: float
    rho_total: float
    delta_total: float
    eps_total: float
    delta_target: float
    seeded: bool
    public_seed: int
    reason: str
    time_unix_ms: int
    radius_unrelated: float
    basis: Optional[np.ndarray] = field(default=None, repr=False)  # (k, d) float32, orthonormal rows
    budget_left: float = math.inf  # what the collector's cap leaves after this epoch, in budget_unit
    budget_unit: str = ""  # "rho", "eps", "none" (no cap), "" (the collector did not say)
    # parameter groups (DESIGN 7.2): [(d_g, k_g), ...] in row order; [] = one group, the whole row
    groups: list = field(default_factory=list)
    # How far the basis is from noise, from released quantities only (about the sine of its angle to the
    # noise-free basis; <= 0.1 mostly signal, >= 1 random level; 0: not computed).
    noise_level: float = 0.0

    @property
    def weak(self):
        """True if the basis is near the random level: noise_level >= NOISE_LEVEL_WEAK (as dps_snapshot_weak);
        for a snapshot without a noise level (an older collector), if the buckets agreed only at distances
        comparable to unrelated subspaces."""
        if self.status != "released":
            return False
        if self.noise_level > 0:
            return self.noise_level >= NOISE_LEVEL_WEAK
        return self.radius_unrelated > 0 and self.radius >= 0.5 * self.radius_unrelated

    @staticmethod
    def from_bytes(data):
        m = wire.Snapshot.FromString(data)
        if m.version != wire.WIRE_VERSION:
            raise ValueError(f"snapshot of protocol version {m.version}")
        if not (m.d >= 2 and 1 <= m.k < m.d) or m.status not in STATUS_NAMES:
            raise ValueError("malformed snapshot")
        basis = None
        if m.status == 0:
            if len(m.basis) != 4 * m.k * m.d:
                raise ValueError("snapshot basis has the wrong length")
            basis = np.frombuffer(m.basis, dtype="<f4").reshape(m.k, m.d).astype(np.float32)
            if not np.all(np.isfinite(basis)):
                raise ValueError("snapshot basis is not finite")
        groups = list(zip(m.group_d, m.group_k))
        if len(m.group_d) != len(m.group_k) or (groups and (
                sum(g[0] for g in groups) != m.d or sum(g[1] for g in groups) != m.k
                or any(dg < 1 or kg > dg for dg, kg in groups))):
            raise ValueError("snapshot parameter groups do not tile d and k")
        return Snapshot(m.seq, m.epoch, m.d, m.k, STATUS_NAMES[m.status], AGGREGATOR_NAMES.get(m.aggregator, "?"),
                        m.rows_used, m.buckets_used, m.radius, m.rho_epoch, m.delta_epoch, m.rho_total,
                        m.delta_total, m.eps_total, m.delta_target, m.seeded, m.public_seed, m.reason,
                        m.time_unix_ms, m.radius_unrelated, basis, m.budget_left, m.budget_unit, groups,
                        m.noise_level)

    def group_slices(self):
        """For each parameter group (one for a snapshot without groups): (columns, basis rows) as slices."""
        if not self.groups:
            return [(slice(0, self.d), slice(0, self.k))]
        out, c, r = [], 0, 0
        for dg, kg in self.groups:
            out.append((slice(c, c + dg), slice(r, r + kg)))
            c, r = c + dg, r + kg
        return out

    def group_basis(self, g):
        """Group g's own basis: k_g x d_g orthonormal rows (None unless released)."""
        if self.basis is None:
            return None
        cols, rows = self.group_slices()[g]
        return self.basis[rows, cols]

    def project(self, x):
        """x (d,) or (n, d) projected on the basis; with groups each group on its own basis."""
        if self.basis is None:
            raise ValueError("no basis: the snapshot was not released")
        x = np.asarray(x, dtype=np.float64)
        V = self.basis.astype(np.float64)
        return (x @ V.T) @ V

    def budget_text(self):
        """What the budget cap leaves, as shown in every snapshot line."""
        if self.budget_unit == "none":
            return "no budget cap"
        if not self.budget_unit:
            return "budget left not stated"
        return f"budget left {self.budget_left:.4g} {self.budget_unit}"

    def describe(self):
        eps = "inf" if math.isinf(self.eps_total) else f"{self.eps_total:.3f}"
        return (f"epoch {self.epoch} {self.status}: rho this epoch {self.rho_epoch:g}, total rho "
                f"{self.rho_total:g} (eps {eps} at delta {self.delta_target:g}), {self.budget_text()}"
                + (" [SEEDED: not secure]" if self.seeded else "")
                + (f", noise level {self.noise_level:.3g}" if self.status == "released" and self.noise_level > 0
                   else "")
                + (" [WEAK: near the random level; little information]" if self.weak else "")
                + (f"; {self.reason}" if self.reason else ""))


class Subscriber:
    """Snapshots from a collector's publish endpoint; those of epochs before from_epoch (the welcome
    message included) are skipped."""

    def __init__(self, endpoint, server_public_key=None, public_key=None, secret_key=None, plaintext=False,
                 from_epoch=0):
        self._ctx = zmq.Context()
        self._sock = self._ctx.socket(zmq.SUB)
        apply_client_security(self._sock, endpoint, server_public_key, public_key, secret_key, plaintext)
        self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.setsockopt(zmq.SUBSCRIBE, b"")
        self._sock.connect(endpoint)
        self.latest = None  # latest released Snapshot
        self.last_seq = 0
        self.from_epoch = from_epoch
        self.received = self.missed = self.bad = self.skipped = 0

    def recv(self, timeout_ms=None):
        """The next snapshot not seen before and not before from_epoch, or None on timeout."""
        end = None if timeout_ms is None else time.monotonic() + timeout_ms / 1000
        while True:
            left = None if end is None else max(0, int((end - time.monotonic()) * 1000))
            if not self._sock.poll(left):
                return None
            data = self._sock.recv()
            try:
                snap = Snapshot.from_bytes(data)
            except Exception:
                self.bad += 1
                continue
            if snap.seq and snap.seq <= self.last_seq:  # the welcome copy of one we had
                continue
            if self.last_seq and snap.seq > self.last_seq + 1:
                self.missed += snap.seq - self.last_seq - 1
            self.last_seq = snap.seq
            if snap.epoch < self.from_epoch:  # e.g. a previous job's last basis, sent as the welcome
                self.skipped += 1
                continue
            self.received += 1
            if snap.status == "released":
                self.latest = snap
            return snap

    def update(self):
        """Take every pending snapshot without blocking; True if the basis changed."""
        changed = False
        while True:
            snap = self.recv(timeout_ms=0)
            if snap is None:
                return changed
            changed |= snap.status == "released"

    def project(self, x):
        """V^T V x for a vector (d,) or rows (n, d), with the latest released basis (group-wise:
        each parameter group on its own basis, since the rows of a group-wise basis are zero
        outside their group)."""
        if self.latest is None:
            raise RuntimeError("no released snapshot yet")
        return self.latest.project(x)

    def close(self):
        if self._sock is not None:
            self._sock.close()
            self._ctx.term()
            self._sock = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
