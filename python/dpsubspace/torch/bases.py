"""bases.py - where a GEP or projection step's basis V comes from, and what
each source charges the run's accountant.  Owns:

    PrivateBasis        -- released by SubspaceEstimator from the clipped
                           per-example gradients of its own Poisson sample
                           (charged: see the class)
    CollectorBasis      -- released by a dps-collector this run alone feeds
                           (charged rho_epoch per epoch)
    NoisyGradientBasis  -- from the already released noisy gradients
                           (post-processing: free)
    FixedBasis          -- given by the caller (free: the caller vouches
                           that it is public)
    WeakBasisWarning, ON_WEAK -- what a release at the random level does
    charge_basis_release -- the one rule for what a PrivateBasis release costs
    TensorExamples      -- the examples a basis samples from, as tensors

A source's update(opt, step) returns the basis for that step (k x d
orthonormal rows, or None: plain DP-SGD).  It reads from `opt` only what
both optimizers (DPOptimizer, the engine's PrivateOptimizer) have: grads
(per-example gradients, .d), noise (NoiseSource), max_grad_norm,
accountant, n.  plan(accountant, steps, d) charges what the source will
charge over `steps` steps, for a budget planned before the run.

Every basis is fixed before the step that uses it reads its batch's
gradients, from public data or earlier private outputs only: its own
Poisson sample (fresh secure randomness), released and charged first.
"""
import dataclasses
import math
import time
import warnings
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import torch

from ..accountant import Accountant
from ..estimator import Release, SubspaceEstimator
from .gradients import clip_rows


class TensorExamples:
    """The examples a basis samples from, as tensors x, y (row i is example
    i): gradients(opt, idx) are opt.grads(x[idx], y[idx])."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        if len(x) != len(y):
            raise ValueError(f"{len(x)} inputs and {len(y)} targets")
        self.x, self.y = x, y

    def __len__(self) -> int:
        return len(self.x)

    def gradients(self, opt: Any, idx: np.ndarray) -> torch.Tensor:
        ix = torch.as_tensor(idx)
        return opt.grads(self.x[ix], self.y[ix])


class FixedBasis:
    """A basis given by the caller (k x d orthonormal rows), charged nothing:
    it must be public (a random basis, or one from public data).  A
    non-private top-k of the private examples here makes the run NOT
    private (an upper bound for experiments): say so with public=False."""

    def __init__(self, basis: Any, public: bool = True) -> None:
        self.V = torch.as_tensor(np.asarray(basis, dtype=np.float32))
        self.public = public

    def update(self, opt: Any, step: int) -> Optional[torch.Tensor]:
        return self.V

    def plan(self, accountant: Accountant, steps: int, d: int) -> None:
        """Charges nothing (public)."""


class WeakBasisWarning(UserWarning):
    """A basis release at or near the random level (the library's WEAK
    flag: noise_level >= NOISE_LEVEL_WEAK): projecting on it keeps little
    of the gradient."""


# What a WEAK release does: "warn" uses it; "skip" keeps the previous basis;
# "plain" drops any basis (plain DP-SGD steps) until a release that is not
# WEAK.  Each warns once per WEAK release.
ON_WEAK = ("warn", "skip", "plain")


class _ReleasedBasis:
    """What PrivateBasis and CollectorBasis share: the basis in use, the
    examples they sample from, and what a WEAK release does (on_weak, one
    of ON_WEAK; None: the optimizer's default -- "warn" for DPOptimizer,
    "plain" for the engine).  Whatever it does, the release was charged: it
    was made.  The decision reads the release's own weak flag, which the
    mechanism computes from its released output and public sizes
    (post-processing): it costs no privacy."""

    def __init__(self, on_weak: Optional[str], data_x: Any = None, data_y: Any = None) -> None:
        if on_weak is not None and on_weak not in ON_WEAK:
            raise ValueError(f"on_weak must be one of {', '.join(ON_WEAK)}, got {on_weak!r}")
        if (data_x is None) != (data_y is None):
            raise ValueError("give both data_x and data_y, or neither (the engine binds its data loader's dataset)")
        self.on_weak = on_weak
        self.examples: Any = TensorExamples(data_x, data_y) if data_x is not None else None
        self.V: Optional[torch.Tensor] = None
        self.releases = 0
        self.weak_releases = 0

    def bind(self, examples: Any) -> None:
        """The examples to sample from (len() and gradients(opt, idx)), when
        none were given: the engine's data loader's dataset."""
        if self.examples is not None:
            raise ValueError(f"this {type(self).__name__} already has its examples (data_x, data_y): the engine "
                             "samples from its data loader's dataset; construct it without them")
        self.examples = self._examples_checked(examples)

    @staticmethod
    def _examples_checked(examples: Any) -> Any:
        if not hasattr(examples, "gradients"):
            raise TypeError("examples need len() and gradients(opt, idx)")
        return examples

    def _need_examples(self) -> Any:
        if self.examples is None:
            raise RuntimeError(f"{type(self).__name__} has no examples: give data_x and data_y, or pass it to "
                               "PrivacyEngine.make_private(subspace=...), which binds the data loader's dataset")
        return self.examples

    def _take(self, basis: Optional[np.ndarray], weak: bool, noise_level: float, step: int) -> None:
        self.releases += 1
        if basis is None:
            return
        if weak:
            self.weak_releases += 1
            mode = self.on_weak or "warn"
            none = self.V is None
            if mode == "plain":
                then = ("plain DP-SGD steps until a release that is not WEAK (the choice reads the release's own "
                        "noise level: no privacy cost); use_weak_basis=True / on_weak='warn' uses such a basis")
            elif mode == "skip":
                then = ("no basis yet: plain DP-SGD steps" if none else "kept the previous basis") + \
                    " (on_weak='skip')"
            else:
                then = "using it" + ("" if none else " (on_weak='skip' keeps the previous one)")
            warnings.warn(f"the basis released at step {step} is WEAK (noise level {noise_level:.2f}: near the "
                          f"random level, it holds little of the gradient; its cost was charged); {then}.  A "
                          "release keeps more with a larger rho or sample (basis_rate), or with the gaussian "
                          "mechanism (dense) where its width allows", WeakBasisWarning, stacklevel=4)
            if mode == "plain":
                self.V = None
                return
            if mode == "skip":
                return
        self.V = torch.from_numpy(np.ascontiguousarray(basis, dtype=np.float32))


def charge_basis_release(accountant: Accountant, rho: float, rate: float, steps: int, amplify: bool = True) -> bool:
    """Charge `accountant` one PrivateBasis release of `steps` noisy steps at
    replace-one rho on a Poisson sample at `rate` (the rule and its argument
    are PrivateBasis's text): one step, amplified -- a subsampled Gaussian of
    sigma 1/sqrt(rho); otherwise rho/2 as zCDP.  Returns whether it was
    amplified.  Also what a run plans with: the first release of a cold
    power iteration takes T = power_blocks_next(d) steps, the later ones 1."""
    if steps <= 1 and rho > 0 and amplify:
        accountant.add_sampled_release(rate, 1.0 / math.sqrt(rho))
        return True
    accountant.add_zcdp(rho / 2)
    return False


# Keywords of SubspaceEstimator that make it release inside partial_fit
# (every epoch of t*m rows that fills): releases that PrivateBasis, which
# charges one release per update, would not see.
_UNACCOUNTED_KEYWORDS = ("t", "m")


class PrivateBasis(_ReleasedBasis):
    """A basis released by SubspaceEstimator from the clipped per-example
    gradients of its own Poisson sample of the training examples (rate
    basis_rate), at step 0 and then every `every` steps: ONE release per
    update (t and m, which would release every epoch that fills, are
    refused).  A failed or refused release keeps the previous basis; a WEAK
    one is used, skipped or dropped as on_weak says (_ReleasedBasis).  The
    sample's gradients are streamed to the estimator `chunk` examples at a
    time (memory: chunk x d, not the sample's rows x d).  mechanism, rho,
    groups and the other keywords go to SubspaceEstimator (one estimator for
    the run: a power iteration warm-starts from the last released basis,
    public).

    The examples: data_x, data_y (DPOptimizer), or none, and the engine
    binds its data loader's dataset (PrivacyEngine.make_private).  The cost:
    rho (each release's, replace-one, as the estimator's), or share -- the
    share of the run's budget the releases get, which only
    make_private_with_epsilon can split (it sets rho, see PrivacyEngine).

    What a release is charged (add/remove adjacency; Release.rho_add_remove
    of the published releases says it):
    - one noisy step (the gaussian mechanism's dense groups; a warm power
      iteration, T = 1): a sum over the Poisson sample of per-example terms
      of norm <= 1 under adding or removing an example (the upper triangle
      of x x^T, or x x^T X with ||X||_2 <= 1) plus Gaussian noise of sd
      1/sqrt(rho) on every coordinate: a Poisson-subsampled Gaussian
      mechanism with sigma = 1/sqrt(rho), charged as such
      (Accountant.add_sampled_release: amplification by sampling applies, as
      to a DP-SGD step); amplify=False charges its rho/2 as zCDP.
    - T > 1 power steps (a cold start: T = 3 by default, or power_blocks):
      each sampled example goes to one of the T blocks drawn uniformly and
      independently (fresh secure randomness, NoiseSource.below), the
      blocks are fed in turn and each ends with its noisy step
      (SubspaceEstimator.end_block; all T, whatever they hold, so the number
      of steps is public).  Charged rho/2 as zCDP (not amplified): couple
      the runs on D and D + x with the same assignment of D's examples; x,
      when sampled, lands in block J.  Given J = j the steps before j read
      the same rows, step j is a Gaussian mechanism whose input moves by
      ||x x^T X|| <= 1 (rho/2 by the chain rule), and the steps after j
      read the same rows again (their starts are earlier outputs); so every
      conditional law is within rho/2, and the mixture over J is too (Renyi
      divergence is jointly quasi-convex, van Erven-Harremoes 2014, Thm 13).
      Blocks cut by position would shift every later row when x is added:
      T rho.
    Both charges are Gaussian pairs, as the "pld" accountant's add_zcdp
    requires: given J each law pair is that of a Gaussian mechanism of
    mu = sqrt(rho), and the hockey-stick divergence, an f-divergence, is
    jointly convex, so the mixture over J (and over x being sampled at all)
    is dominated by the same pair.
    Every release the estimator made during an update is charged, not only
    the last.

    releases_ lists the releases as published: rows_used is None there,
    since the sample's size is not covered by the charge (it is private;
    the estimator's own records, which hold it, are not exposed).
    noise_level of a T-step release is computed from public quantities (the
    step count, not the blocks' sizes)."""

    def __init__(self, data_x: Optional[torch.Tensor] = None, data_y: Optional[torch.Tensor] = None,
                 n_components: int = 10, rho: Optional[float] = None, basis_rate: float = 0.5,
                 every: Optional[int] = None, mechanism: str = "gaussian", seed: Optional[int] = None,
                 amplify: bool = True, chunk: int = 4096, on_weak: Optional[str] = None, *,
                 share: Optional[float] = None, **estimator_kwargs: Any) -> None:
        super().__init__(on_weak, data_x, data_y)
        if every is None or every < 1:
            raise ValueError(f"every must be >= 1 (steps between releases), got {every}")
        if mechanism not in ("gaussian", "power"):  # the streaming mechanisms with an add/remove statement
            raise ValueError(f"mechanism must be gaussian or power, got {mechanism!r}")
        bad = [k for k in _UNACCOUNTED_KEYWORDS if k in estimator_kwargs]
        if bad:
            raise ValueError(f"{' and '.join(bad)} would make the estimator release every epoch of t*m rows that "
                             "fills during an update, and PrivateBasis charges one release per update: leave "
                             "them out (each update is one release of its own sample)")
        if not 0 < basis_rate <= 1:
            raise ValueError(f"basis_rate must be in (0, 1], got {basis_rate}")
        if (rho is None) == (share is None):
            raise ValueError("give rho (each release's cost) or share (of a budget make_private_with_epsilon "
                             "splits), not both")
        if share is not None and not 0 < share < 1:
            raise ValueError(f"share must be in (0, 1), got {share}")
        self.n_components, self.rate, self.every, self.amplify = n_components, basis_rate, every, amplify
        self.mechanism, self.seed, self.chunk, self.share = mechanism, seed, chunk, share
        self.estimator_kwargs = estimator_kwargs
        self._first_steps: Dict[int, int] = {}
        self.rho: Optional[float] = None
        self._estimator: Optional[SubspaceEstimator] = None
        if rho is not None:
            self.set_rho(rho)
        self.releases_: List[Release] = []
        self.amplified = 0

    def set_rho(self, rho: float) -> None:
        """Each release's rho (replace-one); before the first release only."""
        if self.releases:
            raise RuntimeError("rho is fixed once a basis was released")
        if not rho > 0:
            raise ValueError(f"rho must be > 0, got {rho}")
        self.rho = rho
        self._estimator = SubspaceEstimator(self.n_components, rho=rho, mechanism=self.mechanism, seed=self.seed,
                                            **self.estimator_kwargs)

    def first_steps(self, d: int) -> int:
        """T of the first (cold) release for a model of d parameters."""
        if d not in self._first_steps:
            self._first_steps[d] = SubspaceEstimator(self.n_components, rho=1.0, mechanism=self.mechanism,
                                                     **self.estimator_kwargs).power_blocks_next(d)
        return self._first_steps[d]

    def plan(self, accountant: Accountant, steps: int, d: int, rho: Optional[float] = None) -> None:
        """Charge `accountant` the releases of a run of `steps` steps (at
        steps 0, every, 2 every, ...) as update() will: the first cold (T =
        first_steps(d)), the others warm (one step), at `rho` (default the
        basis's).  A failed release leaves the next one cold: then the run
        spends more than planned, and the accountant says so."""
        rho = self.rho if rho is None else rho
        if rho is None:
            raise ValueError("PrivateBasis(share=...) has no rho yet: make_private_with_epsilon sets it")
        T = self.first_steps(d)
        for i in range(math.ceil(steps / self.every)):
            charge_basis_release(accountant, rho, self.rate, T if i == 0 else 1, self.amplify)

    def _charge(self, opt: Any, rel: Release, blocks: int) -> Release:
        """Charge one release cut into `blocks` random blocks here; return it
        as published (see the class's text).  The mechanism is gaussian or
        power (checked at construction).  The published rho_add_remove is
        the release's zCDP bound, rho/2 (an amplified release is charged
        less)."""
        self.amplified += charge_basis_release(opt.accountant, rel.rho_epoch, self.rate, blocks, self.amplify)
        return dataclasses.replace(rel, rows_used=None, rho_add_remove=rel.rho_epoch / 2)

    def update(self, opt: Any, step: int) -> Optional[torch.Tensor]:
        if step % self.every:
            return self.V
        if self._estimator is None:
            raise RuntimeError("PrivateBasis(share=...) has no rho: only make_private_with_epsilon splits a "
                               "budget; with make_private give rho=")
        examples = self._need_examples()
        est, before, d = self._estimator, len(self._estimator.releases_), opt.grads.d
        idx = opt.noise.poisson_sample(len(examples), self.rate)
        T = est.power_blocks_next(d)
        block = opt.noise.below(T, len(idx)) if T > 1 else np.zeros(len(idx), dtype=np.int64)
        if not len(idx):  # the mechanism on an empty sample: a zero row adds nothing to the sum, the noise is drawn
            est.partial_fit(torch.zeros((1, d)))
        for b in range(max(T, 1)):
            part = idx[block == b]
            for s in range(0, len(part), self.chunk):  # streamed: chunk x d gradients in memory, not the sample's
                est.partial_fit(clip_rows(examples.gradients(opt, part[s:s + self.chunk]), opt.max_grad_norm))
            if T >= 1:  # every block ends here, even an empty one: T steps whatever the blocks hold, and the
                est.end_block()  # release's level from the step count, never from the sample's size
        est.release()
        for rel in est.releases_[before:]:  # every release made, charged before the basis is used
            self.releases_.append(self._charge(opt, rel, T))
            self._take(rel.basis, rel.weak, rel.noise_level, step)
        return self.V


class CollectorBasis(_ReleasedBasis):
    """A basis from a dps-collector (--aggregator gaussian or power) that
    this run alone feeds: at step 0 and every `every` steps, the clipped
    gradients of the run's own Poisson sample (rate 0.9 epoch_rows / n, n
    the optimizer's public dataset_size) go
    to it through `producer` as exactly one epoch of epoch_rows = t m rows:
    the sample's rows in slots drawn uniformly at random (fresh secure
    randomness, NoiseSource.slots), zero rows in the others (a larger
    sample is cut to a uniformly random epoch_rows of its rows).  The basis
    is that epoch's snapshot, taken from `subscriber`.  The examples:
    data_x, data_y (DPOptimizer), or none and the engine binds its data
    loader's dataset.

    What each release is charged: rho_epoch under add/remove, as zCDP.  The
    collector's own statement is rho_epoch-zCDP per epoch under replacing
    the row in ONE slot of an epoch of public length, for both mechanisms
    and every block of a power epoch (each slot is in one block).  Couple
    the run on D and on D + x: the same sample of D's examples in the same
    slots, and x, when sampled, in a uniformly random free slot -- which
    is the law of the slots on D + x (every injection of the sample into
    the epoch equally likely).  So the epochs differ in at most one slot
    (a zero row replaced by x; when the sample was cut, a row replaced by
    x), the release moves by at most a replacement's rho_epoch whatever the
    slot, and the mixture over slots costs no more (Renyi divergence is
    jointly quasi-convex, van Erven-Harremoes 2014, Thm 13; for the "pld"
    accountant, which takes add_zcdp as a Gaussian pair: the epoch is a
    Gaussian mechanism of mu = sqrt(2 rho_epoch) in the replaced slot, and
    the hockey-stick divergence is jointly convex over the slot's law).
    (Slots taken in index order would make an added example shift every
    later row: each later power block would then see a replaced row.)
    Checked on every snapshot: it is the epoch of our sample, with our row
    count, from the gaussian or power aggregator at rho_epoch = basis_rho;
    RuntimeError otherwise (another producer is feeding the collector, or
    another mechanism runs: the guarantee would not hold).  TimeoutError if
    no snapshot comes in `timeout` seconds.  Both after charging what our
    rows may have cost (an epoch released late; two epochs, when others'
    rows split ours), so that a caller who goes on states no less.  Assumed: the transport keeps
    the rows' order whatever their values (one producer, one connection).
    NOT covered: the collector's own counters and log (rows_zero in its
    status counts the zero rows, i.e. reveals the sample's size): keep its
    status endpoint and log to the run's owner."""

    MECHANISMS = ("gaussian", "power")

    def __init__(self, producer: Any, subscriber: Any, data_x: Optional[torch.Tensor] = None,
                 data_y: Optional[torch.Tensor] = None, epoch_rows: Optional[int] = None,
                 every: Optional[int] = None, basis_rho: Optional[float] = None, first_epoch: int = 0,
                 timeout: float = 120.0, on_weak: Optional[str] = None) -> None:
        super().__init__(on_weak, data_x, data_y)
        if every is None or epoch_rows is None or basis_rho is None or every < 1 or epoch_rows < 1 or \
                not basis_rho > 0:
            raise ValueError("every and epoch_rows must be >= 1, basis_rho > 0")
        self.producer, self.sub = producer, subscriber
        self.rows, self.every, self.rho, self.timeout = epoch_rows, every, basis_rho, timeout
        self.cut, self.next_epoch = 0, first_epoch

    def rate(self, opt: Any) -> float:
        """The sample's rate, 0.9 epoch_rows / n from the PUBLIC dataset size
        the optimizer was given (not the examples' count, which adding an
        example changes: the coupling needs the same rate on both sides)."""
        return min(1.0, 0.9 * self.rows / opt.n)

    def plan(self, accountant: Accountant, steps: int, d: int) -> None:
        """Charge `accountant` the epochs of a run of `steps` steps: rho_epoch
        each as zCDP."""
        for _ in range(math.ceil(steps / self.every)):
            accountant.add_zcdp(self.rho)

    def update(self, opt: Any, step: int) -> Optional[torch.Tensor]:
        if step % self.every:
            return self.V
        examples = self._need_examples()
        idx = opt.noise.poisson_sample(len(examples), self.rate(opt))
        if len(idx) > self.rows:  # a uniformly random epoch_rows of the sample
            idx, self.cut = idx[opt.noise.slots(len(idx), self.rows)], self.cut + 1
        rows = torch.zeros(self.rows, opt.grads.d)
        if len(idx):
            slots = torch.as_tensor(opt.noise.slots(self.rows, len(idx)))
            rows[slots] = clip_rows(examples.gradients(opt, idx), opt.max_grad_norm)
        self.producer.send(rows.numpy())
        self.producer.flush()  # the whole epoch now
        want, end = self.next_epoch, time.monotonic() + self.timeout
        while True:
            self.sub.update()
            s = self.sub.latest
            if s is not None and s.epoch >= want:
                break
            if time.monotonic() > end:
                # the epoch may still be released: charged as if it were, then the caller is told
                opt.accountant.add_zcdp(self.rho)
                raise TimeoutError(f"no snapshot of epoch {want} within {self.timeout:g} s (is the collector "
                                   f"closing epochs?); its cost, rho {self.rho:g}, was charged")
            time.sleep(0.01)
        if s.epoch != want or s.rows_used != self.rows:
            # our rows were sent: with others' in the collector they span at most two epochs, both charged
            opt.accountant.add_zcdp(2 * max(self.rho, s.rho_epoch))
            raise RuntimeError(f"the snapshot of epoch {s.epoch} ({s.rows_used} rows) is not the epoch of our "
                               f"sample (epoch {want}, {self.rows} rows): another producer is feeding the "
                               "collector; the two epochs our rows may be in were charged")
        opt.accountant.add_zcdp(max(self.rho, s.rho_epoch))  # charged whatever the outcome: it was released
        if s.aggregator not in self.MECHANISMS or abs(s.rho_epoch - self.rho) > 1e-12 * max(1.0, self.rho):
            raise RuntimeError(f"the collector runs {s.aggregator} at rho_epoch {s.rho_epoch:g}; the guarantee "
                               f"is stated for --aggregator gaussian or power at rho_epoch {self.rho:g}")
        self.next_epoch = s.epoch + 1
        self._take(s.basis if s.status == "released" else None, s.weak, s.noise_level, step)
        return self.V


class NoisyGradientBasis:
    """A basis from the noisy gradients the run has already released
    (post-processing: no privacy cost).  The last `window` released noisy
    sums h_t = s_t + z_t form H (W x d); z_t is N(0, nu_t^2 I_d), plus, on a
    GEP or projection step, N(0, nu_e,t^2) in the k directions of that step's
    basis.  H's top right singular vectors are kept only where the singular
    value passes the noise's edge nu (sqrt W + sqrt d) + nu_e sqrt(W k) (the
    largest a W x d matrix of pure isotropic noise reaches, Marchenko-Pastur,
    plus the embedding noise's Frobenius norm) by the factor `margin`: the
    noise floor corrected, so that no noise direction passes as signal.  At
    most n_components directions; None (plain DP-SGD steps) while none
    passes.  Recomputed every `every` steps."""

    def __init__(self, n_components: int, window: int = 200, every: int = 10, margin: float = 1.1) -> None:
        self.k, self.window, self.every, self.margin = n_components, window, every, margin
        self.history: List[Tuple[torch.Tensor, float, float]] = []
        self.V: Optional[torch.Tensor] = None
        self.kept = 0

    def record(self, noisy_sum: torch.Tensor, noise_sd: float, embedding_sd: float, k: int) -> None:
        self.history.append((noisy_sum.detach().clone(), noise_sd, embedding_sd * math.sqrt(k)))
        if len(self.history) > self.window:
            self.history.pop(0)

    def plan(self, accountant: Accountant, steps: int, d: int) -> None:
        """Charges nothing (post-processing)."""

    def update(self, opt: Any, step: int) -> Optional[torch.Tensor]:
        if step % self.every or len(self.history) <= self.k:
            return self.V
        H = torch.stack([h for h, _, _ in self.history]).double()
        W, d = H.shape
        nu = max(sd for _, sd, _ in self.history)
        nu_e = max(e for _, _, e in self.history)  # per row: the embedding noise's norm, sd_e sqrt(k)
        edge = nu * (math.sqrt(W) + math.sqrt(d)) + nu_e * math.sqrt(W)
        _, S, Vt = torch.linalg.svd(H, full_matrices=False)
        keep = int((S[:self.k] > self.margin * edge).sum())
        self.kept = keep
        self.V = Vt[:keep].float().contiguous() if keep else None
        return self.V
