"""accountant.py - one Renyi-DP ledger for a DP-SGD run and its subspace releases
(issue 12 item 4; DESIGN 7.4).  Pure Python (math only).

What it adds up, at each order a of ORDERS:
  - DP-SGD steps: the Poisson-subsampled Gaussian mechanism (sampling rate q,
    noise multiplier sigma = noise sd / clipping norm), whose RDP at an
    INTEGER order a >= 2 is (Mironov, Talwar, Zhang 2019, sec. 3.3)
        eps(a) = log A_a / (a - 1),
        A_a = sum_{k=0}^{a} C(a, k) (1 - q)^(a - k) q^k exp((k^2 - k) / (2 sigma^2)).
    Why: the mechanism's output law on D + x is the mixture
    mu = (1 - q) mu0 + q mu1 of mu0 = N(0, sigma^2) and mu1 = N(1, sigma^2)
    (one coordinate suffices); A_a = E_mu0[(mu / mu0)^a] expands by the
    binomial theorem, and E_mu0[(mu1 / mu0)^k] = exp((k^2 - k) / (2 sigma^2))
    for integer k.  Only integer orders are used, so no series is
    truncated: every value is exact up to floating point (a valid bound; a
    fractional order could only lower eps a little).
  - rho-zCDP releases (the subspace snapshots): rho-zCDP is (a, a rho)-RDP
    for every a > 1.
  - Composition: RDP adds at each order.
  - (eps, delta): eps = min over a of rdp(a) + log(1 / delta) / (a - 1)
    (Mironov 2017, Prop. 3), the order that attains it reported.

ADJACENCY, stated because it matters: everything summed here must hold for
ADDING OR REMOVING one example (the subsampled Gaussian's RDP above is for
that).  The library's releases are stated for replacing one row of a public
row count; SubspaceEstimator.rho_add_remove() restates the sum mechanisms'
(gaussian, power) under add/remove -- rho/2 for a one-step release, the
argument in its docstring -- and refuses for the others.  Pass that to
add_zcdp, never the replace-one rho_epoch of a snapshot.
"""
import math
from typing import Dict, Iterable, List, Optional, Tuple

ORDERS: List[int] = list(range(2, 257))


def _log_add(terms: List[float]) -> float:
    m = max(terms)
    return m + math.log(sum(math.exp(t - m) for t in terms))


def rdp_subsampled_gaussian(q: float, sigma: float, order: int) -> float:
    """RDP at integer `order` >= 2 of ONE Poisson-subsampled Gaussian step
    (add/remove adjacency), sampling rate q in [0, 1], noise multiplier sigma > 0."""
    if not (0.0 <= q <= 1.0):
        raise ValueError(f"sampling rate q must be in [0, 1], got {q}")
    if not (sigma > 0) or math.isinf(sigma):
        raise ValueError(f"noise multiplier sigma must be positive and finite, got {sigma}")
    if int(order) != order or order < 2:
        raise ValueError(f"order must be an integer >= 2, got {order}")
    a = int(order)
    if q == 0:
        return 0.0
    if q == 1:
        return a / (2 * sigma * sigma)
    lq, l1q = math.log(q), math.log1p(-q)
    terms = [math.lgamma(a + 1) - math.lgamma(k + 1) - math.lgamma(a - k + 1) + (a - k) * l1q + k * lq
             + (k * k - k) / (2 * sigma * sigma) for k in range(a + 1)]
    return max(0.0, _log_add(terms) / (a - 1))


class Accountant:
    """The run's ledger: DP-SGD steps and rho-zCDP releases, composed at each
    order of `orders` (integers >= 2); get_epsilon(delta) as Opacus users expect."""

    def __init__(self, orders: Optional[Iterable[int]] = None) -> None:
        self.orders: List[int] = list(orders) if orders is not None else list(ORDERS)
        if not self.orders or any(int(a) != a or a < 2 for a in self.orders):
            raise ValueError("orders must be integers >= 2")
        self._rdp: Dict[int, float] = {a: 0.0 for a in self.orders}
        self.steps = 0
        self.rho = 0.0
        self.sampled_releases = 0

    def add_steps(self, q: float, sigma: float, steps: int = 1) -> None:
        """Account `steps` DP-SGD steps at sampling rate q and noise multiplier sigma."""
        if int(steps) != steps or steps < 0:
            raise ValueError(f"steps must be a whole number >= 0, got {steps}")
        for a in self.orders:
            self._rdp[a] += steps * rdp_subsampled_gaussian(q, sigma, a)
        self.steps += int(steps)

    def add_zcdp(self, rho: float) -> None:
        """Account one release that is rho-zCDP under adding or removing one
        example (see ADJACENCY in the module's text)."""
        if not (rho >= 0) or math.isinf(rho):
            raise ValueError(f"rho must be finite and >= 0, got {rho}")
        for a in self.orders:
            self._rdp[a] += a * rho
        self.rho += rho

    def add_sampled_release(self, q: float, sigma: float) -> None:
        """Account one release that is itself a Poisson-subsampled Gaussian
        mechanism (add/remove): a sum over a Poisson sample (rate q) of
        per-example terms of norm <= 1, plus N(0, sigma^2) on every
        coordinate -- a one-step gaussian or power basis release on its own
        sample, sigma = 1/sqrt(its rho) (dpsubspace.torch.PrivateBasis).
        Amplification by sampling applies to it as to a DP-SGD step; it is
        not counted in `steps`."""
        for a in self.orders:
            self._rdp[a] += rdp_subsampled_gaussian(q, sigma, a)
        self.sampled_releases += 1

    def copy(self) -> "Accountant":
        """An independent copy (the same orders and sums)."""
        other = Accountant(self.orders)
        other._rdp = dict(self._rdp)
        other.steps, other.rho, other.sampled_releases = self.steps, self.rho, self.sampled_releases
        return other

    def rdp(self) -> Dict[int, float]:
        """The composed RDP at each order."""
        return dict(self._rdp)

    def get_privacy_spent(self, delta: float) -> Tuple[float, int]:
        """(eps, the order attaining it) for the given delta in (0, 1), under
        ADDING OR REMOVING one example (the adjacency of everything summed
        here).  Nothing charged (RDP 0 at every order: the outputs' law does
        not depend on the data) is (0, 0)-DP: (0.0, first order), not the
        conversion's log(1/delta)/(a - 1), which is only an upper bound."""
        if not (0 < delta < 1):
            raise ValueError(f"delta must be in (0, 1), got {delta}")
        if all(v == 0 for v in self._rdp.values()):
            return 0.0, self.orders[0]
        return min((self._rdp[a] + math.log(1 / delta) / (a - 1), a) for a in self.orders)

    def get_epsilon(self, delta: float) -> float:
        """eps of the run so far at delta (Opacus' name), under adding or
        removing one example."""
        return self.get_privacy_spent(delta)[0]


def noise_multiplier(target_eps: float, delta: float, sample_rate: float, steps: int, rho: float = 0.0,
                     orders: Optional[Iterable[int]] = None, base: Optional[Accountant] = None) -> float:
    """The smallest noise multiplier sigma (to 0.1%) with which `steps`
    Poisson-subsampled Gaussian steps at sample_rate, plus releases adding up
    to `rho` (zCDP, add/remove) and whatever `base` already holds, stay
    within (target_eps, delta) -- as Opacus' get_noise_multiplier.
    ValueError if the releases alone pass it."""
    start = base.copy() if base is not None else Accountant(orders)
    start.add_zcdp(rho)
    if start.get_epsilon(delta) >= target_eps:
        raise ValueError(f"the releases alone spend eps {start.get_epsilon(delta):.3g} >= {target_eps:g}")

    def eps(sigma: float) -> float:
        acc = start.copy()
        acc.add_steps(sample_rate, sigma, steps)
        return acc.get_epsilon(delta)

    return boundary(lambda sigma: eps(sigma) <= target_eps, 0.05, 1.0, 1e-3, limit=1e4,
                    what=f"no sigma below 1e4 reaches eps {target_eps:g}")[1]


def rho_for_eps(target_eps: float, delta: float, orders: Optional[Iterable[int]] = None) -> float:
    """The zCDP rho whose (eps, delta) by this accountant's conversion is
    target_eps: the whole budget in rho units (to split it between steps and
    releases)."""
    return boundary(lambda rho: _eps_of_rho(rho, delta, orders) >= target_eps, 0.0, 1.0, 1e-6)[0]


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


def _eps_of_rho(rho: float, delta: float, orders: Optional[Iterable[int]]) -> float:
    acc = Accountant(orders)
    acc.add_zcdp(rho)
    return acc.get_epsilon(delta)
