"""dpsubspace.torch - DP-SGD for PyTorch models with private subspaces, the
residual kept (GEP, Yu et al. 2021), and one accountant for the whole run
(DESIGN 7.4).  Needs Debian's python3-torch (1.13: functorch).  Two ways in:

  Opacus' API (engine.py): PrivacyEngine().make_private(_with_epsilon)(
      module=, optimizer=, data_loader=, ...) -> (model, optimizer, loader),
      then the ordinary loop; engine.get_epsilon(delta).
  This package's own (optimizer.py): DPOptimizer(model, optimizer, loss_fn,
      ...) with opt.backward(x[idx], y[idx]); opt.step() over
      poisson_batches(...).

The modules, each owning one part:
  gradients.py  per-example gradients: PerExampleGradients (functorch),
                GradSampler (hooks filled by loss.backward()),
                SampleGradients, parameter_groups, parameter_shapes, clip_rows,
                refuse_batch_statistics
  optimizer.py  the private step (PrivateStep.private_gradient: plain
                DP-SGD, GEP, projection; the charge), DPOptimizer,
                PrivateOptimizer, MODES
  bases.py      where V comes from and what it costs: PrivateBasis,
                CollectorBasis, NoisyGradientBasis, FixedBasis,
                charge_basis_release, WeakBasisWarning
  data.py       Poisson batches: poisson_batches, DPDataLoader,
                FixedBatchWarning, not_poisson
  engine.py     PrivacyEngine

THE GUARANTEE of a run (add/remove-one-example adjacency; every term below
is under it, and one dpsubspace.Accountant composes them):
  - each step reads a Poisson sample of the n examples (rate q, fresh
    secure randomness: NoiseSource), clips each example's contribution and
    adds Gaussian noise to the sum: a Poisson-subsampled Gaussian mechanism
    with noise multiplier sigma (Mironov-Talwar-Zhang 2019), charged on
    every step, an empty batch's too.  For GEP the contribution is the pair
    (clip(V g, C_e), clip(g - V^T V g, C_r)) with noises sigma C_e / sqrt(a)
    and sigma C_r / sqrt(1 - a): scaled by those noises the pair has norm
    <= sqrt(a + 1 - a) = 1, so the step is that same mechanism with
    multiplier sigma whatever a, C_e, C_r are.  Projection only is a = 1
    without the residual; plain DP-SGD clips g to C (optimizer.py).
  - V must be fixed before the step's sample is read, from public data or
    earlier private outputs: PrivateBasis releases it from its OWN Poisson
    sample (rate basis_rate) through SubspaceEstimator, and charges it by
    charge_basis_release: a one-step release as a Poisson-subsampled
    Gaussian (amplified), one of several steps (random blocks) rho/2 as
    zCDP, the arguments in its text; CollectorBasis rho_epoch per epoch;
    NoisyGradientBasis uses released gradients only (no charge); FixedBasis
    charges nothing (the caller vouches that its basis is public) (bases.py).
  - the noisy sums are divided by the expected batch size q n (public), never
    by the sampled size.
  - assumed: the examples are the n rows given (each one person's; n
    public), the model's initial weights and all hyper-parameters are
    public (chosen without looking at these examples), the loss is a sum or
    mean of per-example terms and no module mixes examples, and nothing
    else reads them.  engine.py states what the Opacus-shaped run adds.
"""
from .bases import (ON_WEAK, CollectorBasis, FixedBasis, NoisyGradientBasis, PrivateBasis, TensorExamples,
                    WeakBasisWarning, charge_basis_release)
from .data import (SAMPLING_CHECK_STEPS, DatasetExamples, DPDataLoader, EmptyBatchCollate, FixedBatchWarning,
                   PoissonBatchSampler, not_poisson, poisson_batches)
from .engine import ACCOUNTANTS, PrivacyEngine, SeededRunWarning
from .gradients import (LAYER_RULES, GradSampler, PerExampleGradients, SampleGradients, clip_factors, clip_rows,
                        parameter_groups, parameter_shapes, refuse_batch_statistics)
from .optimizer import MODES, DPOptimizer, PrivateOptimizer, PrivateStep
from .planner import GroupPlan, Plan, noise_to_clip, plan

__all__ = ["ON_WEAK", "CollectorBasis", "FixedBasis", "NoisyGradientBasis", "PrivateBasis", "TensorExamples",
           "WeakBasisWarning", "charge_basis_release", "SAMPLING_CHECK_STEPS", "DatasetExamples", "DPDataLoader",
           "EmptyBatchCollate", "FixedBatchWarning", "PoissonBatchSampler", "not_poisson", "poisson_batches",
           "ACCOUNTANTS", "PrivacyEngine", "SeededRunWarning", "LAYER_RULES", "GradSampler", "PerExampleGradients",
           "SampleGradients", "clip_factors", "clip_rows", "parameter_groups", "parameter_shapes",
           "refuse_batch_statistics", "MODES", "DPOptimizer", "PrivateOptimizer", "PrivateStep", "GroupPlan", "Plan",
           "noise_to_clip", "plan"]
