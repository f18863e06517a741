"""engine.py - PrivacyEngine: Opacus' entry point over this package's
private step, so that a DP-SGD script written for Opacus runs with its
import changed to `from dpsubspace.torch import PrivacyEngine`.  Owns the
wiring (hooks on the module, the optimizer, the Poisson data loader, the
basis's examples) and the budget's plan (make_private_with_epsilon).

    engine = PrivacyEngine()                      # accountant "pld" (or "rdp")
    model, optimizer, loader = engine.make_private_with_epsilon(
        module=model, optimizer=optimizer, data_loader=loader,
        target_epsilon=3.0, target_delta=1e-5, epochs=10, max_grad_norm=1.0)
    for x, y in loader:
        optimizer.zero_grad(); criterion(model(x), y).backward(); optimizer.step()
    engine.get_epsilon(1e-5)

THE GUARANTEE of a run made this way (add/remove-one-example adjacency):
  - the data loader's batches are Poisson samples of its dataset at rate
    q = 1/len(data_loader) (DPDataLoader: each example independently, fresh
    secure randomness), len(data_loader) of them an epoch, empty ones
    included;
  - each optimizer.step() is the step of optimizer.py's text: per-example
    gradients clipped to max_grad_norm C (flat, over all parameters),
    summed, N(0, sigma^2 C^2) noise per coordinate (or GEP / projection on
    a basis), divided by the expected batch size q n, public; charged to
    engine.accountant as one Poisson-subsampled Gaussian step (q, sigma);
  - a basis source (subspace=) releases from its own Poisson sample of the
    same dataset and charges the same accountant (bases.py);
  - engine.get_epsilon(delta) is the accountant's eps for everything
    charged.
  Assumed, as by Opacus: n = len(dataset) is public (q and q n are computed
  from it and len(data_loader)); each example is one person's; the initial
  weights and every setting are public; the loss is a sum or mean over the
  batch of per-example terms and no module mixes examples (BatchNorm is
  refused; see gradients.py for what is not detected); nothing else reads
  the dataset.  NOT covered: poisson_sampling=False (FixedBatchWarning:
  fixed batches are another mechanism, the eps stated is not theirs), and
  a .grad read between loss.backward() and step() (non-private).

accountant: "pld" (privacy loss distributions, tight), "rdp" (Renyi DP, an
upper bound, looser); Opacus' "prv" (privacy random variables, the same
tight numerical composition) is taken as "pld".  Opacus' "gdp" (a central
limit approximation, not an upper bound) is refused.
"""
import logging
import warnings
import weakref
from typing import Any, Callable, Optional, Tuple

import torch

from ..accountant import Accountant, noise_multiplier
from .bases import PrivateBasis
from .data import DatasetExamples, DPDataLoader, FixedBatchWarning
from .gradients import GradSampler, SampleGradients
from .optimizer import PrivateOptimizer
from .planner import NOISE_LIMITED, noise_to_clip

ACCOUNTANTS = {"pld": "pld", "prv": "pld", "rdp": "rdp"}
SUBSPACE_MODES = ("gep", "projection")
# The modules make_private hooked (weakly: a module's life is its owner's), so that a second make_private of
# one module is refused rather than hooked twice.
_HOOKED: "weakref.WeakKeyDictionary[torch.nn.Module, GradSampler]" = weakref.WeakKeyDictionary()
log = logging.getLogger("dpsubspace.torch")


class SeededRunWarning(UserWarning):
    """make_private was given a seed: a reproducible run, NOT private."""


def _check_loader(data_loader: Any) -> None:
    """ValueError for a loader the engine cannot Poisson-sample from."""
    if isinstance(getattr(data_loader, "dataset", None), torch.utils.data.IterableDataset):
        raise ValueError("Poisson sampling needs a map-style dataset (len() and dataset[i]); the data loader's "
                         "dataset is an IterableDataset, which has neither")
    if len(data_loader) < 1:
        raise ValueError("the data loader has no batches")


class PrivacyEngine:
    """Opacus' PrivacyEngine over dpsubspace.torch (see the module's text for
    the guarantee).  accountant: "pld" (default), "rdp", or Opacus' "prv"
    (taken as "pld").  secure_mode: taken for Opacus' signature; the noise
    and the sampling are always the library's secure generator unless
    make_private is given seed= (reproducible, NOT private).

    engine.accountant is the run's ledger (every step and basis release of
    every make_private on this engine); engine.get_epsilon(delta) its eps."""

    def __init__(self, *, accountant: str = "pld", secure_mode: bool = False) -> None:
        if accountant not in ACCOUNTANTS:
            why = " (a central limit approximation, not an upper bound)" if accountant == "gdp" else ""
            raise ValueError(f"accountant must be one of {', '.join(ACCOUNTANTS)}, got {accountant!r}{why}")
        self.method = ACCOUNTANTS[accountant]
        self.accountant = Accountant(self.method)
        self.secure_mode = secure_mode
        self.plan: dict = {}

    def get_epsilon(self, delta: float) -> float:
        """eps at delta of everything charged so far."""
        return self.accountant.get_epsilon(delta)

    def make_private(self, *, module: torch.nn.Module, optimizer: torch.optim.Optimizer,
                     data_loader: torch.utils.data.DataLoader, noise_multiplier: float, max_grad_norm: float,
                     criterion: Optional[Callable[[Any, Any], torch.Tensor]] = None, batch_first: bool = True,
                     loss_reduction: str = "mean", poisson_sampling: bool = True, clipping: str = "flat",
                     noise_generator: Any = None, grad_sample_mode: str = "hooks", seed: Optional[int] = None,
                     subspace: Any = None, subspace_mode: str = "gep", use_weak_basis: Optional[bool] = None,
                     embedding_clip: Optional[float] = None, residual_clip: Optional[float] = None,
                     embedding_share: Optional[float] = None,
                     basis_energy: float = 0.5) -> Tuple[torch.nn.Module, PrivateOptimizer, Any]:
        """(module, optimizer, data_loader) for private training, as Opacus':
        the module itself with hooks on its modules (not a wrapper: its
        state_dict is unchanged), a PrivateOptimizer around `optimizer`, and
        a DPDataLoader of Poisson batches of data_loader's dataset at q =
        1/len(data_loader) (poisson_sampling=False keeps data_loader and
        warns: FixedBatchWarning).

        noise_multiplier: sigma; max_grad_norm: C (flat clipping over all
          parameters: clipping="flat", the only one).
        loss_reduction: "mean" (default; the loss is the batch's mean) or
          "sum", as the criterion reduces.
        criterion: the loss the bases' own samples use (default
          CrossEntropyLoss with loss_reduction, as Opacus); the training
          loss is the loop's.
        seed: None (secure noise and sampling) or an int (reproducible, NOT
          private).
        subspace: None (plain DP-SGD), PrivateBasis (no data_x / data_y:
          it samples from the data loader's dataset; rho= here, share=
          needs make_private_with_epsilon), CollectorBasis, NoisyGradientBasis
          or FixedBasis.  subspace_mode: "gep" or "projection".
          embedding_clip, residual_clip, embedding_share, basis_energy: GEP's
          (PrivateStep has the rule).
        use_weak_basis: what a WEAK release does (its noise level at the
          random level: it holds little of the gradient).  False (default,
          unless the basis was given on_weak): plain DP-SGD steps until a
          release that is not WEAK; True: use it.  Each WEAK release warns
          once (WeakBasisWarning).  The choice reads the release's own noise
          level, computed by the mechanism from its output and public sizes:
          post-processing, no privacy cost.
        batch_first (True only), noise_generator (None only: the noise is
        the library's), grad_sample_mode ("hooks"; "functorch" is taken as
        the same hooks, whose fallback is functorch's): Opacus' keywords."""
        if not batch_first:
            raise ValueError("batch_first=False is not supported: put the batch dimension first")
        if clipping != "flat":
            raise ValueError(f"clipping {clipping!r} is not supported: flat clipping (one bound over all "
                             "parameters) only")
        if noise_generator is not None:
            raise ValueError("noise_generator is not taken: the noise comes from the library's secure generator "
                             "(seed= for a reproducible, NOT private run)")
        if grad_sample_mode not in ("hooks", "functorch"):
            raise ValueError(f"grad_sample_mode {grad_sample_mode!r} is not supported: 'hooks'")
        if subspace_mode not in SUBSPACE_MODES:
            raise ValueError(f"subspace_mode must be one of {', '.join(SUBSPACE_MODES)}, got {subspace_mode!r}")
        if isinstance(optimizer, PrivateOptimizer):
            raise ValueError("the optimizer is already private (a PrivateOptimizer)")
        if module in _HOOKED:
            raise ValueError("the module already has the engine's hooks (make_private was called on it)")
        _check_loader(data_loader)
        n = len(data_loader.dataset)
        q = 1 / len(data_loader)
        if isinstance(subspace, PrivateBasis) and subspace.rho is None:
            raise ValueError("PrivateBasis(share=...) needs make_private_with_epsilon (a budget to share); with "
                             "make_private give it rho=")
        if subspace is not None and not hasattr(subspace, "update"):
            raise TypeError("subspace must be a basis source (PrivateBasis, CollectorBasis, NoisyGradientBasis, "
                            "FixedBasis)")
        sampler = GradSampler(module, loss_reduction)
        try:
            if criterion is None:
                criterion = torch.nn.CrossEntropyLoss(reduction=loss_reduction)
            grads = SampleGradients(sampler, criterion)
            opt = PrivateOptimizer(optimizer, sampler, noise_multiplier=noise_multiplier, max_grad_norm=max_grad_norm,
                                   sample_rate=q, dataset_size=n, grads=grads,
                                   mode="dpsgd" if subspace is None else subspace_mode, basis=subspace,
                                   embedding_clip=embedding_clip, residual_clip=residual_clip,
                                   embedding_share=embedding_share, basis_energy=basis_energy,
                                   accountant=self.accountant, seed=seed)
            if hasattr(subspace, "bind"):  # the basis samples the examples the steps do, and no others
                subspace.bind(DatasetExamples(data_loader.dataset, data_loader.collate_fn))
        except Exception:
            sampler.remove_hooks()
            raise
        if hasattr(subspace, "on_weak"):
            if use_weak_basis is not None:
                subspace.on_weak = "warn" if use_weak_basis else "plain"
            elif subspace.on_weak is None:
                subspace.on_weak = "plain"
        _HOOKED[module] = sampler
        p = sum(t.numel() for t in module.parameters() if t.requires_grad)
        ratio = noise_to_clip(noise_multiplier, p, q * n)
        log.info("make_private: %d parameters, expected batch %.0f, sigma %.4g: noise-to-clip sigma*sqrt(p)/B = "
                 "%.3g (%s; dpsubspace.torch.plan says whether a private basis can pay)", p, q * n, noise_multiplier,
                 ratio, "limited by its noise" if ratio >= NOISE_LIMITED else "not limited by its noise")
        if seed is not None:
            warnings.warn(f"seed={seed}: the noise and the sampling are a seeded stream, reproducible and NOT "
                          "private; the eps the engine states assumes secure randomness (seed=None)",
                          SeededRunWarning, stacklevel=2)
        if poisson_sampling:
            loader = DPDataLoader.from_data_loader(data_loader, seed=seed)
        else:
            warnings.warn("poisson_sampling=False: the batches are the data loader's own (fixed size), but the "
                          f"accounting is for Poisson samples at rate {q:.4g}: the eps it states does not hold for "
                          "them", FixedBatchWarning, stacklevel=2)
            loader = data_loader
        return module, opt, loader

    def make_private_with_epsilon(self, *, module: torch.nn.Module, optimizer: torch.optim.Optimizer,
                                  data_loader: torch.utils.data.DataLoader, target_epsilon: float,
                                  target_delta: float, epochs: int, max_grad_norm: float,
                                  **kwargs: Any) -> Tuple[torch.nn.Module, PrivateOptimizer, Any]:
        """make_private with the noise multiplier that spends target_epsilon
        at target_delta over epochs * len(data_loader) steps, together with
        what the engine's accountant already holds and what the basis
        source (subspace=) will charge over those steps, planned as it
        charges (a PrivateBasis: its first release cold, the others warm;
        a CollectorBasis: rho_epoch each).  PrivateBasis(share=s): the
        releases get share s of the budget counted in zCDP rho (rho_total,
        whose eps at target_delta is target_epsilon): each release's rho is
        set so that the releases alone spend the eps of s rho_total; sigma
        then takes the rest, so the steps and the releases together spend
        target_epsilon (to 0.1%, never above).  engine.plan records the
        numbers.  The other keywords are make_private's."""
        if not (target_epsilon > 0 and 0 < target_delta < 1 and epochs > 0):
            raise ValueError("target_epsilon must be > 0, target_delta in (0, 1), epochs > 0")
        _check_loader(data_loader)
        q = 1 / len(data_loader)
        steps = int(round(epochs * len(data_loader)))
        d = sum(p.numel() for p in module.parameters() if p.requires_grad)
        basis = kwargs.get("subspace")
        base = self.accountant.copy()
        plan = dict(steps=steps, sample_rate=q, target_epsilon=target_epsilon, target_delta=target_delta)
        if basis is not None:
            if not hasattr(basis, "plan"):
                raise TypeError(f"{type(basis).__name__} cannot plan what it will charge (no plan method): use "
                                "make_private with a noise multiplier")
            if isinstance(basis, PrivateBasis) and basis.share is not None:
                rho = basis.rho_for_share(target_epsilon, target_delta, steps, d, method=self.method)
                basis.set_rho(rho)
                plan["basis_rho"] = rho
            basis.plan(base, steps, d)
            plan["basis_eps"] = self._eps_of(basis, steps, d, target_delta)
        sigma = noise_multiplier(target_epsilon, target_delta, q, steps, base=base, method=self.method)
        plan["noise_multiplier"] = sigma
        self.plan = plan
        return self.make_private(module=module, optimizer=optimizer, data_loader=data_loader,
                                 noise_multiplier=sigma, max_grad_norm=max_grad_norm, **kwargs)

    def _eps_of(self, basis: Any, steps: int, d: int, delta: float) -> float:
        """eps at delta of what `basis` will charge over `steps` steps, alone."""
        acc = Accountant(self.method)
        basis.plan(acc, steps, d)
        return acc.get_epsilon(delta)
