"""bases.py - where a GEP or projection step's basis V comes from, and what
each source charges the run's accountant.  Owns:

    PrivateBasis        -- released by SubspaceEstimator from the clipped
                           per-example gradients of its own Poisson sample
                           (charged: see the class)
    CollectorBasis      -- released by a dps-collector this run alone feeds,
                           given by its endpoints or by a Producer and a
                           Subscriber (charged rho_epoch per epoch)
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
import weakref
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import torch

from ..accountant import Accountant, boundary, rho_for_eps
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
    public).  mechanism "kron" (DESIGN 7.6) needs groups=parameter_groups(model)
    and group_shapes=parameter_shapes(model): each weight's gradient gets the
    Kronecker-factored basis of its out x in shape, the other tensors the
    gaussian mechanism's; its noise is sqrt(2/rho) on every entry against an
    add/remove move of norm <= sqrt 2, so the charges below are the same.

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
        if mechanism not in ("gaussian", "power", "kron"):  # the streaming mechanisms with an add/remove statement
            raise ValueError(f"mechanism must be gaussian, power or kron, got {mechanism!r}")
        if mechanism == "kron" and not ("groups" in estimator_kwargs and "group_shapes" in estimator_kwargs):
            raise ValueError("mechanism kron needs the model's groups and their shapes: PrivateBasis(..., "
                             "mechanism='kron', groups=parameter_groups(model), group_shapes=parameter_shapes(model))")
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

    def noise_edges(self, d: int) -> List[Tuple[str, float]]:
        """Per group, what releases its basis and the eigenvalue below which
        a direction is lost in the release's noise, at this basis's rho
        (SubspaceEstimator.noise_edges): public quantities only."""
        if self._estimator is None:
            raise RuntimeError("PrivateBasis(share=...) has no rho yet: set_rho or make_private_with_epsilon sets it")
        return self._estimator.noise_edges(d)

    def rho_for_share(self, target_eps: float, delta: float, steps: int, d: int, share: Optional[float] = None,
                      method: str = "pld") -> float:
        """Each release's rho such that the releases of a run of `steps`
        steps, charged as plan() charges them, spend alone the eps of the
        Gaussian release of share * rho_total, rho_total the rho whose
        Gaussian release spends target_eps at delta: `share` (default the
        basis's) of the budget in rho units.  The steps' sigma then takes the
        rest (noise_multiplier with the plan as its base)."""
        share = self.share if share is None else share
        if share is None or not 0 < share < 1:
            raise ValueError(f"share must be in (0, 1), got {share}")
        alone = Accountant(method)
        alone.add_zcdp(share * rho_for_eps(target_eps, delta, method=method))
        share_eps = alone.get_epsilon(delta)

        def spent(rho: float) -> float:
            acc = Accountant(method)
            self.plan(acc, steps, d, rho=rho)
            return acc.get_epsilon(delta)

        return boundary(lambda rho: spent(rho) > share_eps, 1e-9, 1e-3, 1e-4)[0]  # the largest within share_eps

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
        as published (see the class's text).  The mechanism is gaussian,
        power or kron (checked at construction).  The published rho_add_remove is
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


def _close_clients(producer: Any, sub: Any, quiet: bool) -> None:
    """Close a CollectorBasis's own producer (flush and drain: the collector
    confirms every batch) and subscriber.  quiet (garbage collection,
    interpreter exit): what the producer's close raises becomes a warning."""
    try:
        try:
            producer.close()
        finally:
            sub.close()
    except Exception as e:  # noqa: BLE001 -- reported, not lost
        if not quiet:
            raise
        warnings.warn(f"CollectorBasis: closing its producer to {producer.endpoint}: {e}", RuntimeWarning)


class CollectorBasis(_ReleasedBasis):
    """A basis from a dps-collector (--aggregator gaussian or power) that
    this run alone feeds: at step 0 and every `every` steps, the clipped
    gradients of the run's own Poisson sample (rate 0.9 epoch_rows / n, n
    the optimizer's public dataset_size) go to the collector as exactly one
    epoch of epoch_rows = t m rows: the sample's rows in slots drawn
    uniformly at random (fresh secure randomness, NoiseSource.slots), zero
    rows in the others (a larger sample is cut to a uniformly random
    epoch_rows of its rows).  The basis is that epoch's snapshot.  The
    examples: data_x, data_y (DPOptimizer), or none and the engine binds its
    data loader's dataset.  Two forms:

    CollectorBasis(ingest=, publish=, status=, every=, plaintext=True) (or,
      instead of plaintext, CURVE: server_public_key=, public_key=,
      secret_key=, Z85 bytes as load_public_key / load_keypair give; the
      same key pair for the ingest and the publish connections; plaintext
      only on ipc:// and loopback endpoints, as Producer and Subscriber
      enforce): the collector given by its endpoints, as PrivateBasis(share=,
      every=) is given without data.  It learns the rest from the collector
      and makes its own Producer and Subscriber: from the status endpoint
      d, epoch_rows = t m and the open epoch; from the collector's latest
      snapshot (sent to every new subscriber), when the RUNNING collector
      released it (its time against the status's uptime, to 2 s: settings
      may change at a restart), rho_epoch and the aggregator.  A collector
      that has released nothing since it started states neither: give
      basis_rho= (its --rho) -- the aggregator is then first known from our
      own epoch's snapshot (checked there, after charging it).  basis_rho=
      and epoch_rows= given in this form are what the collector must have
      (checked).  Checked before anything is sent, with ValueError: the
      aggregator gaussian or power (when known), d equal to the model's
      trainable parameter count (at plan(), i.e.
      make_private_with_epsilon, and at the first update), not sharded.
      The connections are made when the engine binds it (make_private),
      else at the first update: a collector that does not answer within
      connect_timeout seconds raises TimeoutError naming the endpoint
      (status, publish or ingest); a refused key, PermissionError.  Before
      each epoch it asks the status endpoint again and sends nothing (and
      is charged nothing) when rows of another producer wait in the open
      epoch, when the collector's d or epoch_rows changed, or when its
      budget cap would refuse the epoch: RuntimeError.  close() (or a with
      block, garbage collection, interpreter exit) closes the producer --
      draining it: the collector confirms every batch -- and the subscriber.
    CollectorBasis(producer, subscriber, data_x, data_y, epoch_rows, every,
      basis_rho, first_epoch=): the caller's Producer (with status_endpoint)
      and Subscriber (from_epoch=first_epoch, the open epoch when the run
      starts), the collector's t m and --rho told (python/examples/
      train_loop.py); close() leaves them to the caller.

    What each release is charged, in both forms: rho_epoch under
    add/remove, as zCDP.  The collector's own statement is rho_epoch-zCDP
    per epoch under replacing the row in ONE slot of an epoch of public
    length, for both mechanisms and every block of a power epoch (each slot
    is in one block).  Couple the run on D and on D + x: the same sample of
    D's examples in the same slots, and x, when sampled, in a uniformly
    random free slot -- which is the law of the slots on D + x (every
    injection of the sample into the epoch equally likely).  So the epochs
    differ in at most one slot (a zero row replaced by x; when the sample
    was cut, a row replaced by x), the release moves by at most a
    replacement's rho_epoch whatever the slot, and the mixture over slots
    costs no more (Renyi divergence is jointly quasi-convex, van
    Erven-Harremoes 2014, Thm 13; for the "pld" accountant, which takes
    add_zcdp as a Gaussian pair: the epoch is a Gaussian mechanism of mu =
    sqrt(2 rho_epoch) in the replaced slot, and the hockey-stick divergence
    is jointly convex over the slot's law).  (Slots taken in index order
    would make an added example shift every later row: each later power
    block would then see a replaced row.)  plan() charges the same: rho_epoch
    per release of a run of `steps` steps (make_private_with_epsilon budgets
    with it).
    Checked on every snapshot: it is the epoch of our sample, with our row
    count, from the gaussian or power aggregator at rho_epoch = basis_rho
    (learned or told); RuntimeError otherwise (another producer is feeding
    the collector, or another mechanism runs: the guarantee would not
    hold).  TimeoutError if no snapshot comes in `timeout` seconds.  Each
    after charging what our rows may have cost, so that a caller who goes
    on states no less: rho_epoch for our epoch whatever its outcome
    (released; by another mechanism or at another rho: the larger rho;
    late: the timeout; in the endpoint form, which sees every outcome, also
    failed -- the previous basis is kept -- or refused -- RuntimeError),
    and 2 rho_epoch when the snapshot shows another producer's rows in our
    epoch or when sending our epoch raised (our rows may be in two epochs,
    or leave when the producer closes).  The endpoint form sends an epoch as
    one message (in pieces only above the collector's batch limit).
    Assumed: the transport keeps the rows' order whatever their values (one
    producer, one connection); the endpoint form also assumes that no other
    producer sends between its check of the open epoch and the end of ours
    (else the 2 rho_epoch charge and the RuntimeError).  NOT covered: the
    collector's own counters and log (rows_zero in its status counts the
    zero rows, i.e. reveals the sample's size): keep its status endpoint and
    log to the run's owner."""

    MECHANISMS = ("gaussian", "power")
    FRESH_SLACK_S = 2.0  # a welcome snapshot is the running collector's if no older than its uptime + this

    def __init__(self, producer: Any = None, subscriber: Any = None, data_x: Optional[torch.Tensor] = None,
                 data_y: Optional[torch.Tensor] = None, epoch_rows: Optional[int] = None,
                 every: Optional[int] = None, basis_rho: Optional[float] = None, first_epoch: int = 0,
                 timeout: float = 120.0, on_weak: Optional[str] = None, *, ingest: Optional[str] = None,
                 publish: Optional[str] = None, status: Optional[str] = None, plaintext: bool = False,
                 server_public_key: Optional[bytes] = None, public_key: Optional[bytes] = None,
                 secret_key: Optional[bytes] = None, connect_timeout: float = 10.0) -> None:
        if isinstance(producer, str) or isinstance(subscriber, str):
            raise TypeError("give the collector's endpoints by name: CollectorBasis(ingest=..., publish=..., "
                            "status=..., every=..., plaintext=True or CURVE keys)")
        endpoints = dict(ingest=ingest, publish=publish, status=status)
        given = [k for k, v in endpoints.items() if v is not None]
        self._own = bool(given)  # the endpoint form: the producer and subscriber are made here, and closed here
        if self._own:
            if producer is not None or subscriber is not None:
                raise ValueError("give the collector's endpoints (ingest, publish, status) or a producer and a "
                                 "subscriber, not both")
            missing = [k for k, v in endpoints.items() if v is None]
            if missing:
                raise ValueError(f"the collector's {', '.join(missing)} endpoint{'s' if len(missing) > 1 else ''} "
                                 "missing: give ingest=, publish= and status= (its --ingest, --publish, --status)")
            if every is None or every < 1:
                raise ValueError(f"every must be >= 1 (steps between bases), got {every}")
            if epoch_rows is not None and epoch_rows < 1:
                raise ValueError(f"epoch_rows must be >= 1 (or left out: the collector's status says it), got "
                                 f"{epoch_rows}")
            if basis_rho is not None and not basis_rho > 0:
                raise ValueError(f"basis_rho must be > 0 (or left out: learned from the collector), got {basis_rho}")
            if first_epoch:
                raise ValueError("first_epoch is learned from the collector's status in the endpoint form: leave "
                                 "it out")
            if not connect_timeout > 0:
                raise ValueError(f"connect_timeout must be > 0 seconds, got {connect_timeout}")
            self._check_security(endpoints, plaintext, server_public_key, public_key, secret_key)
        elif producer is None or subscriber is None:
            raise ValueError("CollectorBasis needs the collector's endpoints (ingest=, publish=, status=) or a "
                             "producer and a subscriber")
        elif plaintext or server_public_key or public_key or secret_key:
            raise ValueError("plaintext and the CURVE keys go with the collector's endpoints (ingest=, publish=, "
                             "status=); a producer and a subscriber given carry their own")
        elif every is None or epoch_rows is None or basis_rho is None or every < 1 or epoch_rows < 1 or \
                not basis_rho > 0:
            raise ValueError("every and epoch_rows must be >= 1, basis_rho > 0")
        super().__init__(on_weak, data_x, data_y)
        self.producer, self.sub = producer, subscriber
        self.rows, self.every, self.rho, self.timeout = epoch_rows, every, basis_rho, timeout
        self.cut, self.next_epoch = 0, first_epoch
        self.ingest, self.publish, self.status = ingest, publish, status
        self.connect_timeout = connect_timeout
        self._sec = dict(server_public_key=server_public_key, public_key=public_key, secret_key=secret_key,
                         plaintext=plaintext)
        # learned from the collector (the endpoint form): its d, its aggregator (None: not known yet)
        self.d: Optional[int] = None
        self.aggregator: Optional[str] = None
        self._learned = False
        self._finalizer: Any = None
        self.closed = False

    @staticmethod
    def _check_security(endpoints: Dict[str, Optional[str]], plaintext: bool, server_public_key: Any,
                        public_key: Any, secret_key: Any) -> None:
        """What apply_client_security will refuse, said at construction."""
        if plaintext:
            from ..keys import endpoint_is_local
            far = [f"{k} {v}" for k, v in endpoints.items() if not endpoint_is_local(str(v))]
            if far:
                raise ValueError(f"plaintext refused for {', '.join(far)}: the rows are private data; use CURVE "
                                 "keys (server_public_key, public_key, secret_key), or ipc:// / loopback endpoints")
        elif not (server_public_key and public_key and secret_key):
            raise ValueError("CURVE needs server_public_key, public_key and secret_key (load_public_key, "
                             "load_keypair), or plaintext=True on ipc:// / loopback endpoints")

    # ------------------------------------------------ the endpoint form: what the collector says
    def _query(self) -> Dict[str, Any]:
        """The collector's status, or TimeoutError naming the endpoint; PermissionError if it refused us."""
        from ..status import query_status
        try:
            st = query_status(self.status, int(self.connect_timeout * 1000), **self._sec)
        except TimeoutError:
            raise TimeoutError(f"no dps-collector answers on the status endpoint {self.status} within "
                               f"{self.connect_timeout:g} s (is it running there, with the same security: "
                               f"{'plaintext' if self._sec['plaintext'] else 'CURVE, our key authorized'}?); "
                               "nothing was sent") from None
        if st.get("refused"):
            raise PermissionError(f"the collector at {self.status} refused our status question ({st['refused']}): "
                                  "our key is not authorized; nothing was sent")
        return st

    def _latest_snapshot(self, st: Dict[str, Any]) -> Any:
        """Connect to the publish endpoint (TimeoutError naming it, if no handshake within connect_timeout;
        PermissionError if our key is refused) and take the collector's latest snapshot, the welcome message
        of a new subscriber (None if it has none)."""
        import zmq
        from zmq.utils.monitor import recv_monitor_message

        from ..keys import apply_client_security
        from ..subscriber import Snapshot
        ctx = zmq.Context()
        sock = ctx.socket(zmq.SUB)
        mon = None
        try:
            apply_client_security(sock, self.publish, **self._sec)
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.SUBSCRIBE, b"")
            mon = sock.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_HANDSHAKE_FAILED_AUTH)
            sock.connect(self.publish)  # after the monitor: its handshake is not missed
            end = time.monotonic() + self.connect_timeout
            while True:
                left = end - time.monotonic()
                if left <= 0 or not mon.poll(max(1, int(left * 1000))):
                    raise TimeoutError(f"no dps-collector answers on the publish endpoint {self.publish} within "
                                       f"{self.connect_timeout:g} s (its status endpoint {self.status} does: is "
                                       "publish= its --publish?); nothing was sent")
                ev = recv_monitor_message(mon)["event"]
                if ev == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
                    raise PermissionError(f"the collector's publish endpoint {self.publish} refused our CURVE key "
                                          "(not in its subscriber keys); nothing was sent")
                if ev == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                    break
            if not st.get("last_snapshot_seq"):
                return None
            left = max(0.0, end - time.monotonic())
            while sock.poll(max(1, int(left * 1000))):
                try:
                    return Snapshot.from_bytes(sock.recv())
                except ValueError:
                    left = max(0.0, end - time.monotonic())
            return None
        finally:
            if mon is not None:
                sock.disable_monitor()
                mon.close(0)
            sock.close(0)
            ctx.term()

    def _learn(self) -> None:
        """d, epoch_rows, rho_epoch and (when known) the aggregator, from the collector (the endpoint form;
        once).  ValueError when the collector cannot serve this basis."""
        if self._learned or not self._own:
            return
        asked = time.time()
        st = self._query()
        if st.get("shards", 0) > 1:
            raise ValueError(f"the collector at {self.status} is sharded over {st['shards']} MPI ranks: "
                             "CollectorBasis sends whole rows to one collector process")
        if self.rows is not None and st["epoch_rows"] != self.rows:
            raise ValueError(f"the collector at {self.status} closes epochs of {st['epoch_rows']} rows (t m), not "
                             f"epoch_rows = {self.rows}")
        snap = self._latest_snapshot(st)
        # released by the running collector: not older than its start (uptime whole seconds, clocks, the wait)
        fresh = snap is not None and snap.rho_epoch > 0 and \
            snap.time_unix_ms / 1000 >= asked - st["uptime_s"] - 1 - self.FRESH_SLACK_S
        if fresh:
            if snap.aggregator not in self.MECHANISMS:
                raise ValueError(f"the collector at {self.status} runs the {snap.aggregator} aggregator (its latest "
                                 f"snapshot, epoch {snap.epoch}): CollectorBasis's guarantee is stated for "
                                 "--aggregator gaussian or power; nothing was sent")
            if self.rho is not None and abs(snap.rho_epoch - self.rho) > 1e-12 * max(1.0, self.rho):
                raise ValueError(f"the collector at {self.status} releases at rho_epoch {snap.rho_epoch:g} (its "
                                 f"latest snapshot, epoch {snap.epoch}), not basis_rho = {self.rho:g}; nothing "
                                 "was sent")
            self.rho, self.aggregator = snap.rho_epoch, snap.aggregator
        elif self.rho is None:
            why = ("has released no snapshot" if snap is None else
                   f"has released none since it started (its latest, epoch {snap.epoch}, is older: a restart may "
                   "have changed its settings)")
            raise ValueError(f"the collector at {self.status} {why}, and its status does not state its rho per "
                             "epoch or aggregator: give basis_rho= (its --rho; checked against every snapshot), "
                             "or let it release an epoch first; nothing was sent")
        self.d, self.rows, self.next_epoch = st["d"], st["epoch_rows"], st["epoch"]
        self._learned = True

    def _check_d(self, d: int) -> None:
        if self.d is not None and d != self.d:
            raise ValueError(f"the collector at {self.status} takes rows of d = {self.d}, but the model has "
                             f"{d} trainable parameters: start it with --d {d} (another --state-dir), or train a "
                             f"model of {self.d}; nothing was sent")

    def _connect(self) -> None:
        """The endpoint form: learn, then make the producer and the subscriber (once)."""
        if self.closed:
            raise RuntimeError("this CollectorBasis was closed")
        if self.producer is not None or not self._own:
            return
        self._learn()
        from ..producer import Producer
        from ..subscriber import Subscriber
        ms = int(self.connect_timeout * 1000)
        # an epoch in one message (cut by the producer to the collector's batch limit only if above it)
        producer = Producer(self.ingest, self.d, batch_rows=self.rows, status_endpoint=self.status,
                            status_timeout_ms=ms, linger_ms=ms, **self._sec)
        try:
            if not producer.wait_ready(ms):
                raise TimeoutError(f"no dps-collector answers on the ingest endpoint {self.ingest} within "
                                   f"{self.connect_timeout:g} s (its status endpoint {self.status} does: is "
                                   "ingest= its --ingest?); nothing was sent")
            sub = Subscriber(self.publish, from_epoch=self.next_epoch, **self._sec)
        except BaseException:
            producer.close()  # nothing sent: closes at once
            raise
        self.producer, self.sub = producer, sub
        # closed with the basis (garbage collection; the optimizer holds it) or at interpreter exit
        self._finalizer = weakref.finalize(self, _close_clients, producer, sub, True)

    def _before_epoch(self) -> None:
        """The endpoint form, before our rows are sent: the collector's open epoch must be empty and its
        settings those learned (nothing sent, nothing charged otherwise); the epoch we wait for."""
        st = self._query()
        if st["d"] != self.d or st["epoch_rows"] != self.rows:
            raise RuntimeError(f"the collector at {self.status} now has d = {st['d']}, epochs of "
                               f"{st['epoch_rows']} rows (learned: d = {self.d}, {self.rows} rows): restarted "
                               "with other settings?  Nothing was sent")
        unit, left = st.get("budget_unit", ""), st.get("budget_left", math.inf)
        if (unit == "rho" and left < self.rho * (1 - 1e-9)) or (unit == "eps" and left <= 0):
            raise RuntimeError(f"the collector at {self.status} has {unit} {left:g} left under its budget cap: it "
                               "would refuse our epoch; nothing was sent")
        if st["rows_in_epoch"]:
            raise RuntimeError(f"the collector at {self.status} holds {st['rows_in_epoch']} rows of another "
                               f"producer in its open epoch {st['epoch']}: CollectorBasis needs epochs of this "
                               "run's sample alone; nothing was sent, nothing charged")
        self.next_epoch = self.sub.from_epoch = st["epoch"]

    # ------------------------------------------------ the engine's and the optimizer's
    def bind(self, examples: Any) -> None:
        """The examples (the engine's data loader's dataset); the endpoint
        form connects here (TimeoutError, ValueError: nothing bound)."""
        if self._own and self.examples is None:
            self._examples_checked(examples)
            self._connect()
        super().bind(examples)

    def close(self) -> None:
        """Close the producer (flush and drain: the collector confirms every
        batch; raises UnconfirmedBatchesError as Producer.close) and the
        subscriber made by the endpoint form; the explicit form's are the
        caller's.  Later updates raise RuntimeError."""
        if not self._own:
            return
        self.closed = True
        fin, self._finalizer = self._finalizer, None
        if fin is not None and fin.detach() is not None:
            _close_clients(self.producer, self.sub, False)

    def __enter__(self) -> "CollectorBasis":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def rate(self, opt: Any) -> float:
        """The sample's rate, 0.9 epoch_rows / n from the PUBLIC dataset size
        the optimizer was given (not the examples' count, which adding an
        example changes: the coupling needs the same rate on both sides)."""
        return min(1.0, 0.9 * self.rows / opt.n)

    def plan(self, accountant: Accountant, steps: int, d: int) -> None:
        """Charge `accountant` the epochs of a run of `steps` steps: rho_epoch
        each as zCDP.  The endpoint form learns rho_epoch from the collector
        here and checks its d against the model's `d` (ValueError)."""
        self._learn()
        self._check_d(d)
        for _ in range(math.ceil(steps / self.every)):
            accountant.add_zcdp(self.rho)

    def _await_epoch(self, opt: Any, want: int) -> Any:
        """The snapshot of epoch `want` or a later one (the explicit form: the
        subscriber's latest release; the endpoint form: any outcome, failed
        and refused ones too); TimeoutError after charging rho_epoch."""
        end = time.monotonic() + self.timeout
        while True:
            if self._own:
                s = self.sub.recv(timeout_ms=max(0, int(min(0.2, end - time.monotonic()) * 1000)))
            else:
                self.sub.update()
                s = self.sub.latest
            if s is not None and s.epoch >= want:
                return s
            if time.monotonic() > end:
                # the epoch may still be released: charged as if it were, then the caller is told
                opt.accountant.add_zcdp(self.rho)
                where = f" on {self.publish}" if self._own else ""
                raise TimeoutError(f"no snapshot of epoch {want}{where} within {self.timeout:g} s (is the "
                                   f"collector closing epochs?); its cost, rho {self.rho:g}, was charged")
            if not self._own:
                time.sleep(0.01)

    def update(self, opt: Any, step: int) -> Optional[torch.Tensor]:
        if step % self.every:
            return self.V
        examples = self._need_examples()
        if self._own:
            self._connect()
            self._check_d(opt.grads.d)
            self._before_epoch()
        idx = opt.noise.poisson_sample(len(examples), self.rate(opt))
        if len(idx) > self.rows:  # a uniformly random epoch_rows of the sample
            idx, self.cut = idx[opt.noise.slots(len(idx), self.rows)], self.cut + 1
        rows = torch.zeros(self.rows, opt.grads.d)
        if len(idx):
            slots = torch.as_tensor(opt.noise.slots(self.rows, len(idx)))
            rows[slots] = clip_rows(examples.gradients(opt, idx), opt.max_grad_norm)
        try:
            self.producer.send(rows.numpy())
            self.producer.flush()  # the whole epoch now
        except BaseException:
            # some of our rows may have gone (or go when the producer closes), into epochs shared with others
            opt.accountant.add_zcdp(2 * self.rho)
            raise
        want = self.next_epoch
        s = self._await_epoch(opt, want)
        if s.epoch != want or s.rows_used != self.rows:
            # our rows were sent: with others' in the collector they span at most two epochs, both charged
            opt.accountant.add_zcdp(2 * max(self.rho, s.rho_epoch))
            raise RuntimeError(f"the snapshot of epoch {s.epoch} ({s.rows_used} rows) is not the epoch of our "
                               f"sample (epoch {want}, {self.rows} rows): another producer is feeding the "
                               "collector; the two epochs our rows may be in were charged")
        opt.accountant.add_zcdp(max(self.rho, s.rho_epoch))  # charged whatever the outcome: it was released
        self.next_epoch = s.epoch + 1
        if s.status == "refused":
            raise RuntimeError(f"the collector refused to release epoch {s.epoch} ({s.reason or 'its budget cap'}): "
                               f"no basis; rho {self.rho:g} was charged")
        if s.aggregator not in self.MECHANISMS or abs(s.rho_epoch - self.rho) > 1e-12 * max(1.0, self.rho):
            raise RuntimeError(f"the collector runs {s.aggregator} at rho_epoch {s.rho_epoch:g}; the guarantee "
                               f"is stated for --aggregator gaussian or power at rho_epoch {self.rho:g}")
        if self._own:
            self.aggregator = s.aggregator
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
