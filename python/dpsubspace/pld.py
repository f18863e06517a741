"""pld.py - privacy loss distributions: the tightest (eps, delta) of a
composition of Poisson-subsampled Gaussian and Gaussian mechanisms, composed
by FFT.  Pure numpy.  Owns the discretisation, the composition and the
conversion to eps; accountant.py says what is composed.

THE QUANTITY.  For a pair of output laws (P, Q) of neighbouring inputs, the
privacy loss is L(o) = log(P(o) / Q(o)) with o ~ P, and the pair is
(eps, delta(eps))-indistinguishable in the direction P over Q with
    delta(eps) = E_P[(1 - e^(eps - L))_+] + P(L = +inf)
(the hockey-stick divergence).  Independent composition adds the losses, so
the composed loss's law is the convolution of the steps' laws.  A mechanism
is (eps, delta)-DP when both directions (P over Q and Q over P) are; each is
composed on its own and the worse one is reported.

THE PAIRS (add/remove adjacency; "dominating pairs" in the sense of Zhu, Dong
and Wang 2022, which compose adaptively):
  - Poisson-subsampled Gaussian, sampling rate q, noise multiplier sigma (a
    sum of per-example terms of norm <= 1 over a Poisson sample, plus
    N(0, sigma^2) per coordinate): one coordinate suffices,
        remove:  P = (1 - q) N(0, sigma^2) + q N(1, sigma^2),  Q = N(0, sigma^2)
        add:     P = N(0, sigma^2),  Q = (1 - q) N(0, sigma^2) + q N(1, sigma^2)
    (Koskela et al. 2020; dp_accounting's and Opacus' PRV pairs).
  - Gaussian mechanism of mu = sensitivity / noise sd: P = N(mu, 1),
    Q = N(0, 1), the same in both directions.  Gaussians (q = 1 steps among
    them: the Gaussian of mu = 1/sigma) compose exactly into the Gaussian of
    mu = sqrt(sum mu_i^2), composed before discretising.

PESSIMISTIC DISCRETISATION (the stated eps is an upper bound).  The loss is
put on the grid x_i = i h.  The mass of P with L in [x_i, x_(i+1)] is split
between x_i and x_(i+1) so that the mean of e^(-L) is kept ("connect the
dots", Doroshenko et al. 2022): f(y) = (1 - e^eps y)_+ is convex in
y = e^(-L), so by Jensen the split can only raise E f, i.e. delta(eps), for
every eps; and for every grid eps it keeps delta exactly (f is linear in y
between grid points), so the excess is second order in h.  Mass below the
grid's lowest point is moved up to it, mass above its highest to +inf:
raising the loss also raises delta(eps) (f increases with L).  Both moves
keep "dominates in the decreasing convex order of e^(-L)", which is
preserved by products of independent factors (condition on the others:
y -> f(c y) is convex and decreasing for c > 0), i.e. by composition; so the
composed discrete law's delta(eps) bounds the true composition's at every
eps.  The split is shifted towards x_(i+1) by a relative 1e-6 of the mass
(SPLIT_MARGIN: pessimistic) to cover the rounding of the normal CDF
differences it is computed from (relative error about 1e-12 of an
interval's mass, 1e-8 after the division by h).

COMPOSITION.  n copies by repeated squaring, each product a linear
convolution by FFT; after each product the tails that carry at most
TAIL_MASS are moved (the upper to +inf, the lower up to the lowest point
kept: both pessimistic).  The FFT's rounding is bounded in l1 by
FFT_ERROR_FACTOR log2(N) u sqrt(N) (||a||_2 + ||b||_2) (a Higham-type bound,
"Accuracy and Stability of Numerical Algorithms" sec. 24.1, with a margin);
the bounds are carried through the products (an l1 error e in one factor
adds at most e to the product, both laws having mass <= 1) and added to
delta before eps is read: delta(eps) + error <= delta_target.
"""
import dataclasses
import math
from typing import List, Sequence, Tuple

import numpy as np

GRID = 1e-4            # h: the default width of the loss grid
TAIL_MASS = 1e-15      # mass a truncation may move (per truncation)
SPLIT_MARGIN = 1e-6    # share of an interval's mass moved up to cover the CDFs' rounding
FFT_ERROR_FACTOR = 10.0
FAR = 500.0            # losses above this count as +inf when eps is read (e^FAR stays finite)
_U = 2.0 ** -53

_erfc = np.frompyfunc(math.erfc, 1, 1)


def _ncdf(x: np.ndarray) -> np.ndarray:
    """Standard normal CDF, elementwise, accurate in the left tail."""
    return _erfc(-np.asarray(x, dtype=float) / math.sqrt(2)).astype(float) / 2


def _normal_interval(lo: np.ndarray, hi: np.ndarray, mean: float, sd: float) -> np.ndarray:
    """N(mean, sd^2) mass of [lo, hi] (lo <= hi elementwise, +-inf allowed),
    as a difference of the CDF on the left of the mean and of the survival
    function on the right, so that tail intervals keep their relative
    precision."""
    a, b = (lo - mean) / sd, (hi - mean) / sd
    right = a > 0
    cdf = _ncdf(np.where(right, 0.0, b)) - _ncdf(np.where(right, 0.0, a))
    sf = _ncdf(-np.where(right, a, 0.0)) - _ncdf(-np.where(right, b, 0.0))
    return np.where(right, sf, cdf)


def _mixture_interval(lo, hi, parts: Sequence[Tuple[float, float]], sd: float) -> np.ndarray:
    return sum(w * _normal_interval(lo, hi, m, sd) for w, m in parts if w > 0)


def _normal_quantile_tail(mass: float) -> float:
    """z with P(N(0,1) > z) <= mass (bisection on erfc)."""
    lo, hi = 0.0, 40.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if math.erfc(mid / math.sqrt(2)) / 2 > mass:
            lo = mid
        else:
            hi = mid
    return hi


@dataclasses.dataclass
class Pld:
    """A discrete privacy loss law: mass[i] at loss (offset + i) h, inf at
    +inf; error bounds (in l1) the rounding carried by mass."""
    h: float
    offset: int
    mass: np.ndarray
    inf: float = 0.0
    error: float = 0.0

    @staticmethod
    def identity(h: float) -> "Pld":
        """The law of a mechanism that reads nothing: loss 0."""
        return Pld(h, 0, np.ones(1))

    def delta(self, eps: float) -> float:
        """delta(eps) of this law (without the rounding error)."""
        x = (self.offset + np.arange(len(self.mass))) * self.h
        above = x > eps
        return float(self.inf + np.sum(self.mass[above] * -np.expm1(eps - x[above])))

    def epsilon(self, delta: float) -> float:
        """The smallest eps >= 0 with delta(eps) + error <= delta (inf if none)."""
        target = delta - self.error
        if self.inf >= target:
            return math.inf
        m = self.mass
        x = (self.offset + np.arange(len(m))) * self.h
        above0 = x > 0
        if self.inf + float(np.sum(m[above0] * -np.expm1(-x[above0]))) <= target:
            return 0.0
        # eps > 0: only the points above 0 matter; those above FAR count as +inf (f <= 1: pessimistic),
        # which keeps e^(top - x) finite
        far = x > FAR
        inf = self.inf + float(m[far].sum())
        if inf >= target:
            return math.inf
        keep = above0 & ~far
        m, x = m[keep], x[keep]
        top = x[-1]
        # at eps = x_j the points strictly above it, i > j: their P-mass sp and sum m_i e^(top - x_i) sq
        sp = np.concatenate([np.cumsum(m[::-1])[::-1][1:], [0.0]])
        sq = np.concatenate([np.cumsum((m * np.exp(top - x))[::-1])[::-1][1:], [0.0]])
        d = inf + sp - np.exp(x - top) * sq
        j = int(np.nonzero(d <= target)[0][0])  # the last point has d = inf < target
        # on (x_(j-1), x_j] (on (0, x_0] for j = 0) every point from j up is above eps:
        # delta(eps) = inf + P-mass(i >= j) - e^eps sum_(i >= j) m_i e^-x_i
        lo = x[j - 1] if j else 0.0
        num = inf + sp[j] + m[j] - target
        den = (sq[j] + m[j] * math.exp(top - x[j])) * math.exp(-top)
        eps = math.log(num / den) if num > 0 and den > 0 else x[j]
        return min(max(eps, lo), x[j])


def _truncate(p: Pld, tail: float) -> Pld:
    """Move the tails carrying at most `tail` each: the upper to +inf, the
    lower up to the lowest point kept (both pessimistic)."""
    m = np.maximum(p.mass, 0.0)
    low = np.cumsum(m)
    high = np.cumsum(m[::-1])[::-1]
    i0 = int(np.searchsorted(low, tail, side="right"))     # m[:i0] sums to <= tail
    i1 = len(m) - int(np.searchsorted(high[::-1], tail, side="right"))  # m[i1:] sums to <= tail
    i0 = min(i0, len(m) - 1)
    i1 = max(i1, i0 + 1)
    kept = m[i0:i1].copy()
    kept[0] += m[:i0].sum()
    return Pld(p.h, p.offset + i0, kept, p.inf + float(m[i1:].sum()), p.error)


def _fft_size(n: int) -> int:
    best = 1 << max(0, (n - 1).bit_length())
    for f in (3, 5):
        k = 1
        while f * k < n:
            k <<= 1
        best = min(best, f * k)
    return best


def compose(a: Pld, b: Pld, tail: float = TAIL_MASS) -> Pld:
    """The law of the sum of independent losses with laws a and b."""
    if a.h != b.h:
        raise ValueError("laws on different grids")
    n = len(a.mass) + len(b.mass) - 1
    m = min(len(a.mass), len(b.mass))
    if m == 1 and a.mass.size + b.mass.size > 2 and float((a.mass if len(a.mass) == 1 else b.mass)[0]) == 1.0:
        one, other = (a, b) if len(a.mass) == 1 else (b, a)  # a law of one point of mass 1: a shift, exact
        return Pld(a.h, one.offset + other.offset, other.mass, one.inf + other.inf - one.inf * other.inf,
                   one.error + other.error)
    if m <= 64:
        c = np.convolve(a.mass, b.mass)
        # each entry a sum of at most m products: l1 error <= 2 m u |a|_1 |b|_1
        rounding = 2 * m * _U * float(np.sum(np.abs(a.mass))) * float(np.sum(np.abs(b.mass)))
    else:
        size = _fft_size(n)
        c = np.fft.irfft(np.fft.rfft(a.mass, size) * np.fft.rfft(b.mass, size), size)[:n]
        rounding = (FFT_ERROR_FACTOR * math.log2(size) * _U * math.sqrt(size)
                    * (float(np.linalg.norm(a.mass)) + float(np.linalg.norm(b.mass))))
    np.maximum(c, 0.0, out=c)  # the true masses are >= 0: clipping only shrinks the error
    if n > 64 and min(len(a.mass), len(b.mass)) > 64:
        # entries within the FFT's rounding of 0 are set to 0 (else the noise floor would stop the
        # tails' truncation and the support would grow with every product); what is zeroed joins the
        # l1 error bound
        floor = rounding / n  # far above the rounding actually seen (the l1 bound is loose), so noise goes
        small = c < floor
        rounding += float(c[small].sum())
        c[small] = 0.0
    inf = a.inf + b.inf - a.inf * b.inf
    error = a.error + b.error + a.error * b.error + rounding
    return _truncate(Pld(a.h, a.offset + b.offset, c, inf, error), tail)


def self_compose(p: Pld, count: int, tail: float = TAIL_MASS) -> Pld:
    """The law of the sum of `count` independent copies (repeated squaring)."""
    if count < 0:
        raise ValueError("count must be >= 0")
    out = Pld.identity(p.h)
    base = p
    while count:
        if count & 1:
            out = compose(out, base, tail)
        count >>= 1
        if count:
            base = compose(base, base, tail)
    return out


def _discretise(h: float, x_lo: float, x_hi: float, increasing: bool, o_of_x,
                p_parts, q_parts, sd: float, sup: float, inf_: float) -> Pld:
    """The pessimistic law of a loss L(o), monotone in o, with P and Q
    mixtures of normals of sd `sd` (parts: (weight, mean)); L's values lie
    in (inf_, sup); o_of_x inverts L on that range; the grid spans
    [x_lo, x_hi] (P-mass below it moved up to x_lo, above it to +inf)."""
    i_lo, i_hi = math.floor(x_lo / h), math.ceil(x_hi / h)
    if i_hi <= i_lo:
        i_hi = i_lo + 1
    x = np.arange(i_lo, i_hi + 1) * h
    with np.errstate(divide="ignore", invalid="ignore"):
        o = np.where(x <= inf_, -np.inf if increasing else np.inf,
                     np.where(x >= sup, np.inf if increasing else -np.inf, o_of_x(np.clip(x, inf_, sup))))
    lo, hi = (o[:-1], o[1:]) if increasing else (o[1:], o[:-1])
    pm = _mixture_interval(lo, hi, p_parts, sd)
    qm = _mixture_interval(lo, hi, q_parts, sd)
    # split interval i's P-mass pm between x_i (share a) and x_(i+1) keeping E[e^-L]:
    # a e^-x_i + (pm - a) e^-x_(i+1) = qm  (qm = E_P[e^-L; interval] = Q's mass of it)
    with np.errstate(over="ignore", invalid="ignore"):
        a = (qm * np.exp(x[:-1]) - pm * math.exp(-h)) / -math.expm1(-h)
    a = np.where(np.isfinite(a), a, 0.0)
    a = np.clip(a - SPLIT_MARGIN * pm, 0.0, pm)
    mass = np.zeros(len(x))
    mass[:-1] += a
    mass[1:] += pm - a
    # P-mass with L below x_0 (moved up to x_0) and above x_last (to +inf)
    o0, o1 = o[0], o[-1]
    if increasing:
        below = _mixture_interval(np.array([-np.inf]), np.array([o0]), p_parts, sd)[0] if o0 > -np.inf else 0.0
        above = _mixture_interval(np.array([o1]), np.array([np.inf]), p_parts, sd)[0] if o1 < np.inf else 0.0
    else:
        below = _mixture_interval(np.array([o0]), np.array([np.inf]), p_parts, sd)[0] if o0 < np.inf else 0.0
        above = _mixture_interval(np.array([-np.inf]), np.array([o1]), p_parts, sd)[0] if o1 > -np.inf else 0.0
    mass[0] += below
    return Pld(h, i_lo, mass, float(above))


def gaussian(mu: float, h: float = GRID, tail: float = TAIL_MASS) -> Pld:
    """The Gaussian mechanism of mu = sensitivity / noise sd (either direction)."""
    if not (mu >= 0) or math.isinf(mu):
        raise ValueError(f"mu must be finite and >= 0, got {mu}")
    if mu == 0:
        return Pld.identity(h)
    z = _normal_quantile_tail(tail / 4)
    o_lo, o_hi = mu - z, mu + z
    loss = lambda o: mu * o - mu * mu / 2  # noqa: E731
    return _discretise(h, loss(o_lo), loss(o_hi), True, lambda x: (x + mu * mu / 2) / mu,
                       [(1.0, mu)], [(1.0, 0.0)], 1.0, math.inf, -math.inf)


def subsampled_gaussian(q: float, sigma: float, direction: str, h: float = GRID, tail: float = TAIL_MASS) -> Pld:
    """One Poisson-subsampled Gaussian step (rate q, noise multiplier sigma),
    direction "remove" (P the mixture) or "add" (Q the mixture)."""
    if not (0.0 <= q <= 1.0):
        raise ValueError(f"sampling rate q must be in [0, 1], got {q}")
    if not (sigma > 0) or math.isinf(sigma):
        raise ValueError(f"noise multiplier sigma must be positive and finite, got {sigma}")
    if q == 0:
        return Pld.identity(h)
    if q == 1:
        return gaussian(1.0 / sigma, h, tail)
    s2 = sigma * sigma
    l1q = math.log1p(-q)
    mix = [(1 - q, 0.0), (q, 1.0)]
    one = [(1.0, 0.0)]
    z = _normal_quantile_tail(tail / 4)

    def log_ratio(o):  # log((1 - q) + q e^((2o - 1) / (2 sigma^2))), increasing in o
        t = (2 * o - 1) / (2 * s2)
        return np.logaddexp(l1q, math.log(q) + t)

    def o_of_ratio(r):  # inverse: the o with log_ratio(o) = r, for r > log(1 - q)
        return s2 * (np.log(np.expm1(r - l1q)) + l1q - math.log(q)) + 0.5

    if direction == "remove":
        o_lo, o_hi = -sigma * z, 1 + sigma * z
        x_lo, x_hi = max(float(log_ratio(o_lo)), l1q), float(log_ratio(o_hi))
        return _discretise(h, x_lo, x_hi, True, o_of_ratio, mix, one, sigma, math.inf, l1q)
    if direction == "add":
        o_lo, o_hi = -sigma * z, sigma * z
        x_lo, x_hi = -float(log_ratio(o_hi)), min(-float(log_ratio(o_lo)), -l1q)
        return _discretise(h, x_lo, x_hi, False, lambda x: o_of_ratio(-x), one, mix, sigma, -l1q,
                           -math.inf)
    raise ValueError(f"direction must be 'remove' or 'add', got {direction!r}")


DIRECTIONS = ("remove", "add")


def epsilon(events: List[Tuple[float, float, int]], mu_gaussian: float, delta: float,
            h: float = GRID, tail: float = TAIL_MASS) -> float:
    """eps at delta of `events` (q, sigma, count) of Poisson-subsampled
    Gaussian steps composed with a Gaussian of mu_gaussian: the worse of the
    two directions, each an upper bound (the module's text)."""
    # q = 1 steps are Gaussians of mu 1/sigma: composed exactly into the Gaussian, not on the grid
    mu2 = mu_gaussian ** 2 + sum(c / (s * s) for q, s, c in events if q == 1)
    sampled = [e for e in events if 0 < e[0] < 1 and e[2] > 0]  # q = 0 steps read nothing
    if not sampled:
        return gaussian_epsilon(math.sqrt(mu2), delta)
    return max(compose_direction(sampled, math.sqrt(mu2), d, h, tail).epsilon(delta) for d in DIRECTIONS)


def compose_direction(events, mu_gaussian: float, direction: str, h: float = GRID, tail: float = TAIL_MASS) -> Pld:
    out = gaussian(mu_gaussian, h, tail)
    for q, sigma, count in events:
        if count:
            out = compose(out, self_compose(subsampled_gaussian(q, sigma, direction, h, tail), count, tail), tail)
    return out


def gaussian_delta(mu: float, eps: float) -> float:
    """The exact delta(eps) of the Gaussian mechanism of mu (Balle-Wang
    2018): Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)."""
    if mu == 0:
        return 0.0
    a = math.erfc((eps / mu - mu / 2) / math.sqrt(2)) / 2
    b = math.erfc((eps / mu + mu / 2) / math.sqrt(2)) / 2
    return a - math.exp(eps) * b if b > 0 else a


def gaussian_epsilon(mu: float, delta: float) -> float:
    """The exact eps at delta of the Gaussian mechanism of mu (gaussian_delta
    inverted by bisection to 1e-12; 0 for mu = 0)."""
    if not (0 < delta < 1):
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    if mu == 0 or gaussian_delta(mu, 0.0) <= delta:
        return 0.0
    lo, hi = 0.0, 1.0
    while gaussian_delta(mu, hi) > delta:
        lo, hi = hi, 2 * hi
    while hi - lo > 1e-12 * hi:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if gaussian_delta(mu, mid) > delta else (lo, mid)
    return hi
