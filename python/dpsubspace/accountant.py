"""accountant.py - one privacy ledger for a DP-SGD run and its subspace
releases: what was composed, and its (eps, delta) by the tightest method
available (pld.py) or by Renyi DP (rdp.py).  Pure Python and numpy.

What it adds up:
  - DP-SGD steps: the Poisson-subsampled Gaussian mechanism (sampling rate
    q, noise multiplier sigma = noise sd / clipping norm), add_steps.
  - releases that are themselves such a mechanism (a one-step basis release
    on its own Poisson sample), add_sampled_release.
  - Gaussian releases (the library's gaussian and power mechanisms, and
    adaptive compositions of Gaussian mechanisms), add_zcdp(rho) with
    rho = sum over its noisy steps of sensitivity^2 / (2 sd^2): an adaptive
    composition of Gaussian mechanisms is exactly the Gaussian mechanism of
    mu = sqrt(2 rho) (Dong, Roth, Su 2022, Cor. 3.3), and it is rho-zCDP.
    A rho-zCDP release that is not Gaussian must not be passed here under
    the "pld" method (the RDP method holds for any rho-zCDP release).

METHODS (both upper bounds on eps at delta):
  "pld" (default): the privacy loss distributions of every step and release
    composed by FFT, discretised pessimistically (pld.py: its error is
    second order in the grid; on the anchors below it is within 1e-3 of
    the limit, measured by python/tests/test_accountant.py against rigorous
    brackets); both directions, the worse one.  With Gaussian releases (and
    q = 1 steps) only, the exact Gaussian profile, no grid.  At a delta
    below the rounding bound the grid carries (about 1e-9 after 1e3-1e4
    steps) the PLD states no finite eps, and RDP's, also valid, is stated.
  "rdp": Renyi DP at the orders rdp.ORDERS (Opacus' defaults and the
    integers to 256), converted by Balle et al. 2020, Thm 21.
Anchors (delta 1e-5): Tramer-Boneh's Fashion-MNIST run (q = 2048/60000,
sigma 2.15, 1160 steps) pld 2.376 (rdp 2.591); Opacus' RDP test case
(q 0.04, sigma 1.5, 2250 steps) pld 6.769 (rdp 7.32911, Opacus' value);
Abadi et al. 2016 (q 0.01, sigma 4, 10 000 steps; their moments accountant
1.26) pld 0.9 (rdp 1.035).

ADJACENCY, stated because it matters: everything summed here must hold for
ADDING OR REMOVING one example.  The library's releases are stated for
replacing one row of a public row count; SubspaceEstimator.rho_add_remove()
restates the sum mechanisms' (gaussian, power) under add/remove -- rho/2 for
a one-step release, the argument in its docstring -- and refuses for the
others.  Pass that to add_zcdp, never the replace-one rho_epoch of a
snapshot.
"""
import math
from typing import Dict, Iterable, List, Optional, Tuple

from . import pld, rdp
from .rdp import ORDERS, rdp_subsampled_gaussian  # noqa: F401  (public names)

METHODS = ("pld", "rdp")


def _check_step(q: float, sigma: float) -> None:
    if not (0.0 <= q <= 1.0):
        raise ValueError(f"sampling rate q must be in [0, 1], got {q}")
    if not (sigma > 0) or math.isinf(sigma):
        raise ValueError(f"noise multiplier sigma must be positive and finite, got {sigma}")


class Accountant:
    """The run's ledger: DP-SGD steps, sampled releases and Gaussian
    releases; get_epsilon(delta) as Opacus users expect.  Adding is O(1);
    the composition is computed when eps is asked for (and kept until the
    next addition)."""

    def __init__(self, method: str = "pld", orders: Optional[Iterable[float]] = None,
                 grid: float = pld.GRID) -> None:
        if method not in METHODS:
            raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
        if not (0 < grid <= 0.01):
            raise ValueError(f"grid must be in (0, 0.01], got {grid}")
        self.method, self.grid = method, grid
        self.orders: List[float] = rdp.check_orders(orders if orders is not None else ORDERS)
        self._events: Dict[Tuple[float, float], int] = {}  # (q, sigma) -> count, steps and sampled releases
        self.steps = 0
        self.rho = 0.0
        self.sampled_releases = 0
        self._cache: Dict[Tuple[str, float], Tuple[float, Optional[float]]] = {}

    def _add(self, q: float, sigma: float, count: int) -> None:
        _check_step(q, sigma)
        if count:
            self._events[(float(q), float(sigma))] = self._events.get((float(q), float(sigma)), 0) + count
            self._cache.clear()

    def add_steps(self, q: float, sigma: float, steps: int = 1) -> None:
        """Account `steps` DP-SGD steps at sampling rate q and noise multiplier sigma."""
        if int(steps) != steps or steps < 0:
            raise ValueError(f"steps must be a whole number >= 0, got {steps}")
        self._add(q, sigma, int(steps))
        self.steps += int(steps)

    def add_zcdp(self, rho: float) -> None:
        """Account one Gaussian release (or adaptive composition of Gaussian
        mechanisms) of rho = sum sensitivity^2 / (2 sd^2) under adding or
        removing one example (see the module's text)."""
        if not (rho >= 0) or math.isinf(rho):
            raise ValueError(f"rho must be finite and >= 0, got {rho}")
        if rho:
            self.rho += rho
            self._cache.clear()

    def add_sampled_release(self, q: float, sigma: float) -> None:
        """Account one release that is itself a Poisson-subsampled Gaussian
        mechanism (add/remove): a sum over a Poisson sample (rate q) of
        per-example terms of norm <= 1, plus N(0, sigma^2) on every
        coordinate -- a one-step gaussian or power basis release on its own
        sample, sigma = 1/sqrt(its rho) (dpsubspace.torch.PrivateBasis).
        Amplification by sampling applies to it as to a DP-SGD step; it is
        not counted in `steps`."""
        self._add(q, sigma, 1)
        self.sampled_releases += 1

    def copy(self) -> "Accountant":
        """An independent copy (the same method and sums)."""
        other = Accountant(self.method, self.orders, self.grid)
        other._events = dict(self._events)
        other.steps, other.rho, other.sampled_releases = self.steps, self.rho, self.sampled_releases
        return other

    def state_dict(self) -> dict:
        """What was charged, as plain data (to save with a checkpoint: a
        resumed run that starts a new accountant would state only what it
        charges after the restart)."""
        return {"method": self.method, "grid": self.grid, "orders": list(self.orders),
                "events": [[q, s, c] for (q, s), c in sorted(self._events.items())], "rho": self.rho,
                "steps": self.steps, "sampled_releases": self.sampled_releases}

    def load_state_dict(self, state: dict) -> None:
        """Add what a state_dict() says was charged to this (empty)
        accountant; ValueError for another method or a non-empty one."""
        if not self.empty():
            raise ValueError("load_state_dict needs an empty accountant (it would add to what this one holds)")
        if state.get("method") != self.method:
            raise ValueError(f"the state is of method {state.get('method')!r}, this accountant's is {self.method!r}")
        for q, sigma, count in state["events"]:
            if int(count) != count or count < 0:
                raise ValueError(f"a count must be a whole number >= 0, got {count}")
            self._add(q, sigma, int(count))
        self.add_zcdp(state["rho"])
        self.steps, self.sampled_releases = int(state["steps"]), int(state["sampled_releases"])

    def empty(self) -> bool:
        return not self._events and self.rho == 0

    def rdp(self) -> Dict[float, float]:
        """The composed RDP at each order."""
        out = {a: a * self.rho for a in self.orders}
        for (q, sigma), count in self._events.items():
            for a in self.orders:
                out[a] += count * rdp_subsampled_gaussian(q, sigma, a)
        return out

    def get_privacy_spent(self, delta: float) -> Tuple[float, Optional[float]]:
        """(eps, the Renyi order attaining it; None for "pld") at delta in
        (0, 1), under ADDING OR REMOVING one example.  Nothing charged is
        (0, 0)-DP: eps 0."""
        if not (0 < delta < 1):
            raise ValueError(f"delta must be in (0, 1), got {delta}")
        key = (self.method, delta)
        if key not in self._cache:
            if self.empty():
                self._cache[key] = (0.0, None if self.method == "pld" else self.orders[0])
            elif self.method == "rdp":
                self._cache[key] = rdp.eps_from_rdp(self.rdp(), delta)
            elif not self._events:
                self._cache[key] = (pld.gaussian_epsilon(math.sqrt(2 * self.rho), delta), None)
            else:
                events = [(q, s, c) for (q, s), c in sorted(self._events.items())]
                eps = pld.epsilon(events, math.sqrt(2 * self.rho), delta, self.grid)
                # at a delta near the rounding bound the grid carries (about 1e-9 after 1e3-1e4 steps), the PLD
                # can state no finite eps; RDP's bound, also valid, is stated then
                self._cache[key] = (eps, None) if math.isfinite(eps) else rdp.eps_from_rdp(self.rdp(), delta)
        return self._cache[key]

    def get_epsilon(self, delta: float) -> float:
        """eps of the run so far at delta (Opacus' name), under adding or
        removing one example."""
        return self.get_privacy_spent(delta)[0]


def noise_multiplier(target_eps: float, delta: float, sample_rate: float, steps: int, rho: float = 0.0,
                     orders: Optional[Iterable[float]] = None, base: Optional[Accountant] = None,
                     method: Optional[str] = None) -> float:
    """The smallest noise multiplier sigma (to 0.1%) with which `steps`
    Poisson-subsampled Gaussian steps at sample_rate, plus Gaussian releases
    adding up to `rho` (add/remove) and whatever `base` already holds, stay
    within (target_eps, delta) by `method` (default: base's, else "pld") --
    as Opacus' get_noise_multiplier.  ValueError if the releases alone pass
    it."""
    if not target_eps > 0:
        raise ValueError(f"target_eps must be > 0, got {target_eps}")
    if base is not None:
        start = base.copy()
        if method is not None and method != start.method:
            start = Accountant(method, start.orders, start.grid)
            start._events, start.rho = dict(base._events), base.rho
    else:
        start = Accountant(method or "pld", orders)
    start.add_zcdp(rho)
    if start.get_epsilon(delta) >= target_eps:
        raise ValueError(f"what is charged besides the steps (the releases, and what the accountant already "
                         f"holds) spends eps {start.get_epsilon(delta):.3g} alone, >= the target {target_eps:g}: "
                         "raise the target or charge less")

    def eps(sigma: float) -> float:
        acc = start.copy()
        acc.add_steps(sample_rate, sigma, steps)
        return acc.get_epsilon(delta)

    return boundary(lambda sigma: eps(sigma) <= target_eps, 0.05, 1.0, 1e-3, limit=1e4,
                    what=f"no sigma below 1e4 reaches eps {target_eps:g}")[1]


def rho_for_eps(target_eps: float, delta: float, orders: Optional[Iterable[float]] = None,
                method: str = "pld") -> float:
    """The rho of the Gaussian release whose (eps, delta) by `method` is
    target_eps: the whole budget in rho units (to split it between steps and
    releases)."""
    def eps_of(rho: float) -> float:
        acc = Accountant(method, orders)
        acc.add_zcdp(rho)
        return acc.get_epsilon(delta)
    return boundary(lambda rho: eps_of(rho) >= target_eps, 0.0, 1.0, 1e-6)[0]


def boundary(pred, lo: float, hi: float, rel: float, limit: float = math.inf, what: str = "") -> Tuple[float, float]:
    """(a, b) with pred(a) false (or a = lo) and pred(b) true, b - a <= rel b, for
    a pred that turns from false to true once as x grows: hi doubles until
    pred(hi) (ValueError(what) past limit), then bisection."""
    while not pred(hi):
        lo, hi = hi, hi * 2
        if hi > limit:
            raise ValueError(what)
    while hi - lo > rel * hi:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if pred(mid) else (mid, hi)
    return lo, hi
