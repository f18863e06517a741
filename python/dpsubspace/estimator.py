"""estimator.py - SubspaceEstimator: the library's private subspace mechanisms
in process (no collector, no sockets), over libdpsubspace through ctypes
(native.py).  numpy arrays or torch tensors in; numpy out, torch out when
torch went in.

Two ways to feed it:
  - one release per call (default, t and m not given): fit(X) releases one
    snapshot from exactly the rows X (one epoch of every row, as
    `dps-estimate --method NAME`); partial_fit(X) adds rows to the open
    epoch and release() closes it.
  - the collector's epochs (t, m given, streaming aggregators only; the
    bucket aggregators always, t = 125 and m = 2k by default):
    partial_fit(X) streams rows and an epoch of t*m rows is released each
    time one fills; fit(X) also closes the partial epoch at the end (as
    `dps-estimate --close-partial`).
The privacy spent adds up over the estimator's whole life (every call), with
one accountant and an optional cap; the mechanisms' guarantees are the
library's (include/dpsubspace.h, DESIGN 7), stated under REPLACING one row;
rho_add_remove() restates them under adding or removing one row, which is
what dpsubspace.Accountant composes with DP-SGD steps.
"""
import ctypes
import math
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from . import native

CENTRAL = ("analyze-gauss", "iterative", "cov-laplace", "cov-gaussian", "exact", "topk")
EPS_METHODS = ("iterative", "cov-laplace", "cov-gaussian", "exact")  # budgets in (eps, delta), not rho


def streaming() -> Tuple[str, ...]:
    """The streaming mechanisms: the library's epoch mechanisms (native.aggregators)."""
    return native.aggregators()


def sums() -> Tuple[str, ...]:
    """The mechanisms on sums of the rows (parameter groups, an add/remove statement): the library's."""
    return native.group_aggregators()


def mechanisms() -> Tuple[str, ...]:
    """Every mechanism SubspaceEstimator runs: the library's streaming ones, then the central ones."""
    return streaming() + CENTRAL


BATCH = 256           # rows per push, dps-estimate's --batch default (seeded runs match it bit for bit)
_ONE_EPOCH_ROWS = 1 << 38  # dps-estimate's t*m for "every row in one epoch"
_CENTRAL_LABEL = b"dps-estimate central noise"  # dps-estimate's stream for central noise (est_run.c)


@dataclass
class Release:
    """One snapshot of the estimator (a released basis, or why there is none)."""
    epoch: int
    status: str                 # "released", "failed" or "refused"
    reason: str
    rows_used: Optional[int]    # rows the release read; None where that count is private (the releases
                                # dpsubspace.torch.PrivateBasis publishes: its sample's size is not charged)
    rho_epoch: float            # its cost, zCDP rho under replacing one row (a snapshot's names)
    delta_epoch: float
    noise_level: float          # about the sine to the noise-free basis (NaN: not computed)
    weak: bool                  # noise_level above the library's WEAK threshold
    basis: Optional[np.ndarray]  # k x d float32 orthonormal rows, None unless released
    power_blocks_run: int = 0   # power aggregator: the noisy steps this release took
    rho_add_remove: Optional[float] = None  # this release alone under adding or removing one of ITS rows
                                # (SubspaceEstimator.rho_add_remove says why); None: no such statement
    group_noise_level: Tuple[float, ...] = ()  # a streaming mechanism's: each parameter group's own level
                                # (one entry, the whole row, without groups; NaN: none, e.g. a rank-0 group);
                                # noise_level weighs them by the energy each group can hold
    group_weak: Tuple[bool, ...] = ()  # each group's level above the WEAK threshold (one may be WEAK while
                                # the release is not, and the reverse)

    # former names (0.1), read-only
    rows = property(lambda self: self.rows_used)
    rho = property(lambda self: self.rho_epoch)
    delta = property(lambda self: self.delta_epoch)


def _as_rows(X: Any, d: Optional[int]) -> Tuple[np.ndarray, bool]:
    """X as a C-contiguous float32 n x d array, and whether it came from torch."""
    is_torch = type(X).__module__.startswith("torch")
    if is_torch:
        X = X.detach().to("cpu").numpy()
    A = np.ascontiguousarray(np.asarray(X, dtype=np.float32))
    if A.ndim != 2:
        raise ValueError(f"rows must be a 2-d array (n x d), got {A.ndim} dimensions")
    if A.shape[0] == 0:
        raise ValueError("no rows (an empty batch)")
    if d is not None and A.shape[1] != d:
        raise ValueError(f"rows have {A.shape[1]} columns; this estimator's d is {d}")
    return A, is_torch


def _rho_add_remove(rho: float, steps: int, cut_by: Optional[str]) -> Optional[float]:
    """One gaussian or power release of `steps` noisy steps, each a Gaussian
    mechanism of noise 1/sqrt(rho): rho/2 per step whose input gains or
    loses one unit row (||x x^T X|| <= 1), rho per step whose input has one
    row replaced, 2.5 rho for one row in and two out (||x x^T - y y^T -
    z z^T||_F^2 <= 1 + 4 for PSD terms), under adding or removing a row at
    position p of a release's input:
    - one step: rho/2 (only the added row changes the sum);
    - blocks cut by index over t*m, fixed whatever the rows: the block of p
      loses its last row to the next, each later block one in and one out,
      and so does the last one when the epoch is full (its last row goes to
      the next epoch): steps rho;
    - blocks cut by fit() at floor(i n / T) of its n rows: boundary i moves
      by s_i = floor(i (n + 1) / T) - floor(i n / T) in {0, 1}, so rows left
      of p move left and rows right of p move right by at most one block: a
      block away from p has at most one row in and one out (rho); the block
      of p gains x and loses one row at each end only when s_i = 1 and
      s_(i+1) = 0, which depends on n mod T alone and never happens for
      T <= 4 (every residue checked by python/tests/test_estimator.py; it
      does for T = 5, n = 7, block 2): T rho, plus 1.5 rho for T >= 5;
    - blocks cut by the caller (end_block): their rule decides, None here
      (dpsubspace.torch.PrivateBasis draws them at random: rho/2)."""
    if steps <= 1:
        return rho / 2
    if cut_by == "caller":
        return None
    if cut_by == "fit":
        return steps * rho + (1.5 * rho if steps > 4 else 0.0)
    return steps * rho


class SubspaceEstimator:
    """A private top-k subspace of the rows it is given, in process.

    n_components: k (with groups: each group's rank unless group_components).
    rho: zCDP rho of each release (replace-one; see rho_add_remove());
      default 1.  Not for the eps methods.
    mechanism: one of mechanisms() -- "gaussian" (DESIGN 7.1, d <= 16384 dense),
      "power" (noisy power iteration, 7.3, any d), "kron" (Kronecker-factored
      bases of the groups given a shape, 7.6; needs groups and group_shapes), the bucket aggregators
      "reference", "projection", "histogram" (sample-and-aggregate, 3.3),
      "covariance" (Amin et al., as an epoch aggregator), and the central
      methods on all rows at once: "analyze-gauss" (charged (rho, delta)),
      "iterative" (Amin et al.'s iterative eigenvector sampling, pure
      eps-DP), "cov-laplace" (eps-DP), "cov-gaussian" ((eps, delta)-DP),
      "exact" (Singhal-Steinke, for data exactly in a subspace) and "topk"
      (NOT private: the exact top-k, a reference).  As dps-estimate --method.
    eps: the budget of the eps methods (iterative, cov-laplace, cov-gaussian,
      exact), charged as eps^2/2-zCDP (with delta for the last two).
    delta: the (eps, delta) mechanisms' delta per release.
    groups: widths of public parameter groups adding up to d (DESIGN 7.2;
      gaussian, power and kron): one basis per group for the cost of one release.
    group_components: each group's rank (default n_components each).
    group_shapes: kron only, one entry per group: (r, c) with r c its width
      (the group read as an r x c matrix, row-major: a Linear weight (out,
      in)), or None (the group released as gaussian's); as --param-groups RxC.
    t, m: the collector's epochs of t*m rows (see the module's text).
    power_blocks, power_oversample, dense_max_d, q: as dps-estimate's flags.
    cap_rho / cap_eps: a cap on everything this estimator releases (eps at
      delta_target), as the programs' --cap-rho / --cap-eps; a release past
      it is refused (nothing spent).  budget_rho / budget_eps: their former
      names, still taken.
    seed: None (default) draws noise from the system's secure generator;
      an int makes every draw reproducible -- NOT private, for tests only.
    workers: threads for the bucket bases and BLAS (default: all CPUs).
    """

    def __init__(self, n_components: int, rho: Optional[float] = None, mechanism: str = "gaussian", *,
                 eps: Optional[float] = None, delta: float = 1e-8,
                 groups: Optional[Sequence[int]] = None, group_components: Optional[Sequence[int]] = None,
                 group_shapes: Optional[Sequence[Optional[Tuple[int, int]]]] = None,
                 t: Optional[int] = None, m: Optional[int] = None, q: Optional[int] = None,
                 power_blocks: Optional[int] = None, power_oversample: Optional[int] = None,
                 dense_max_d: Optional[int] = None, cap_rho: Optional[float] = None,
                 cap_eps: Optional[float] = None, delta_target: float = 1e-5, public_seed: int = 0,
                 seed: Optional[int] = None, workers: Optional[int] = None, batch: int = BATCH,
                 budget_rho: Optional[float] = None, budget_eps: Optional[float] = None) -> None:
        if mechanism not in mechanisms():
            raise ValueError(f"mechanism must be one of {', '.join(mechanisms())}; got {mechanism!r}")
        if not (isinstance(n_components, (int, np.integer)) and n_components >= 1):
            raise ValueError(f"n_components must be a whole number >= 1, got {n_components!r}")
        if mechanism in EPS_METHODS:
            if rho is not None:
                raise ValueError(f"{mechanism} is (eps, delta)-DP: give eps, not rho")
            if eps is None or not (eps > 0 and math.isfinite(eps)):
                raise ValueError(f"{mechanism} needs eps > 0 (its privacy budget), got {eps!r}")
            rho = 0.0
        else:
            if eps is not None:
                raise ValueError(f"{mechanism} takes rho, not eps")
            rho = 1.0 if rho is None else rho
            if not (rho > 0 and math.isfinite(rho)):
                raise ValueError(f"rho must be positive and finite, got {rho!r}")
        if not (0 < delta < 1):  # checked before anything is charged (dps-estimate's --delta rule)
            raise ValueError(f"delta must be in (0, 1), got {delta!r}")
        if mechanism == "exact" and not delta <= 0.5:
            raise ValueError(f"exact needs delta <= 0.5, got {delta!r}")
        if (t is None) != (m is None):
            raise ValueError("give both t and m (epochs of t*m rows), or neither (one release per fit)")
        if t is not None and mechanism in CENTRAL:
            raise ValueError(f"{mechanism} releases once from all rows: t and m do not apply")
        if groups is not None and mechanism not in sums():
            raise ValueError(f"groups apply to the {', '.join(sums())} mechanisms only")
        if group_shapes is not None and mechanism != "kron":
            raise ValueError("group_shapes apply to the kron mechanism only")
        if mechanism == "kron" and (groups is None or group_shapes is None):
            raise ValueError("the kron mechanism needs groups and group_shapes (an (r, c) for at least one group)")
        if group_shapes is not None:
            if len(group_shapes) != len(groups):
                raise ValueError(f"group_shapes has {len(group_shapes)} entries for {len(groups)} groups")
            for g, (w, sh) in enumerate(zip(groups, group_shapes)):
                if sh is not None and (len(sh) != 2 or int(sh[0]) < 1 or int(sh[1]) < 1
                                       or int(sh[0]) * int(sh[1]) != w):
                    raise ValueError(f"group {g + 1}: shape {sh!r} is not (r, c) with r c = its width {w}")
        if batch < 1:
            raise ValueError(f"batch must be >= 1, got {batch}")
        self.n_components = int(n_components)
        self.rho, self.eps, self.delta, self.mechanism = float(rho), eps, float(delta), mechanism
        self.groups = list(groups) if groups is not None else None
        self.group_components = list(group_components) if group_components is not None else None
        self.group_shapes = list(group_shapes) if group_shapes is not None else None
        self.t, self.m, self.q = t, m, q
        self.power_blocks, self.power_oversample, self.dense_max_d = power_blocks, power_oversample, dense_max_d
        if (cap_rho is not None and budget_rho is not None) or (cap_eps is not None and budget_eps is not None):
            raise ValueError("give cap_rho / cap_eps (budget_rho / budget_eps are their former names), not both")
        cap_rho = budget_rho if cap_rho is None else cap_rho
        cap_eps = budget_eps if cap_eps is None else cap_eps
        self.cap_rho, self.cap_eps, self.delta_target = cap_rho, cap_eps, float(delta_target)
        self.public_seed, self.seed, self.workers, self.batch = int(public_seed), seed, workers, int(batch)
        self.releases_: List[Release] = []
        self.d_: Optional[int] = None
        self._est = ctypes.c_void_p()
        self._acc = ctypes.c_void_p()  # the central mechanisms' accountant (the library's: cap and eps)
        self._cfg: Optional[native.ConfigHandle] = None
        self._spent = native.Zcdp(0.0, 0.0)
        self._torch_out = False
        self._central_draws = 0
        self._cuts = 0  # end_block calls in the open epoch
        self._cut_by: Optional[str] = None  # who cut the open epoch's blocks: "fit" (index cuts of its rows),
                                            # "caller" (end_block), None (the library's, over t*m)

    # ------------------------------------------------------------ settings
    def _config(self, d: int) -> native.ConfigHandle:
        L = native.lib()
        k = self.n_components if self.groups is None else 0
        if self.groups is not None:
            gk = self.group_components or [min(self.n_components, w) for w in self.groups]
            if len(gk) != len(self.groups):
                raise ValueError(f"group_components has {len(gk)} ranks for {len(self.groups)} groups")
            if sum(self.groups) != d:
                raise ValueError(f"groups add up to {sum(self.groups)}, not to the row dimension d = {d}")
            if not 1 <= len(self.groups) <= native.DPS_MAX_GROUPS:
                raise ValueError(f"1 to {native.DPS_MAX_GROUPS} groups, got {len(self.groups)}")
            k = sum(gk)
        c = native.ConfigHandle(d, max(k, 1))
        agg = ctypes.c_int()
        native.check(L.dps_aggregator_from_name(self.mechanism.encode(), ctypes.byref(agg)), "mechanism")
        c["aggregator"] = agg.value
        if self.groups is not None:
            c["groups"] = len(self.groups)
            for g, (w, kg) in enumerate(zip(self.groups, gk)):
                sh = self.group_shapes[g] if self.group_shapes is not None else None
                c.set_group(g, w, kg, int(sh[0]) if sh is not None else 0)
        if self.t is None and L.dps_config_uses_buckets(c.ptr):
            pass  # bucket aggregators: the library's epochs (t = 125, m = 2k) and fit closes the last partial one
        elif self.t is None:  # every row of a call in one epoch, as dps-estimate --method NAME
            c["m"] = c["k"]
            c["t"] = c["window"] = min(_ONE_EPOCH_ROWS // c["m"], (2**64 - 1) // 4 // d // c["k"])
        else:
            c["t"], c["m"], c["window"] = self.t, self.m, self.t
        for name in ("q", "power_blocks", "power_oversample", "dense_max_d"):
            if getattr(self, name) is not None:
                c[name] = getattr(self, name)
        c["rho_epoch"], c["delta_epoch"] = self.rho, self.delta
        c["cap_rho"], c["cap_eps"], c["delta_target"] = self.cap_rho or 0.0, self.cap_eps or 0.0, self.delta_target
        c["public_seed"] = self.public_seed
        if self.seed is not None:
            c["seeded"], c["seed"] = 1, int(self.seed)
        if self.workers is not None:
            c["workers"] = int(self.workers)
        why = ctypes.c_char_p()
        rc = L.dps_config_check(c.ptr, ctypes.byref(why))
        if rc:
            raise ValueError(f"impossible settings: {why.value.decode() if why.value else L.dps_strerror(rc).decode()}")
        return c

    def _start(self, d: int) -> None:
        if self.d_ is None:
            if d < 2:
                raise ValueError(f"rows need at least 2 columns, got {d}")
            if self.mechanism in streaming():
                self._cfg = self._config(d)
                native.check(native.lib().dps_estimator_new(ctypes.byref(self._est), self._cfg.ptr),
                             "starting the estimator")
            elif self.n_components >= d:
                raise ValueError(f"n_components must be below d = {d}")
            self.d_ = d

    # ---------------------------------------------------------------- rows
    def partial_fit(self, X: Any) -> "SubspaceEstimator":
        """Add rows (n x d) to the open epoch; with t and m, release every
        epoch that fills.  Streaming mechanisms only."""
        if self.mechanism in CENTRAL:
            raise TypeError(f"{self.mechanism} reads all rows at once: call fit(X)")
        A, is_torch = _as_rows(X, self.d_)
        self._torch_out = is_torch
        self._start(A.shape[1])
        L, d = native.lib(), A.shape[1]
        for off in range(0, A.shape[0], self.batch):
            chunk = A[off:off + self.batch]
            pos = 0
            while pos < chunk.shape[0]:
                taken = ctypes.c_size_t()
                ptr = chunk[pos:].ctypes.data_as(native.c_float_p)
                rc = L.dps_estimator_push(self._est, ptr, chunk.shape[0] - pos, d, ctypes.byref(taken))
                pos += taken.value
                if rc not in (native.DPS_OK, native.DPS_EFULL):
                    native.check(rc, "pushing rows")
                if L.dps_estimator_epoch_full(self._est):
                    self._close()
        return self

    def release(self) -> Release:
        """Close the open epoch (whatever rows it has) and return its release."""
        if self.mechanism in CENTRAL:
            raise TypeError(f"{self.mechanism} releases from fit(X)")
        if self.d_ is None or self.rows_in_epoch() == 0:
            raise ValueError("no rows in the open epoch: nothing to release")
        return self._close()

    def fit(self, X: Any) -> "SubspaceEstimator":
        """Release from exactly the rows X (one release without t and m; with
        them, every filled epoch and then the partial last one)."""
        if self.mechanism in CENTRAL:
            A, is_torch = _as_rows(X, self.d_)
            self._torch_out = is_torch
            self._start(A.shape[1])
            self.releases_.append(self._central(A))
            return self
        if self.t is None and self.mechanism in sums():
            return self._fit_power_blocks(X)
        self.partial_fit(X)
        if self.rows_in_epoch() > 0:
            self._close()
        return self

    def _fit_power_blocks(self, X: Any) -> "SubspaceEstimator":
        """One release of exactly the rows X: a power iteration's T blocks
        (power_blocks(): 3 cold, 1 warm by default) cut by index at the rows
        where the library cuts an epoch of exactly len(X) rows
        (dps_power_block_start), as dps-estimate --method power cuts a file."""
        A, is_torch = _as_rows(X, self.d_)
        self._start(A.shape[1])
        n, T = A.shape[0], min(self.power_blocks_next(), A.shape[0])
        L = native.lib()
        for i in range(max(T, 1)):
            lo, hi = (L.dps_power_block_start(n, T, i), L.dps_power_block_start(n, T, i + 1)) if T else (0, n)
            if hi > lo:
                self.partial_fit(A[lo:hi])
            if i + 1 < T:
                self.end_block(_by="fit")
        self._torch_out = is_torch
        self._close()
        return self

    def power_blocks_next(self, d: Optional[int] = None) -> int:
        """T: the blocks by index of the open epoch (or the next one):
        power_blocks, or 3 until a release and 1 after; 0 when no group is a
        power iteration (the gaussian mechanism's groups up to dense_max_d
        are dense).  Known once the estimator has its row dimension: from
        its first rows, or d given here (which starts it)."""
        if d is not None:
            self._start(int(d))
        return int(native.lib().dps_estimator_power_blocks(self._est)) if self._est else 0

    def noise_edges(self, d: int) -> List[Tuple[str, float]]:
        """Per parameter group (one, the whole row, without groups): what
        releases its basis, and the eigenvalue of the release's sum of
        x_g x_g^T below which a direction is lost in its noise (the noise's
        spectral norm; NaN for a method with no such rule), for rows of d
        columns: the library's plan (dps_config_plan), public quantities
        only.  A direction holding a share e of each unit row's energy
        shows only when e * rows clears it."""
        c = self._config(int(d))
        p = native.Plan()
        native.check(native.lib().dps_config_plan(c.ptr, ctypes.byref(p)), "planning")
        return [(p.method[g].decode(), p.floor[g] * p.rows if p.floor[g] > 0 else math.nan) for g in range(p.groups)]

    def end_block(self, _by: str = "caller") -> "SubspaceEstimator":
        """End the open epoch's power block now: every power group takes its
        noisy step on the rows given since its last (none: a step on the
        noise alone).  For callers that cut blocks themselves (a uniformly
        random assignment of rows to blocks: dpsubspace.torch.PrivateBasis);
        the guarantee is the epoch's for any cuts that do not depend on the
        rows' values (under replacing one row).  Under adding or removing
        one, what the cuts cost depends on how they were chosen: such a
        release's rho_add_remove is None (the caller states it).  ValueError
        without a power group."""
        if not self._est:
            raise ValueError("no rows yet: the estimator has not started")
        rc = native.lib().dps_estimator_end_block(self._est)
        if rc == native.DPS_EINVAL:
            raise ValueError(f"{self.mechanism} here has no power group: nothing to cut into blocks")
        native.check(rc, "ending the block")
        self._cuts += 1
        self._cut_by = "caller" if self._cut_by == "caller" else _by
        return self

    def rows_in_epoch(self) -> int:
        """Rows waiting in the open epoch."""
        if not self._est:
            return 0
        st = native.Stats()
        native.lib().dps_estimator_get_stats(self._est, ctypes.byref(st))
        return int(st.rows_in_epoch)

    # ------------------------------------------------------------ releases
    def _close(self) -> Release:
        L = native.lib()
        most_steps = self.power_blocks_next() + self._cuts  # the index blocks and the caller's cuts: at most
        cut_by, self._cuts, self._cut_by = self._cut_by, 0, None
        snap = ctypes.c_void_p()
        native.check(L.dps_estimator_close_epoch(self._est, ctypes.byref(snap)), "closing the epoch")
        try:
            info = native.SnapshotInfo()
            L.dps_snapshot_get_info(snap, ctypes.byref(info))
            V = L.dps_snapshot_basis(snap)
            basis = None
            if V:
                basis = np.ctypeslib.as_array(V, shape=(info.k, info.d)).copy()
            rel = Release(epoch=int(info.epoch), status=native.STATUS_NAMES.get(info.status, "unknown"),
                          reason=(info.reason or b"").decode(), rows_used=int(info.rows_used),
                          rho_epoch=info.epoch_cost.rho, delta_epoch=info.epoch_cost.delta,
                          noise_level=info.noise_level if info.noise_level > 0 else math.nan,
                          weak=bool(L.dps_snapshot_weak(ctypes.byref(info))), basis=basis,
                          power_blocks_run=int(L.dps_snapshot_power_steps(snap)),
                          group_noise_level=tuple(float(L.dps_snapshot_group_noise_level(snap, g))
                                                  for g in range(max(1, info.groups))),
                          group_weak=tuple(bool(L.dps_snapshot_group_weak(snap, g))
                                           for g in range(max(1, info.groups))))
            if self.mechanism in sums():
                # the library reports the steps of a release; one not made public is bounded by most_steps
                steps = max(1, rel.power_blocks_run if basis is not None else most_steps)
                rel.rho_add_remove = _rho_add_remove(rel.rho_epoch, steps, cut_by)
        finally:
            L.dps_snapshot_destroy(ctypes.byref(snap))
        self._spent = L.dps_estimator_spent(self._est)
        self.releases_.append(rel)
        return rel

    def _central(self, A: np.ndarray) -> Release:
        L, (n, d), k = native.lib(), A.shape, self.n_components
        V = np.zeros((k, d), dtype=np.float32)
        if self.workers is None:  # the central SVDs use OpenBLAS threads, as dps-estimate's (same rounding)
            L.dps_blas_set_threads(native.ConfigHandle(d, k)["workers"])
        else:
            L.dps_blas_set_threads(int(self.workers))
        if self.mechanism == "topk":
            X = np.where(np.isfinite(A).all(axis=1, keepdims=True), A, 0).astype(np.float32)
            native.check(L.dps_topk_basis(X.ctypes.data_as(native.c_float_p), n, d, k,
                                          V.ctypes.data_as(native.c_float_p), None), "the top-k SVD")
            return Release(len(self.releases_), "released", f"NOT PRIVATE: the exact top-{k} subspace of the rows",
                           n, 0.0, 0.0, math.nan, False, V, rho_add_remove=0.0)
        costs = {"analyze-gauss": lambda: native.Zcdp(self.rho, self.delta),
                 "iterative": lambda: L.dps_zcdp_from_pure(self.eps),
                 "cov-laplace": lambda: L.dps_zcdp_from_pure(self.eps),
                 "cov-gaussian": lambda: L.dps_zcdp_from_dp(self.eps, self.delta)}
        if self.mechanism == "exact":
            plan = native.ExactStats()
            native.check(L.dps_exact_plan(k, self.eps, self.delta, 0, ctypes.byref(plan)), "exact")
            cost = plan.cost  # (eps, delta + the candidates' sampling delta): public before it runs
        else:
            cost = costs[self.mechanism]()
        if not self._acc:
            cap = native.Budget(self.cap_rho or 0.0, self.cap_eps or 0.0, self.delta_target)
            native.check(L.dps_accountant_new(ctypes.byref(self._acc), ctypes.byref(cap), None), "the budget cap")
        C = None
        if self.mechanism in ("iterative", "cov-laplace", "cov-gaussian"):  # C before any charge (not private)
            C = np.zeros((d, d), dtype=np.float64)
            native.check(L.dps_cov_accumulate(A.ctypes.data_as(native.c_float_p), n, d,
                                              C.ctypes.data_as(native.c_dbl_p), None), self.mechanism)
        # The library's end of a release (dps_release_decide, the mechanism, dps_release_outcome): the cap,
        # then the charge before any noise is drawn.  The central mechanisms are not Gaussian mechanisms of
        # delta 0: charged as zCDP (the CKS conversion).
        info = native.SnapshotInfo(epoch=len(self.releases_))
        if L.dps_release_decide(self._acc, cost, native.DPS_CHARGE_ZCDP, None, None,
                                ctypes.byref(info)) != native.DPS_RELEASE_RUN:
            return Release(len(self.releases_), native.STATUS_NAMES[info.status], info.reason.decode(), n, 0.0, 0.0,
                           math.nan, False, None)
        self._spent = L.dps_accountant_spent(self._acc)
        rng = native.new_rng(self.seed, _CENTRAL_LABEL, self._central_draws)
        self._central_draws += 1
        Vp = V.ctypes.data_as(native.c_float_p)
        released = ctypes.c_int(1)
        try:
            if self.mechanism == "analyze-gauss":  # it spends (2 rho', delta) for the rho' it is given
                rc = L.dps_analyze_gauss(A.ctypes.data_as(native.c_float_p), n, d, k, self.rho / 2, self.delta,
                                         rng, Vp, ctypes.byref(released))
            elif self.mechanism == "exact":
                rc = L.dps_exact_subspace(A.ctypes.data_as(native.c_float_p), n, d, k, self.eps, self.delta, 0,
                                          rng, Vp, ctypes.byref(released), None)
            elif self.mechanism == "iterative":
                p = native.IterativeParams(k, self.eps, 0.0, 0)  # subspace only, uniform split (dps-estimate's)
                rc = L.dps_cov_iterative(C.ctypes.data_as(native.c_dbl_p), n, d, ctypes.byref(p), rng, Vp, None,
                                         None, None)
            else:
                Ch = np.zeros_like(C)
                Cp, Chp = C.ctypes.data_as(native.c_dbl_p), Ch.ctypes.data_as(native.c_dbl_p)
                rc = (L.dps_cov_laplace(Cp, n, d, self.eps, rng, Chp) if self.mechanism == "cov-laplace"
                      else L.dps_cov_gaussian(Cp, n, d, self.eps, self.delta, rng, Chp))
                if rc == native.DPS_OK:
                    rc = L.dps_cov_topk(Chp, d, k, Vp, None)
        finally:
            L.dps_rng_destroy(ctypes.byref(rng))
        why = {"analyze-gauss": "the noisy eigengap was too small (Analyze Gauss said FAIL): budget spent",
               "exact": "no subspace held a stable majority of the rows (FAIL): budget spent"}
        # an error after the charge: FAILED, budget spent, as dps-estimate's; info.reason points into these
        fail, who, buf = why.get(self.mechanism, "").encode(), self.mechanism.encode(), ctypes.create_string_buffer(256)
        L.dps_release_outcome(ctypes.byref(info), rc, int(not released.value), fail, who, buf, len(buf))
        ok = info.status == 0
        return Release(len(self.releases_), native.STATUS_NAMES[info.status], info.reason.decode(), n, cost.rho,
                       cost.delta, math.nan, False, V if ok else None)

    def _kind(self) -> int:
        """What each release is charged as (the library's dps_charge_kind): the
        gaussian and power releases are Gaussian mechanisms (a total of them
        alone is stated by the exact Gaussian profile), the others not."""
        if self.mechanism not in streaming():
            return native.DPS_CHARGE_ZCDP
        agg = ctypes.c_int()
        native.check(native.lib().dps_aggregator_from_name(self.mechanism.encode(), ctypes.byref(agg)), "mechanism")
        return int(native.lib().dps_aggregator_charge_kind(agg.value))

    # ------------------------------------------------------------- results
    @property
    def components_(self) -> Any:
        """The last released basis: k x d orthonormal rows (with groups, group
        g's rows are zero outside its columns); a torch tensor when the rows
        given last were torch tensors."""
        for rel in reversed(self.releases_):
            if rel.basis is not None:
                if self._torch_out:
                    import torch
                    return torch.from_numpy(rel.basis.copy())
                return rel.basis
        raise AttributeError("no basis released yet (call fit(X); see releases_ for refused or failed releases)")

    @property
    def spent_(self) -> Tuple[float, float]:
        """(rho, delta) spent by every release so far, under replacing one row."""
        return (self._spent.rho, self._spent.delta)

    def eps_at(self, delta: float, adjacency: str = "replace-one") -> float:
        """The releases so far as (eps, delta)-DP at total delta (inf when
        their own delta already reaches it), as the library states it: the
        gaussian and power releases are Gaussian mechanisms, and their total
        is the Gaussian mechanism of mu = sqrt(2 rho), whose eps is exact
        (dps_gaussian_eps_at: rho 1 at 1e-5 is 6.57); the other mechanisms'
        total by the conversion of zCDP of Canonne-Kamath-Steinke 2020
        (dps_zcdp_eps_total: 7.08).  Under `adjacency`: "replace-one"
        (default: the library's statement, rows of a public count, from
        spent_) or "add-remove" (adding or removing one row, from
        rho_add_remove(), with what it covers: the bases, not the row counts
        the releases publish; the adjacency of dpsubspace.Accountant, which
        composes the same charges with DP-SGD's steps by its own method)."""
        if not 0 < delta < 1:
            raise ValueError(f"delta must be in (0, 1), got {delta}")
        L = native.lib()
        if adjacency == "replace-one":
            if self._est:
                return float(L.dps_estimator_eps(self._est, delta))
            if self._acc:
                return float(L.dps_accountant_eps(self._acc, delta))
            return 0.0  # nothing charged
        if adjacency == "add-remove":
            spent = native.Zcdp(self.rho_add_remove(), self._spent.delta)
            return float(L.dps_zcdp_eps_total_kind(spent, self._kind(), delta))
        raise ValueError(f"adjacency must be 'replace-one' or 'add-remove', got {adjacency!r}")

    def rho_add_remove(self) -> float:
        """zCDP rho of everything released so far under ADDING OR REMOVING one
        row (the adjacency of DP-SGD's accounting, dpsubspace.Accountant),
        taking the calls' rows as ONE stream (the safe reading; see below
        for releases on separate samples).

        WHAT IT COVERS: the released bases (and what is computed from them
        and public facts: noise levels, statuses), for neighbours that show
        the same public shape -- the same row counts, releases and steps.
        Each Release here publishes its rows_used, and how many releases
        and steps a run made can depend on how many rows it had (an epoch
        of t*m rows that one more row fills; fit() of fewer rows than
        power_blocks), all of which adding a row changes: the statement is
        for rows whose count is public.  Where the count is the private
        thing (a Poisson sample), publish none of these, as
        dpsubspace.torch.PrivateBasis does (rows_used None, one release and
        T steps whatever the sample).

        The argument, for the sum mechanisms (gaussian, power; groups too):
        each release is a Gaussian mechanism on C = sum x x^T (or on C X for
        a power step) with noise s = 1/sqrt(rho) calibrated to the
        replace-one sensitivity sqrt 2.  Adding or removing a unit row x
        moves C by x x^T, ||x x^T||_F = ||x||^2 <= 1 (and a group's block or
        C X by at most as much: ||x x^T X||_F = ||X^T x|| <= 1), so one step
        is 1/(2 s^2) = rho/2-zCDP.  But rows are cut into epochs (and power
        steps into blocks) BY INDEX: a row added at position p shifts every
        later row by one, so every later step sees one row in and one out, a
        replacement (rho).  Bound: rho/2 when the run made ONE step (one
        release of one step: a gaussian fit(), a warm power fit()), else
        the sum over releases of the larger of rho_e times its steps and
        its own Release.rho_add_remove.  When each call reads its own set
        of examples, chosen without regard to the others' positions (a
        fresh Poisson sample per release, as dpsubspace.torch does), an
        added example is at most one row of each call's input, and each
        release costs its own Release.rho_add_remove (_rho_add_remove has
        the cases: rho/2 for one step, T rho for T blocks, more for fit()'s
        own cuts at T >= 5, None for the caller's cuts, which this method
        then refuses).  The bucket aggregators, covariance and Analyze Gauss
        are stated for a fixed, public row count only: ValueError for them.

        Floating point (as for every guarantee here, the arguments are for
        exact sums, with rounding bounded where it can move them): a dense C
        is summed in double, whose rounding moves C by at most 2 n^2 2^-53
        under adding a row (second_moment.h; 4e-7 at n = 60 000); the power
        iteration forms every product in double too, whose rounding moves a
        step by at most about 2 n (n + sqrt(b) d) 2^-53 under adding or
        replacing a row (power_iteration.c; 7e-6 at n = 60 000, d = 10^5,
        b = 20), against the sensitivities 1 and sqrt 2.  Neither is added
        to the noise; the Gaussian draws' own floating-point caveat is rng.c's.
        kron: every entry's noise is s = sqrt(2/rho) (replace-one moves of up
        to 4 in squares, moment_groups.c); adding a unit row x moves a kron
        group's two sides by X^T X and X X^T, ||.||_F^2 <= ||x_g||^4 each, and
        a dense or power group by ||x_g||^4, so the squares add up to at most
        2 sum_g ||x_g||^4 <= 2 and one step is 2/(2 s^2) = rho/2-zCDP: the
        same statement as gaussian's, with the same cases for the blocks of
        its power groups.
        """
        if self.mechanism == "topk":
            return 0.0
        if self.mechanism not in sums():
            raise ValueError(f"the {self.mechanism} mechanism has no add/remove statement (its guarantee is for "
                             "replacing one row of a public row count); use gaussian, power or kron with DP-SGD")
        charged = [r for r in self.releases_ if r.rho > 0]
        if any(r.rho_add_remove is None for r in charged):
            raise ValueError("a release's blocks were cut by the caller (end_block): its add/remove cost is the "
                             "caller's to state")
        if len(charged) == 1 and charged[0].power_blocks_run <= 1:
            return charged[0].rho_add_remove  # one step: rho/2
        # one stream: every step of every release may see a replaced row (rho; a full epoch's last block
        # too, its last row pushed into the next epoch), or what the release states
        return sum(max(r.rho * max(1, r.power_blocks_run), r.rho_add_remove) for r in charged)

    def close(self) -> None:
        """Free the estimator (the open epoch's rows are dropped, unreleased)."""
        if self._est:
            native.lib().dps_estimator_destroy(ctypes.byref(self._est))
        if self._acc:
            native.lib().dps_accountant_destroy(ctypes.byref(self._acc))

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass

    def __enter__(self) -> "SubspaceEstimator":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
