"""dpsubspace.torch - DP-SGD for PyTorch models with private subspaces, the
residual kept (GEP, Yu et al. 2021), and one accountant for the whole run
(DESIGN 7.4, issue 12 item 3).  Needs Debian's python3-torch (1.13: the
per-example gradients are functorch's vmap(grad)).

    PerExampleGradients -- per-example gradients of any nn.Module, flattened
                           in parameter order (B x d)
    parameter_groups    -- the model's public parameter groups (widths)
    DPOptimizer         -- wraps a torch optimizer: backward(x, y) makes the
                           private gradient (plain DP-SGD, GEP or projection),
                           step() applies it; Poisson batches by
                           poisson_batches(); get_epsilon(delta)
    PrivateBasis        -- a basis from the library's estimator on a fresh
                           Poisson sample's clipped gradients (costs rho)
    CollectorBasis      -- a basis from a dps-collector this run feeds
                           (its own samples in random slots of one epoch
                           each; costs rho_epoch)
    WeakBasisWarning, FixedBatchWarning -- a basis release near the random
                           level; batches that are not Poisson samples
    NoisyGradientBasis  -- a basis from the already released noisy gradients
                           (post-processing: free)
    FixedBasis          -- a given basis (random: a lower bound; a non-private
                           top-k: an upper bound that is NOT private)

THE GUARANTEE of a run (add/remove-one-example adjacency; every term below
is under it, and dpsubspace.Accountant sums them at each Renyi order):
  - each step reads a Poisson sample of the n examples (rate q, fresh
    secure randomness: NoiseSource), clips each example's contribution and
    adds Gaussian noise to the sum: a Poisson-subsampled Gaussian mechanism
    with noise multiplier sigma (Mironov-Talwar-Zhang 2019).  For GEP the
    contribution is the pair (clip(V g, C_e), clip(g - V^T V g, C_r)) with
    noises sigma C_e / sqrt(a) and sigma C_r / sqrt(1 - a): scaled by those
    noises the pair has norm <= sqrt(a + 1 - a) = 1, so the step is that
    same mechanism with multiplier sigma whatever a, C_e, C_r are.
    Projection only is a = 1 without the residual; plain DP-SGD clips g to C.
  - V must be fixed before the step's sample is drawn, from public data or
    earlier private outputs: PrivateBasis releases it from its OWN Poisson
    sample (rate basis_rate) through SubspaceEstimator, and charges it by
    charge_basis_release: a one-step release as a Poisson-subsampled
    Gaussian (amplified), one of several steps (random blocks) rho/2 as
    zCDP (= RDP a rho/2 at every order a), the arguments in its text;
    NoisyGradientBasis uses released gradients only (no charge); FixedBasis
    charges nothing (the caller vouches that its basis is public).
  - the noisy sums are divided by the expected batch size q n (public), never
    by the sampled size.
  - assumed: the examples are the n rows given (each one person's), the
    model's initial weights and all hyper-parameters are public (chosen
    without looking at these examples), and nothing else reads them.
"""
import dataclasses
import math
import time
import warnings
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import torch

try:  # torch >= 2.0
    from torch.func import functional_call, grad, vmap
except ImportError:  # torch 1.13 (Debian bookworm): functorch
    from functorch import grad, vmap
    from torch.nn.utils.stateless import functional_call

from .accountant import Accountant
from .estimator import Release, SubspaceEstimator
from .noise import NoiseSource

MODES = ("dpsgd", "gep", "projection")


# ------------------------------------------------------------------ gradients
class PerExampleGradients:
    """Per-example gradients of loss_fn(model(x_i), y_i) w.r.t. the model's
    trainable parameters, as a B x d float32 matrix (parameters in
    named_parameters() order), by functorch vmap(grad) in chunks of `chunk`
    examples (memory: chunk x d plus the activations of chunk examples)."""

    def __init__(self, model: torch.nn.Module, loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                 chunk: int = 512) -> None:
        self.model, self.loss_fn, self.chunk = model, loss_fn, chunk
        self.names = [n for n, p in model.named_parameters() if p.requires_grad]
        self.shapes = [p.shape for n, p in model.named_parameters() if p.requires_grad]
        self.d = sum(int(np.prod(s)) for s in self.shapes)

        def loss_one(params: Dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor):
            loss = self.loss_fn(functional_call(self.model, params, (x.unsqueeze(0),)), y.unsqueeze(0))
            return loss, loss.detach()

        self._grad = vmap(grad(loss_one, has_aux=True), in_dims=(None, 0, 0))
        self.last_losses: Optional[torch.Tensor] = None

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The B x d per-example gradients; their losses in last_losses."""
        params = {n: p.detach() for n, p in self.model.named_parameters() if p.requires_grad}
        out = torch.empty((len(x), self.d), dtype=torch.float32)
        losses = torch.empty(len(x))
        for s in range(0, len(x), self.chunk):
            g, loss = self._grad(params, x[s:s + self.chunk], y[s:s + self.chunk])
            col = 0
            for n in self.names:  # each parameter's block straight into its columns (no concatenated copy)
                block = g[n].reshape(g[n].shape[0], -1)
                out[s:s + self.chunk, col:col + block.shape[1]] = block
                col += block.shape[1]
            losses[s:s + self.chunk] = loss
        self.last_losses = losses
        return out

    def unflatten(self, v: torch.Tensor) -> List[torch.Tensor]:
        """A d-vector as tensors shaped like the parameters."""
        parts, off = [], 0
        for s in self.shapes:
            w = int(np.prod(s))
            parts.append(v[off:off + w].reshape(s))
            off += w
        return parts


def parameter_groups(model: torch.nn.Module, by: str = "tensor") -> List[int]:
    """The widths of the model's public parameter groups, in the order of
    PerExampleGradients' columns: by "tensor" (each parameter tensor) or
    "layer" (the parameters of each module that owns some, together)."""
    named = [(n, p.numel()) for n, p in model.named_parameters() if p.requires_grad]
    if by == "tensor":
        return [w for _, w in named]
    if by != "layer":
        raise ValueError(f"by must be 'tensor' or 'layer', got {by!r}")
    widths: List[int] = []
    last = None
    for n, w in named:
        owner = n.rsplit(".", 1)[0] if "." in n else ""
        if owner == last:
            widths[-1] += w
        else:
            widths.append(w)
        last = owner
    return widths


def clip_rows(G: torch.Tensor, C: float) -> torch.Tensor:
    """Scale each row of G (in place) to norm at most C; returns G."""
    norms = G.norm(dim=1, keepdim=True)
    G.mul_(torch.clamp(C / (norms + 1e-12), max=1.0))
    return G


def poisson_batches(n: int, sample_rate: float, steps: int, noise: NoiseSource) -> Iterator[np.ndarray]:
    """`steps` Poisson samples of range(n), each index kept with probability
    sample_rate (secure randomness from `noise`): the sampling the accountant's
    subsampled-Gaussian bound assumes.  A sample may be empty."""
    for _ in range(steps):
        yield noise.poisson_sample(n, sample_rate)


# --------------------------------------------------------------------- bases
class FixedBasis:
    """A basis given by the caller (k x d orthonormal rows), charged nothing:
    it must be public (a random basis, or one from public data).  A
    non-private top-k of the private examples here makes the run NOT
    private (an upper bound for experiments): say so with public=False."""

    def __init__(self, basis: Any, public: bool = True) -> None:
        self.V = torch.as_tensor(np.asarray(basis, dtype=np.float32))
        self.public = public

    def update(self, opt: "DPOptimizer", step: int) -> Optional[torch.Tensor]:
        return self.V


class WeakBasisWarning(UserWarning):
    """A basis release at or near the random level (the library's WEAK
    flag: noise_level >= NOISE_LEVEL_WEAK): projecting on it keeps little
    of the gradient."""


ON_WEAK = ("warn", "skip")


class _ReleasedBasis:
    """What PrivateBasis and CollectorBasis share: the basis in use, and
    what a WEAK release does -- on_weak "warn" uses it and warns
    (WeakBasisWarning, with its noise level), "skip" keeps the previous
    basis (plain DP-SGD steps while there is none) and warns.  Either way
    the release was charged: it was made."""

    def __init__(self, on_weak: str) -> None:
        if on_weak not in ON_WEAK:
            raise ValueError(f"on_weak must be one of {', '.join(ON_WEAK)}, got {on_weak!r}")
        self.on_weak = on_weak
        self.V: Optional[torch.Tensor] = None
        self.releases = 0
        self.weak_releases = 0

    def _take(self, basis: Optional[np.ndarray], weak: bool, noise_level: float, step: int) -> None:
        self.releases += 1
        if basis is None:
            return
        if weak:
            self.weak_releases += 1
            keep = self.on_weak == "skip"
            none = self.V is None
            warnings.warn(f"the basis released at step {step} is WEAK (noise level {noise_level:.2f}: near the "
                          f"random level, it holds little of the gradient; its cost was charged); "
                          + (("no basis yet: plain DP-SGD steps" if none else "kept the previous basis")
                             + " (on_weak='skip')" if keep else
                             "using it" + ("" if none else " (on_weak='skip' keeps the previous one)"))
                          + ".  A release keeps more with a larger rho or sample (basis_rate), or with the "
                          "gaussian mechanism (dense) where its width allows", WeakBasisWarning, stacklevel=4)
            if keep:
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
    one is used or skipped as on_weak says (_ReleasedBasis).  The sample's
    gradients are streamed to the estimator `chunk` examples at a time
    (memory: chunk x d, not the sample's rows x d).  mechanism, rho, groups
    and the other keywords go to SubspaceEstimator (one estimator for the
    run: a power iteration warm-starts from the last released basis,
    public).

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
    Every release the estimator made during an update is charged, not only
    the last.

    releases_ lists the releases as published: rows_used is None there,
    since the sample's size is not covered by the charge (it is private;
    the estimator's own records, which hold it, are not exposed).
    noise_level of a T-step release is computed from public quantities (the
    step count, not the blocks' sizes)."""

    def __init__(self, data_x: torch.Tensor, data_y: torch.Tensor, n_components: int, rho: float,
                 basis_rate: float, every: int, mechanism: str = "gaussian", seed: Optional[int] = None,
                 amplify: bool = True, chunk: int = 4096, on_weak: str = "warn", **estimator_kwargs: Any) -> None:
        super().__init__(on_weak)
        if every < 1:
            raise ValueError(f"every must be >= 1, got {every}")
        if mechanism not in ("gaussian", "power"):  # the streaming mechanisms with an add/remove statement
            raise ValueError(f"mechanism must be gaussian or power, got {mechanism!r}")
        bad = [k for k in _UNACCOUNTED_KEYWORDS if k in estimator_kwargs]
        if bad:
            raise ValueError(f"{' and '.join(bad)} would make the estimator release every epoch of t*m rows that "
                             "fills during an update, and PrivateBasis charges one release per update: leave "
                             "them out (each update is one release of its own sample)")
        if not 0 < basis_rate <= 1:
            raise ValueError(f"basis_rate must be in (0, 1], got {basis_rate}")
        self.data_x, self.data_y, self.rate, self.every, self.amplify = data_x, data_y, basis_rate, every, amplify
        self.chunk = chunk
        self._estimator = SubspaceEstimator(n_components, rho=rho, mechanism=mechanism, seed=seed,
                                            **estimator_kwargs)
        self.releases_: List[Release] = []
        self.amplified = 0

    def _charge(self, opt: "DPOptimizer", rel: Release, blocks: int) -> Release:
        """Charge one release cut into `blocks` random blocks here; return it
        as published (see the class's text).  The mechanism is gaussian or
        power (checked at construction).  The published rho_add_remove is
        the release's zCDP bound, rho/2 (an amplified release is charged
        less)."""
        self.amplified += charge_basis_release(opt.accountant, rel.rho_epoch, self.rate, blocks, self.amplify)
        return dataclasses.replace(rel, rows_used=None, rho_add_remove=rel.rho_epoch / 2)

    def update(self, opt: "DPOptimizer", step: int) -> Optional[torch.Tensor]:
        if step % self.every:
            return self.V
        est, before, d = self._estimator, len(self._estimator.releases_), opt.grads.d
        idx = opt.noise.poisson_sample(len(self.data_x), self.rate)
        T = est.power_blocks_next(d)
        block = opt.noise.below(T, len(idx)) if T > 1 else np.zeros(len(idx), dtype=np.int64)
        if not len(idx):  # the mechanism on an empty sample: a zero row adds nothing to the sum, the noise is drawn
            est.partial_fit(torch.zeros((1, d)))
        for b in range(max(T, 1)):
            part = idx[block == b]
            for s in range(0, len(part), self.chunk):  # streamed: chunk x d gradients in memory, not the sample's
                ix = torch.as_tensor(part[s:s + self.chunk])
                est.partial_fit(clip_rows(opt.grads(self.data_x[ix], self.data_y[ix]), opt.max_grad_norm))
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
    is that epoch's snapshot, taken from `subscriber`.

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
    jointly quasi-convex, van Erven-Harremoes 2014, Thm 13).  (Slots taken
    in index order, as the first version did, make an added example shift
    every later row: each later power block then sees a replaced row.)
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

    def __init__(self, producer: Any, subscriber: Any, data_x: torch.Tensor, data_y: torch.Tensor,
                 epoch_rows: int, every: int, basis_rho: float, first_epoch: int = 0, timeout: float = 120.0,
                 on_weak: str = "warn") -> None:
        super().__init__(on_weak)
        if every < 1 or epoch_rows < 1 or not basis_rho > 0:
            raise ValueError("every and epoch_rows must be >= 1, basis_rho > 0")
        self.producer, self.sub, self.X, self.Y = producer, subscriber, data_x, data_y
        self.rows, self.every, self.rho, self.timeout = epoch_rows, every, basis_rho, timeout
        self.cut, self.next_epoch = 0, first_epoch

    def rate(self, opt: "DPOptimizer") -> float:
        """The sample's rate, 0.9 epoch_rows / n from the PUBLIC dataset size
        the optimizer was given (not len(data_x), which adding an example
        changes: the coupling needs the same rate on both sides)."""
        return min(1.0, 0.9 * self.rows / opt.n)

    def update(self, opt: "DPOptimizer", step: int) -> Optional[torch.Tensor]:
        if step % self.every:
            return self.V
        idx = opt.noise.poisson_sample(len(self.X), self.rate(opt))
        if len(idx) > self.rows:  # a uniformly random epoch_rows of the sample
            idx, self.cut = idx[opt.noise.slots(len(idx), self.rows)], self.cut + 1
        rows = torch.zeros(self.rows, opt.grads.d)
        if len(idx):
            ix = torch.as_tensor(idx)
            slots = torch.as_tensor(opt.noise.slots(self.rows, len(idx)))
            rows[slots] = clip_rows(opt.grads(self.X[ix], self.Y[ix]), opt.max_grad_norm)
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

    def update(self, opt: "DPOptimizer", step: int) -> Optional[torch.Tensor]:
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


# ----------------------------------------------------------------- optimizer
SAMPLING_CHECK_STEPS = 10


class FixedBatchWarning(UserWarning):
    """Batches whose sizes do not vary as Poisson sampling's do."""


def not_poisson(sizes: Sequence[int], n: int, q: float) -> List[str]:
    """Why SAMPLING_CHECK_STEPS batch sizes do not look like Poisson samples
    of n at rate q (DPOptimizer._check_sampling has the rule and its false-
    alarm rate); empty when they do."""
    s = np.asarray(sizes, dtype=float)
    v, mean = n * q * (1 - q), n * q
    why = []
    if v >= 4 and s.var(ddof=1) < v / 10:
        why.append(f"sizes of variance {s.var(ddof=1):.3g} where Poisson sampling gives {v:.3g}")
    if abs(s.mean() - mean) > 6 * math.sqrt(v / len(s)) + 1:
        why.append(f"a mean size of {s.mean():.1f} where the declared rate gives {mean:.1f}")
    return why


def refuse_batch_statistics(model: torch.nn.Module) -> None:
    """ValueError for a model with batch normalisation: its output for one
    example depends on the others in the batch, so there is no per-example
    gradient to clip and one example moves every other's contribution (as
    Opacus refuses it).  GroupNorm and LayerNorm are per-example."""
    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.modules.batchnorm._BatchNorm):
            raise ValueError(f"module {name or type(mod).__name__} ({type(mod).__name__}) normalises with "
                             "statistics of the whole batch: per-example gradients are not defined and one "
                             "example changes the others' -- replace it with GroupNorm or LayerNorm "
                             "(e.g. torch.nn.GroupNorm(min(32, C), C)) for DP-SGD")

class DPOptimizer:
    """DP-SGD around a torch optimizer.  Each training step:
        loss = opt.backward(x[idx], y[idx])   # idx from poisson_batches
        opt.step()
    backward() computes the per-example gradients, clips, noises (mode
    "dpsgd", "gep" or "projection"; GEP and projection fall back to a plain
    DP-SGD step while the basis source has no basis), writes the private
    gradient into each parameter's .grad and charges the accountant one
    subsampled-Gaussian step (q = sample_rate, noise multiplier).

    max_grad_norm: C, the clip of plain DP-SGD and of the basis's rows.
    embedding_clip, residual_clip: GEP's C_e (default C) and C_r (default C/2).
    embedding_share: a, the share of the step's privacy on the embedding
      (noise sd sigma C_e / sqrt(a) on each of its k coordinates, sigma C_r /
      sqrt(1 - a) on each of the d of the residual).  What noise costs is
      its variance weighted by the loss's curvature along it, and the
      curvature (the Fisher, E g g^T) sits where the gradients' energy is:
      with a share f of it in the k basis directions, the cost
      k (f / k) C_e^2 / a + d ((1 - f) / d) C_r^2 / (1 - a) is least at
      a / (1 - a) = sqrt(f / (1 - f)) C_e / C_r: the default, with f =
      basis_energy.  (Minimising the noise's total energy instead,
      a / (1 - a) = sqrt(k / d) C_e / C_r, puts a ~ 0.04 and 5 times plain
      DP-SGD's noise on each basis direction at k = 10, d = 26 010: where
      the signal is.)  At that a the cost is sigma^2 (sqrt(f) C_e +
      sqrt(1 - f) C_r)^2, plain DP-SGD's sigma^2 C^2.  When every gradient
      is clipped to C (small C, as Tramer-Boneh's 0.1) its parts have norms
      sqrt(f) C and sqrt(1 - f) C, and clips that do not cut them give
      sqrt(f) C_e + sqrt(1 - f) C_r >= f C + (1 - f) C = C: no less
      noise cost than plain DP-SGD (equal at C_e = sqrt(f) C, C_r =
      sqrt(1 - f) C, a = f).  GEP lowers it only by clipping a part below
      its norm (C_r < sqrt(1 - f) C: bias traded for noise), or where the
      curvature is more concentrated in the basis than the energy is.  At
      the defaults (C_e = C, C_r = C/2, a = 2/3) and f = 0.7 it is 1.28
      times DP-SGD's (1.23 at the best a).
    basis_energy: f above, the share of gradient energy the basis is assumed
      to hold (default 0.5; a public choice, not measured on the data).
    seed: None (secure noise and sampling) or an int (reproducible, NOT private).
    """

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                 loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], *, noise_multiplier: float,
                 max_grad_norm: float, sample_rate: float, dataset_size: int, mode: str = "dpsgd",
                 basis: Any = None, embedding_clip: Optional[float] = None, residual_clip: Optional[float] = None,
                 embedding_share: Optional[float] = None, basis_energy: float = 0.5,
                 accountant: Optional[Accountant] = None,
                 seed: Optional[int] = None, chunk: int = 512) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        if mode != "dpsgd" and basis is None:
            raise ValueError(f"mode {mode} needs a basis source (PrivateBasis, NoisyGradientBasis or FixedBasis)")
        if not (noise_multiplier > 0 and max_grad_norm > 0 and 0 < sample_rate <= 1 and dataset_size >= 1):
            raise ValueError("noise_multiplier and max_grad_norm must be > 0, sample_rate in (0, 1], dataset_size >= 1")
        if embedding_share is not None and not 0 < embedding_share < 1:
            raise ValueError(f"embedding_share must be in (0, 1), got {embedding_share}")
        if not 0 < basis_energy < 1:
            raise ValueError(f"basis_energy must be in (0, 1), got {basis_energy}")
        self.basis_energy = basis_energy
        self.model, self.optimizer, self.mode, self.basis = model, optimizer, mode, basis
        self.sigma, self.max_grad_norm, self.q, self.n = noise_multiplier, max_grad_norm, sample_rate, dataset_size
        self.C_e = embedding_clip or max_grad_norm
        self.C_r = residual_clip or max_grad_norm / 2
        self.share = embedding_share
        refuse_batch_statistics(model)
        self.accountant = accountant if accountant is not None else Accountant()
        self.noise = NoiseSource(seed, "dpsubspace.torch")
        self.batch_sizes: List[int] = []
        self.fixed_batch_warned = False
        self.grads = PerExampleGradients(model, loss_fn, chunk)
        self.loss_fn = loss_fn
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.steps = 0
        self.last: Dict[str, float] = {}

    def _noise(self, sd: float, n: int) -> torch.Tensor:
        return torch.from_numpy(self.noise.gaussian(sd, n))

    def backward(self, x: torch.Tensor, y: torch.Tensor) -> float:
        """The private gradient of the sampled batch (x, y) into .grad; returns
        the batch's mean loss (NaN for an empty batch; not private: for
        progress lines only)."""
        self._check_sampling(len(x))
        V = self.basis.update(self, self.steps) if self.basis is not None else None
        d = self.grads.d
        G = self.grads(x, y) if len(x) else torch.zeros((0, d))
        loss = float(self.grads.last_losses.mean()) if len(x) else math.nan
        B = self.q * self.n  # the expected batch size: public
        if self.mode == "dpsgd" or V is None:
            clip_rows(G, self.max_grad_norm)
            sd, sd_e, k = self.sigma * self.max_grad_norm, 0.0, 0
            signal = G.sum(0)
            noise = self._noise(sd, d)
            total = signal + noise
            where = {"signal": float(signal.norm()), "noise": float(noise.norm())}
        else:
            k = V.shape[0]
            W = G @ V.T
            if self.mode == "projection":
                clip_rows(W, self.C_e)
                sd_e = self.sigma * self.C_e
                z_e = self._noise(sd_e, k)
                total = (W.sum(0) + z_e) @ V
                sd = 0.0
                where = {"signal": float(W.sum(0).norm()), "noise": float(z_e.norm()),
                         "signal_embedding": float(W.sum(0).norm()), "noise_embedding": float(z_e.norm())}
            else:
                a = self.share
                if a is None:  # the curvature-weighted rule (see the class's text)
                    f = self.basis_energy
                    r = math.sqrt(f / (1 - f)) * self.C_e / self.C_r
                    a = r / (1 + r)
                R = G.addmm_(W, V, alpha=-1)  # the residual, in G's memory (G is not needed again)
                clip_rows(W, self.C_e)
                clip_rows(R, self.C_r)
                sd_e, sd = self.sigma * self.C_e / math.sqrt(a), self.sigma * self.C_r / math.sqrt(1 - a)
                z_e, z_r = self._noise(sd_e, k), self._noise(sd, d)
                signal = W.sum(0) @ V + R.sum(0)
                total = signal + z_e @ V + z_r
                where = {"signal": float(signal.norm()), "noise": float((z_e @ V + z_r).norm()),
                         "signal_embedding": float(W.sum(0).norm()), "noise_embedding": float(z_e.norm()),
                         "signal_residual": float(R.sum(0).norm()), "noise_residual": float(z_r.norm())}
        # where the noise goes (diagnostics; the norms of private sums: not for release)
        self.last = {"noise_sd": sd, "embedding_noise_sd": sd_e, "k": float(k), **where}
        self.accountant.add_steps(self.q, self.sigma, 1)
        if isinstance(self.basis, NoisyGradientBasis):
            self.basis.record(total, sd, sd_e, k)
        g = total / B
        for p, part in zip(self.params, self.grads.unflatten(g)):
            p.grad = part.to(p.dtype).clone()
        self.steps += 1
        return loss

    def _check_sampling(self, size: int) -> None:
        """Warn when the first SAMPLING_CHECK_STEPS = 10 batches do not look
        like Poisson samples at the declared rate: the accounting is for
        sizes Binomial(n, q), mean n q, variance v = n q (1 - q).  ONE test,
        on those 10 sizes (a test on every window of a long run would fire on
        true Poisson batches: 18% of 1 000-step runs):
        - fixed sizes: sample variance below v / 10 where v >= 4 (the normal
          approximation to the binomial is good there); Poisson sizes do that
          with probability P(chi2_9 < 0.9) = 3.6e-4;
        - another rate: a mean off n q by more than 6 sd(mean) + 1, i.e.
          6 sqrt(v / 10) + 1 (Poisson sizes: probability at most 1/36 by
          Chebyshev's inequality, about 2e-9 by the normal approximation)."""
        self.batch_sizes.append(size)
        if len(self.batch_sizes) != SAMPLING_CHECK_STEPS:
            return
        why = not_poisson(self.batch_sizes, self.n, self.q)
        if why:
            self.fixed_batch_warned = True
            warnings.warn(f"the first {SAMPLING_CHECK_STEPS} batches had {' and '.join(why)} (rate {self.q:g} of "
                          f"{self.n}): the accounting (a Poisson-subsampled Gaussian per step at that rate) does "
                          "not hold for them -- draw them with poisson_batches(n, sample_rate, ...) at the rate "
                          "the optimizer was given", FixedBatchWarning, stacklevel=3)

    def step(self) -> None:
        """Apply the private gradient (the wrapped optimizer's step)."""
        self.optimizer.step()

    def zero_grad(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)

    def get_epsilon(self, delta: float) -> float:
        """eps at delta of everything so far: the steps and the basis releases."""
        return self.accountant.get_epsilon(delta)
