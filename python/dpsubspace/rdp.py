"""rdp.py - Renyi DP of the Poisson-subsampled Gaussian at integer and
fractional orders, and the conversion of composed RDP to (eps, delta).
Pure Python (math only).  The accountant's second method and its
cross-check of the PLD (pld.py); owns ORDERS.

The mechanism's output law on D + x is mu = (1 - q) mu0 + q mu1 with
mu0 = N(0, sigma^2), mu1 = N(1, sigma^2) (one coordinate suffices), and its
RDP of order a under add/remove is log A_a / (a - 1) with A_a =
E_mu0[(mu / mu0)^a] (Mironov, Talwar, Zhang 2019: the other direction is no
larger).
  - integer a: by the binomial theorem, with E_mu0[(mu1 / mu0)^k] =
    exp((k^2 - k) / (2 sigma^2)),
        A_a = sum_{k=0}^{a} C(a, k) (1 - q)^(a - k) q^k exp((k^2 - k) / (2 sigma^2))
    (exact: a finite sum).
  - fractional a: the integrand ((1 - q) + q r(z))^a, r = mu1 / mu0, is
    expanded by the generalised binomial series in q r / (1 - q) below
    z0 = sigma^2 log(1/q - 1) + 1/2 (where q r = 1 - q) and in
    (1 - q) / (q r) above it, both convergent there; term k integrates in
    closed form, mu0 r^j = N(j, sigma^2) e^((j^2 - j) / (2 sigma^2)):
        A_a = sum_k C(a, k) [ (1 - q)^(a-k) q^k e^((k^2 - k)/(2 s^2)) Phi((z0 - k)/s)
                            + q^(a-k) (1 - q)^k e^((j^2 - j)/(2 s^2)) Phi((j - z0)/s) ],  j = a - k,
    Past k > a the coefficients alternate in sign and the terms shrink (the
    integrands are below 1 where they are integrated), so the series'
    remainder is at most its first omitted term: the sum stops when a term
    is below 1e-12 of the total and that term is added (an upper bound).
Conversion (Balle, Barthe, Gaboardi, Hsu, Sato 2020, Thm 21; the form
Opacus uses): eps = min_a rdp(a) + log((a - 1) / a) - (log delta + log a) / (a - 1).
"""
import math
from typing import Dict, Iterable, List, Tuple

# Opacus' default orders (so the RDP method reproduces its figures), then the
# integers to 256 (more orders can only lower the minimum).
ORDERS: List[float] = [1 + x / 10.0 for x in range(1, 100)] + list(range(12, 257))


def _log_add(a: float, b: float) -> float:
    if a == -math.inf:
        return b
    if b == -math.inf:
        return a
    m = max(a, b)
    return m + math.log1p(math.exp(-abs(a - b)))


def _log_sub(a: float, b: float) -> float:
    """log(e^a - e^b) for a >= b."""
    if b == -math.inf:
        return a
    if a <= b:
        return -math.inf
    return a + math.log(-math.expm1(b - a))


def _log_phi(x: float) -> float:
    """log of the standard normal CDF at x."""
    if x > -30:
        return math.log(math.erfc(-x / math.sqrt(2)) / 2)
    # asymptotic series of the Mills ratio: Phi(x) ~ phi(x)/|x| (1 - 1/x^2 + 3/x^4)
    return -x * x / 2 - math.log(-x) - 0.5 * math.log(2 * math.pi) + math.log1p(-1 / (x * x) + 3 / x ** 4)


def _log_a_int(q: float, sigma: float, a: int) -> float:
    lq, l1q = math.log(q), math.log1p(-q)
    acc = -math.inf
    for k in range(a + 1):
        acc = _log_add(acc, math.lgamma(a + 1) - math.lgamma(k + 1) - math.lgamma(a - k + 1)
                       + (a - k) * l1q + k * lq + (k * k - k) / (2 * sigma * sigma))
    return acc


def _log_a_frac(q: float, sigma: float, a: float) -> float:
    s2 = sigma * sigma
    lq, l1q = math.log(q), math.log1p(-q)
    z0 = s2 * math.log(1 / q - 1) + 0.5
    pos, neg = -math.inf, -math.inf
    logc, sign = 0.0, 1
    k = 0
    while True:
        j = a - k
        t0 = logc + (a - k) * l1q + k * lq + (k * k - k) / (2 * s2) + _log_phi((z0 - k) / sigma)
        t1 = logc + j * lq + k * l1q + (j * j - j) / (2 * s2) + _log_phi((j - z0) / sigma)
        term = _log_add(t0, t1)
        if sign > 0:
            pos = _log_add(pos, term)
        elif sign < 0:
            neg = _log_add(neg, term)
        total = _log_sub(pos, neg) if pos > neg else pos
        if k > a + 1 and term < total + math.log(1e-12):
            pos = _log_add(pos, term)  # the remainder of an alternating series: at most this term
            break
        if k > 10 ** 6:
            raise ArithmeticError(f"the RDP series at order {a} did not converge")
        # C(a, k + 1) = C(a, k) (a - k) / (k + 1)
        f = a - k
        if f == 0:
            break
        logc += math.log(abs(f)) - math.log(k + 1)
        sign = sign if f > 0 else -sign
        k += 1
    return _log_sub(pos, neg)


def rdp_subsampled_gaussian(q: float, sigma: float, order: float) -> float:
    """RDP at `order` > 1 of ONE Poisson-subsampled Gaussian step (add/remove
    adjacency), sampling rate q in [0, 1], noise multiplier sigma > 0."""
    if not (0.0 <= q <= 1.0):
        raise ValueError(f"sampling rate q must be in [0, 1], got {q}")
    if not (sigma > 0) or math.isinf(sigma):
        raise ValueError(f"noise multiplier sigma must be positive and finite, got {sigma}")
    if not order > 1 or math.isinf(order):
        raise ValueError(f"order must be > 1 and finite, got {order}")
    if q == 0:
        return 0.0
    if q == 1:
        return order / (2 * sigma * sigma)
    log_a = _log_a_int(q, sigma, int(order)) if float(order).is_integer() else _log_a_frac(q, sigma, order)
    return max(0.0, log_a / (order - 1))


def eps_from_rdp(rdp: Dict[float, float], delta: float) -> Tuple[float, float]:
    """(eps, the order attaining it) at delta of composed RDP (the module's
    conversion); (0.0, first order) when every order's RDP is 0."""
    if not (0 < delta < 1):
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    orders = list(rdp)
    if all(v == 0 for v in rdp.values()):
        return 0.0, orders[0]
    eps, a = min((rdp[a] + math.log((a - 1) / a) - (math.log(delta) + math.log(a)) / (a - 1), a) for a in orders)
    return max(0.0, eps), a


def check_orders(orders: Iterable[float]) -> List[float]:
    out = [float(a) if not float(a).is_integer() else int(a) for a in orders]
    if not out or any(not a > 1 or math.isinf(a) for a in out):
        raise ValueError("orders must be finite numbers > 1")
    return out
