"""optimizer.py - the private step: from a batch's B x d per-example
gradients to the noisy gradient in each parameter's .grad, and the
accountant's charge for it.  Owns:

    PrivateStep       -- the step's rule (plain DP-SGD, GEP, projection) and
                         private_gradient(G, V), the ONE code both
                         optimizers run: clip, sum, noise, charge, record
                         for NoisyGradientBasis, divide by the expected
                         batch size
    DPOptimizer       -- wraps a torch optimizer; backward(x, y) takes the
                         per-example gradients by functorch
                         (PerExampleGradients) and makes the private
                         gradient, step() applies it
    PrivateOptimizer  -- the engine's (Opacus-shaped): a torch Optimizer
                         whose step() takes the per-example gradients the
                         hooks collected during loss.backward() (GradSampler)
    MODES

THE STEP'S GUARANTEE (add/remove-one-example adjacency): the batch is a
Poisson sample of the n examples at rate q (fresh secure randomness); each
example's contribution is clipped and the sum gets Gaussian noise: a
Poisson-subsampled Gaussian mechanism with noise multiplier sigma
(Mironov-Talwar-Zhang 2019), charged as one (Accountant.add_steps(q, sigma,
1)) on every step, an empty batch's too.  Plain DP-SGD: the contribution is
g clipped to C, the noise N(0, sigma^2 C^2 I_d).  GEP: the pair
(clip(V g, C_e), clip(g - V^T V g, C_r)) with noises sigma C_e / sqrt(a) and
sigma C_r / sqrt(1 - a): scaled by those noises the pair has norm <=
sqrt(a + 1 - a) = 1, so the step is that same mechanism with multiplier
sigma whatever a, C_e, C_r are.  Projection only is a = 1 without the
residual.  V is fixed before the step reads its batch (bases.py).  The
noisy sum is divided by the expected batch size q n, public, never by the
sampled size (which is private); what the wrapped optimizer does with the
result is post-processing.
"""
import math
import warnings
from typing import Any, Callable, Dict, List, Optional

import torch

from ..accountant import Accountant
from ..noise import NoiseSource
from .bases import NoisyGradientBasis
from .data import SAMPLING_CHECK_STEPS, FixedBatchWarning, not_poisson
from .gradients import GradSampler, PerExampleGradients, clip_factors, refuse_batch_statistics

MODES = ("dpsgd", "gep", "projection")


class PrivateStep:
    """The rule of a private step and the code that applies it
    (private_gradient), shared by DPOptimizer and PrivateOptimizer.

    mode: "dpsgd", "gep" or "projection" (GEP and projection fall back to a
      plain DP-SGD step while the basis source has no basis).
    noise_multiplier: sigma.  sample_rate, dataset_size: q and n; q n is
      the expected batch size the noisy sum is divided by.
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

    def _configure(self, *, mode: str, basis: Any, noise_multiplier: float, max_grad_norm: float,
                   sample_rate: float, dataset_size: int, embedding_clip: Optional[float],
                   residual_clip: Optional[float], embedding_share: Optional[float], basis_energy: float,
                   accountant: Optional[Accountant], seed: Optional[int]) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        if mode != "dpsgd" and basis is None:
            raise ValueError(f"mode {mode} needs a basis source (PrivateBasis, NoisyGradientBasis or FixedBasis)")
        if not (0 < noise_multiplier < math.inf and 0 < max_grad_norm < math.inf and 0 < sample_rate <= 1
                and dataset_size >= 1):
            raise ValueError("noise_multiplier and max_grad_norm must be finite and > 0, sample_rate in (0, 1], "
                             "dataset_size >= 1")
        if embedding_share is not None and not 0 < embedding_share < 1:
            raise ValueError(f"embedding_share must be in (0, 1), got {embedding_share}")
        if not 0 < basis_energy < 1:
            raise ValueError(f"basis_energy must be in (0, 1), got {basis_energy}")
        self.mode, self.basis, self.basis_energy = mode, basis, basis_energy
        self.sigma, self.max_grad_norm, self.q, self.n = noise_multiplier, max_grad_norm, sample_rate, dataset_size
        self.C_e = embedding_clip or max_grad_norm
        self.C_r = residual_clip or max_grad_norm / 2
        self.share = embedding_share
        self.accountant = accountant if accountant is not None else Accountant()
        self.noise = NoiseSource(seed, "dpsubspace.torch")
        self.steps = 0
        self.last: Dict[str, float] = {}

    @property
    def noise_multiplier(self) -> float:
        """sigma; settable between steps (a noise schedule): each step is
        charged at the sigma it was noised with."""
        return self.sigma

    @noise_multiplier.setter
    def noise_multiplier(self, sigma: float) -> None:
        if not 0 < sigma < math.inf:
            raise ValueError(f"noise_multiplier must be finite and > 0, got {sigma}")
        self.sigma = float(sigma)

    def _noise(self, sd: float, n: int, device: Any = "cpu") -> torch.Tensor:
        return torch.from_numpy(self.noise.gaussian(sd, n)).to(device)

    def private_gradient(self, G: torch.Tensor, V: Optional[torch.Tensor]) -> torch.Tensor:
        """The private gradient (a d-vector) of the batch whose per-example
        gradients are the rows of G (B x d, float32; B may be 0; consumed:
        GEP writes the residual into it), on basis V (k x d orthonormal rows,
        or None: plain DP-SGD).  Charges the accountant the step, records the
        noisy sum for a NoisyGradientBasis, and sets `last` (where the noise
        went: norms of private sums, diagnostics NOT for release)."""
        d = G.shape[1]
        if self.mode == "dpsgd" or V is None:
            # sum_i c_i g_i with c_i = min(1, C / ||g_i||): one pass for the norms, one for the weighted sum
            signal = torch.mv(G.t(), clip_factors(G, self.max_grad_norm))
            sd, sd_e, k = self.sigma * self.max_grad_norm, 0.0, 0
            noise = self._noise(sd, d, G.device)
            total = signal + noise
            where = {"signal": float(signal.norm()), "noise": float(noise.norm())}
        else:
            k = V.shape[0]
            V = V.to(G.device)
            W = (V @ G.t()).t()  # G's embedding, B x k (this order of the product measured 20% faster)
            sum_e = torch.mv(W.t(), clip_factors(W, self.C_e))
            if self.mode == "projection":
                sd_e = self.sigma * self.C_e
                z_e = self._noise(sd_e, k, G.device)
                total = (sum_e + z_e) @ V
                sd = 0.0
                where = {"signal": float(sum_e.norm()), "noise": float(z_e.norm()),
                         "signal_embedding": float(sum_e.norm()), "noise_embedding": float(z_e.norm())}
            else:
                a = self.share
                if a is None:  # the curvature-weighted rule (see the class's text)
                    f = self.basis_energy
                    r = math.sqrt(f / (1 - f)) * self.C_e / self.C_r
                    a = r / (1 + r)
                R = G.addmm_(W, V, alpha=-1)  # the residual, in G's memory (G is not needed again)
                sum_r = torch.mv(R.t(), clip_factors(R, self.C_r))
                sd_e, sd = self.sigma * self.C_e / math.sqrt(a), self.sigma * self.C_r / math.sqrt(1 - a)
                z_e, z_r = self._noise(sd_e, k, G.device), self._noise(sd, d, G.device)
                signal = sum_e @ V + sum_r
                total = signal + z_e @ V + z_r
                where = {"signal": float(signal.norm()), "noise": float((z_e @ V + z_r).norm()),
                         "signal_embedding": float(sum_e.norm()), "noise_embedding": float(z_e.norm()),
                         "signal_residual": float(sum_r.norm()), "noise_residual": float(z_r.norm())}
        self.last = {"noise_sd": sd, "embedding_noise_sd": sd_e, "k": float(k), **where}
        self.accountant.add_steps(self.q, self.sigma, 1)  # every step, an empty batch's too
        self.steps += 1
        if isinstance(self.basis, NoisyGradientBasis):
            self.basis.record(total, sd, sd_e, k)
        return total / (self.q * self.n)  # the expected batch size: public

    @staticmethod
    def _write_grads(params: List[torch.nn.Parameter], parts: List[torch.Tensor]) -> None:
        """The private gradient into .grad; a parameter frozen since gets
        none (it does not move; its columns were clipped and noised with the
        rest, and leaving part of a private vector out is post-processing)."""
        for p, part in zip(params, parts):
            p.grad = part.to(p.dtype).clone() if p.requires_grad else None

    def get_epsilon(self, delta: float) -> float:
        """eps at delta of everything so far: the steps and the basis releases."""
        return self.accountant.get_epsilon(delta)


class DPOptimizer(PrivateStep):
    """DP-SGD around a torch optimizer.  Each training step:
        loss = opt.backward(x[idx], y[idx])   # idx from poisson_batches
        opt.step()
    backward() computes the per-example gradients of loss_fn (functorch:
    PerExampleGradients), makes the private gradient (PrivateStep, whose
    text has the keywords and the GEP rule), writes it into each
    parameter's .grad and charges the accountant one subsampled-Gaussian
    step (q = sample_rate, noise multiplier).  The basis source's update
    runs first, before this step's gradients are read."""

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                 loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], *, noise_multiplier: float,
                 max_grad_norm: float, sample_rate: float, dataset_size: int, mode: str = "dpsgd",
                 basis: Any = None, embedding_clip: Optional[float] = None, residual_clip: Optional[float] = None,
                 embedding_share: Optional[float] = None, basis_energy: float = 0.5,
                 accountant: Optional[Accountant] = None,
                 seed: Optional[int] = None, chunk: int = 512) -> None:
        self._configure(mode=mode, basis=basis, noise_multiplier=noise_multiplier, max_grad_norm=max_grad_norm,
                        sample_rate=sample_rate, dataset_size=dataset_size, embedding_clip=embedding_clip,
                        residual_clip=residual_clip, embedding_share=embedding_share, basis_energy=basis_energy,
                        accountant=accountant, seed=seed)
        refuse_batch_statistics(model)
        self.model, self.optimizer = model, optimizer
        self.batch_sizes: List[int] = []
        self.fixed_batch_warned = False
        self.grads = PerExampleGradients(model, loss_fn, chunk)
        self.loss_fn = loss_fn
        self.params = [p for p in model.parameters() if p.requires_grad]

    def backward(self, x: torch.Tensor, y: torch.Tensor) -> float:
        """The private gradient of the sampled batch (x, y) into .grad; returns
        the batch's mean loss (NaN for an empty batch; not private: for
        progress lines only)."""
        self._check_sampling(len(x))
        V = self.basis.update(self, self.steps) if self.basis is not None else None
        G = self.grads(x, y) if len(x) else torch.zeros((0, self.grads.d))
        loss = float(self.grads.last_losses.mean()) if len(x) else math.nan
        g = self.private_gradient(G, V)
        self._write_grads(self.params, self.grads.unflatten(g))
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


class PrivateOptimizer(PrivateStep, torch.optim.Optimizer):
    """The optimizer PrivacyEngine.make_private returns (Opacus' DPOptimizer
    in shape): the ordinary loop

        optimizer.zero_grad(); loss = criterion(model(x), y); loss.backward(); optimizer.step()

    where loss.backward() fills the GradSampler's per-example gradients and
    step() updates the basis (its own sample, charged), makes the private
    gradient (PrivateStep.private_gradient: clipped to max_grad_norm over
    all parameters at once, summed, noised with sd noise_multiplier *
    max_grad_norm, divided by expected_batch_size = q n), writes it into
    .grad, and runs the wrapped optimizer's step on it.  step() without a
    loss.backward() since the last step is refused: an empty batch goes
    through the model and the loss too (its step adds the noise and is
    charged).  The non-private .grad that loss.backward() leaves until
    step() must not be read.  closure: run once under enable_grad (as
    Opacus); the wrapped optimizer's step gets none.

    A torch Optimizer sharing the wrapped one's param_groups, state and
    defaults (learning-rate schedulers work on it); original_optimizer is
    the wrapped one."""

    def __init__(self, optimizer: torch.optim.Optimizer, sampler: GradSampler, *, noise_multiplier: float,
                 max_grad_norm: float, sample_rate: float, dataset_size: int, grads: Any = None,
                 mode: str = "dpsgd", basis: Any = None, embedding_clip: Optional[float] = None,
                 residual_clip: Optional[float] = None, embedding_share: Optional[float] = None,
                 basis_energy: float = 0.5, accountant: Optional[Accountant] = None,
                 seed: Optional[int] = None) -> None:
        # not Optimizer.__init__: the wrapped optimizer's param_groups, state and defaults are the ones used
        self.original_optimizer = optimizer
        self._configure(mode=mode, basis=basis, noise_multiplier=noise_multiplier, max_grad_norm=max_grad_norm,
                        sample_rate=sample_rate, dataset_size=dataset_size, embedding_clip=embedding_clip,
                        residual_clip=residual_clip, embedding_share=embedding_share, basis_energy=basis_energy,
                        accountant=accountant, seed=seed)
        ours = {id(p) for p in sampler.params}
        stray = [p for g in optimizer.param_groups for p in g["params"] if p.requires_grad and id(p) not in ours]
        if stray:
            raise ValueError(f"the optimizer updates {len(stray)} parameter tensors that are not the module's "
                             "trainable parameters: their gradients would not be private")
        self.sampler, self.grads, self.params = sampler, grads, sampler.params
        self.expected_batch_size = sample_rate * dataset_size

    # the wrapped optimizer's, shared
    @property
    def param_groups(self) -> List[Dict[str, Any]]:  # type: ignore[override]
        return self.original_optimizer.param_groups

    @param_groups.setter
    def param_groups(self, value: List[Dict[str, Any]]) -> None:
        self.original_optimizer.param_groups = value

    @property
    def state(self) -> Any:  # type: ignore[override]
        return self.original_optimizer.state

    @state.setter
    def state(self, value: Any) -> None:
        self.original_optimizer.state = value

    @property
    def defaults(self) -> Dict[str, Any]:  # type: ignore[override]
        return self.original_optimizer.defaults

    @defaults.setter
    def defaults(self, value: Dict[str, Any]) -> None:
        self.original_optimizer.defaults = value

    def state_dict(self) -> Dict[str, Any]:
        return self.original_optimizer.state_dict()

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        self.original_optimizer.load_state_dict(state_dict)

    def add_param_group(self, param_group: Dict[str, Any]) -> None:
        raise RuntimeError("parameters added after make_private have no per-example gradients: make the "
                           "optimizer with all of them first")

    def __repr__(self) -> str:
        return (f"PrivateOptimizer(noise_multiplier={self.sigma:g}, max_grad_norm={self.max_grad_norm:g}, "
                f"expected_batch_size={self.expected_batch_size:g}, mode={self.mode}, "
                f"original_optimizer={self.original_optimizer!r})")

    def _refuse_unfrozen(self) -> None:
        """RuntimeError, before anything is stepped or charged, when the
        wrapped optimizer holds a trainable parameter that was frozen at
        make_private: it has no per-example gradients (no columns), so its
        .grad is the raw batch gradient and stepping on it would not be
        private."""
        ours = {id(p) for p in self.params}
        names = {id(p): n for n, p in self.sampler.model.named_parameters()}
        stray = [names.get(id(p), "?") for g in self.original_optimizer.param_groups for p in g["params"]
                 if p.requires_grad and id(p) not in ours]
        if stray:
            raise RuntimeError(f"parameters {', '.join(stray)} were frozen when make_private ran and are trainable "
                               "now: they have no per-example gradients, and a step on their .grad would not be "
                               "private.  Make them trainable before make_private (freezing with "
                               "requires_grad_(False) after it is honoured: a frozen parameter does not move)")

    def zero_grad(self, set_to_none: bool = False) -> None:
        """The wrapped optimizer's zero_grad, and this step's per-example
        gradients dropped."""
        self.original_optimizer.zero_grad(set_to_none=set_to_none)
        self.sampler.zero_grad()

    def step(self, closure: Optional[Callable[[], Any]] = None) -> Any:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self._refuse_unfrozen()
        G = self.sampler.take()
        if G is None:
            raise RuntimeError("optimizer.step() with no loss.backward() since the last step: the private step "
                               "needs the batch's per-example gradients (an empty Poisson batch goes through "
                               "the model and loss.backward() too: skipping it would reveal that it was empty)")
        V = self.basis.update(self, self.steps) if self.basis is not None else None
        g = self.private_gradient(G, V)
        self._write_grads(self.params, self.sampler.unflatten(g))
        self.original_optimizer.step()
        return loss
