"""noise.py - the randomness a DP-SGD run's privacy rests on: Gaussian noise
and Poisson sampling, from the library's generator (libsodium's secure
random bytes; dps_rng), or from a labelled seeded stream when a test asks
for reproducibility (NOT private).  torch's and numpy's generators are not
cryptographically secure and are never used for these."""
import ctypes
import math
from typing import Optional

import numpy as np

from . import native


class NoiseSource:
    """Gaussian noise and Poisson samples.  seed=None: secure; an int: the
    seeded stream labelled `label` (tests and reproducible experiments only)."""

    def __init__(self, seed: Optional[int] = None, label: str = "dpsubspace noise") -> None:
        self._rng = native.new_rng(seed, label.encode())
        self.seeded = seed is not None

    def gaussian(self, sigma: float, n: int) -> np.ndarray:
        """n iid N(0, sigma^2) draws as float32."""
        out = np.empty(n, dtype=np.float32)
        if n:
            native.lib().dps_rng_gaussian_fill_f(self._rng, float(sigma), out.ctypes.data_as(native.c_float_p), n)
        return out

    def poisson_sample(self, n: int, rate: float) -> np.ndarray:
        """The indices of 0..n-1 each kept independently with probability rate
        (Poisson sampling), increasing.  Drawn by geometric gaps: about
        rate * n uniform draws instead of n."""
        if not 0 <= rate <= 1:
            raise ValueError(f"sampling rate must be in [0, 1], got {rate}")
        if rate == 1:
            return np.arange(n)
        out = []
        if rate == 0:
            return np.array(out, dtype=np.int64)
        L, log1q = native.lib(), math.log1p(-rate)
        i = -1
        while True:
            # the gap to the next kept index is Geometric(rate): P(gap = g) = (1-rate)^(g-1) rate
            i += 1 + int(math.log(L.dps_rng_uniform(self._rng)) / log1q)
            if i >= n:
                return np.array(out, dtype=np.int64)
            out.append(i)

    def slots(self, n: int, k: int) -> np.ndarray:
        """k distinct indices of 0..n-1, every k-subset and order equally
        likely (the first k steps of a Fisher-Yates shuffle, dps_rng_below's
        unbiased draws): where k items go among n slots."""
        if not 0 <= k <= n:
            raise ValueError(f"k must be in [0, n], got k {k}, n {n}")
        L, perm, moved = native.lib(), np.empty(k, dtype=np.int64), {}
        for i in range(k):
            j = i + int(L.dps_rng_below(self._rng, n - i))
            perm[i], moved[j] = moved.get(j, j), moved.get(i, i)
        return perm

    def below(self, n: int, count: int) -> np.ndarray:
        """count iid uniform integers of 0..n-1 (unbiased)."""
        L = native.lib()
        return np.array([L.dps_rng_below(self._rng, n) for _ in range(count)], dtype=np.int64)

    def close(self) -> None:
        if self._rng:
            native.lib().dps_rng_destroy(ctypes.byref(self._rng))

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass
