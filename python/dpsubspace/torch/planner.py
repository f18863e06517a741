"""planner.py - whether a private gradient subspace can pay in a DP-SGD run,
said before the run from public quantities only: the model's parameter
count and shapes, n, the batch size, the epochs and the budget.  No example
is read, so planning costs no privacy.

What it computes (plan()):
- sigma of plain DP-SGD at the budget (the PLD accountant) and the
  noise-to-clip ratio sigma sqrt(p) / B: the norm of a step's noise over
  the largest norm its signal can have.  Below about 1 DP-SGD is not
  limited by its noise, and nothing that only lowers noise can gain.
- for a private basis taking `share` of the budget: each release's rho
  (PrivateBasis.rho_for_share), the library's noise edge of every group at
  that rho (SubspaceEstimator.noise_edges: the eigenvalue below which a
  direction is lost), and from it the least share of each example's
  gradient energy a direction of the group must hold to be released above
  the noise (`needed`; assumption-free).  By the spiked-matrix law the
  noise-level formula uses (src/mechanisms/noise_level.c), a direction of
  eigenvalue lambda above T = edge / 2 keeps 1 - (T/lambda)^2 of its
  energy and one below it about nothing; a release of N rows gives a
  direction holding a share e of each row's energy lambda = N e.
- the share of its energy a group's strongest direction would keep under
  a STATED ASSUMPTION: that it holds TOP_DIRECTION of each example's
  gradient energy (a kron group: each Kronecker side's strongest
  direction TOP_DIRECTION_OUT and TOP_DIRECTION_IN; measured below), and
  the mean over groups weighted by their widths (`kept`).
- a recommendation, by the rule RULE below, whose evidence is the map
  tools/experiments/dpsgd_map.py measured (docs/mechanisms.md, "Does a private subspace
  help DP-SGD?").
"""
import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import torch

from ..accountant import Accountant, noise_multiplier
from .bases import PrivateBasis
from .gradients import parameter_groups, parameter_shapes

# The assumption about the gradients (see the module's text): the share of
# each example's gradient energy in a group's strongest direction.  Measured
# on the held-out per-example gradients of the test bed (tools/experiments/
# gradients.py, 1 000 rows, after one epoch): the top eigenvalue of each
# weight tensor's second moment over the total energy was 0.029-0.068 for
# the CNN's four weight tensors and 0.048-0.099 for the MLP's two; about
# 0.05 is their median.
TOP_DIRECTION = 0.05
# A kron group's two sides, on the same tensors: the top eigenvalue of
# C_out = sum G G^T held 0.030-0.139 of the total energy (median 0.06), of
# C_in = sum G^T G 0.039-0.429 (median 0.18).
TOP_DIRECTION_OUT, TOP_DIRECTION_IN = 0.06, 0.18
# RULE: GEP on a private basis only when DP-SGD is limited by its noise
# (noise-to-clip at least NOISE_LIMITED) and the basis is predicted to keep
# at least KEEP_ENOUGH of its strongest directions' energy; otherwise plain
# DP-SGD.  The evidence (dpsgd_map.py, the tanh CNN): GEP even on the
# NON-private top-k lost to plain DP-SGD in every cell with n >= 2 000
# (noise-to-clip 0.8-10) and on all 60 000 examples (0.15-0.38), and won
# only at n = 1 000 (ratios 6-20); GEP on a private basis keeping
# 0.03-0.06 of the held-out energy lost 3.5-11 points or tied.
NOISE_LIMITED = 1.0
KEEP_ENOUGH = 0.5


@dataclass
class GroupPlan:
    width: int
    rank: int
    method: str
    edge: float          # the release's noise edge (an eigenvalue of the sum over its rows)
    needed: float        # the least share of each example's energy a direction must hold to show
    kept: float          # the share of its energy the strongest direction keeps, under the assumption
    needed_sides: Optional[Tuple[float, float]] = None  # a kron group's: (C_out's, C_in's)


@dataclass
class Plan:
    params: int
    n: int
    batch_size: int
    epochs: float
    steps: int
    target_epsilon: float
    target_delta: float
    sigma: float
    noise_to_clip: float
    mechanism: str
    share: float
    k: int
    rho_release: float
    releases: int
    sigma_with_basis: float
    groups: List[GroupPlan] = field(default_factory=list)
    kept: float = 0.0
    recommendation: str = "dpsgd"
    reason: str = ""

    def __str__(self) -> str:
        lines = [f"plan: {self.params} parameters, n {self.n}, batch {self.batch_size}, {self.epochs:g} epochs "
                 f"({self.steps} steps), eps {self.target_epsilon:g} at delta {self.target_delta:g}",
                 f"  plain DP-SGD: sigma {self.sigma:.3f}, noise-to-clip sigma*sqrt(p)/B = {self.noise_to_clip:.2f}",
                 f"  a {self.mechanism} basis (k {self.k}) at {self.share:.0%} of the budget: {self.releases} "
                 f"releases of rho {self.rho_release:.3g}; the steps' sigma becomes {self.sigma_with_basis:.3f}",
                 f"  predicted share of a strongest direction's energy kept (if it holds {TOP_DIRECTION:g} of "
                 f"each example's gradient energy), mean over groups by width: {self.kept:.2f}"]
        for i, g in enumerate(self.groups):
            need = (f"{g.needed:.3g}" if g.needed_sides is None else
                    f"{g.needed_sides[0]:.3g} (C_out, assumed {TOP_DIRECTION_OUT:g}) and {g.needed_sides[1]:.3g} "
                    f"(C_in, assumed {TOP_DIRECTION_IN:g})")
            lines.append(f"    group {i}: {g.width} wide, rank {g.rank}, {g.method}: a direction must hold {need} "
                         f"of each example's energy to show; kept {g.kept:.2f}")
        lines.append(f"  recommendation: {self.recommendation} ({self.reason})")
        return "\n".join(lines)


def noise_to_clip(sigma: float, params: int, batch: float) -> float:
    """sigma sqrt(p) / B: the norm of a DP-SGD step's noise (sd sigma C on
    each of p coordinates) over the largest norm of its signal (C), both
    divided by the expected batch B."""
    return sigma * math.sqrt(params) / batch


def _kept(share: float, needed: float) -> float:
    """The spiked-Wigner share of a direction's energy its released
    eigenvector keeps when it holds `share` of each row's energy and the
    threshold is `needed` (T over the rows): 1 - (needed / share)^2 above
    it, else 0."""
    if not math.isfinite(needed) or share <= needed:
        return 0.0
    return 1.0 - (needed / share) ** 2


def _basis_settings(model: torch.nn.Module, mechanism: str, k: int) -> Dict[str, Any]:
    """The groups PrivateBasis gets for `mechanism` on this model: the
    parameter tensors with their shapes for kron, the layers otherwise."""
    if mechanism == "kron":
        widths = parameter_groups(model, "tensor")
        return dict(groups=widths, group_components=[min(k, w) for w in widths],
                    group_shapes=parameter_shapes(model))
    widths = parameter_groups(model, "layer")
    return dict(groups=widths, group_components=[min(k, w) for w in widths]) if len(widths) > 1 else {}


def _basis_plan(model: torch.nn.Module, p: int, mechanism: str, k: int, share: float, basis_rate: float,
                n: int, steps: int, every: int, target_epsilon: float, target_delta: float, accountant: str
                ) -> Tuple[float, Accountant, List[GroupPlan], float]:
    """One mechanism's basis at `share`: each release's rho, the accountant
    its releases are charged to, its groups' plans and the width-weighted
    kept share."""
    settings = _basis_settings(model, mechanism, k)
    basis = PrivateBasis(n_components=k, basis_rate=basis_rate, every=every, mechanism=mechanism, share=share,
                         **settings)
    rho = basis.rho_for_share(target_epsilon, target_delta, steps, p, method=accountant)
    basis.set_rho(rho)
    charged = Accountant(accountant)
    basis.plan(charged, steps, p)
    widths = settings.get("groups", [p])
    ranks = settings.get("group_components", [k])
    shapes = settings.get("group_shapes", [None] * len(widths))
    rows = basis_rate * n
    groups, weighted = [], 0.0
    for (method, edge), w, kg, shape in zip(basis.noise_edges(p), widths, ranks, shapes):
        needed, sides = edge / 2 / rows, None
        kept = _kept(TOP_DIRECTION, needed) if kg else 0.0
        if method.startswith("kron") and shape:
            # edge is the wider side's, 2 s sqrt(max(r, c)); each side's own is 2 s sqrt(its width), and a
            # product keeps what both of its factors keep
            r, c = shape
            sides = (needed * math.sqrt(r / max(r, c)), needed * math.sqrt(c / max(r, c)))
            kept = _kept(TOP_DIRECTION_OUT, sides[0]) * _kept(TOP_DIRECTION_IN, sides[1]) if kg else 0.0
        groups.append(GroupPlan(width=w, rank=kg, method=method, edge=edge, needed=needed, kept=kept,
                                needed_sides=sides))
        weighted += w * kept
    return rho, charged, groups, weighted / p


def plan(model: torch.nn.Module, n: int, batch_size: int, epochs: float, target_epsilon: float,
         target_delta: float, *, k: int = 10, share: float = 0.1, mechanism: Optional[str] = None,
         basis_rate: float = 0.5, releases: int = 5, accountant: str = "pld") -> Plan:
    """Plan a DP-SGD run (see the module's text); print(plan(...)) says it.
    The private basis considered is PrivateBasis(mechanism, k, share,
    basis_rate) updated `releases` times: mechanism "kron" (the parameter
    tensors, matrix-shaped ones by their Kronecker factors), "gaussian"
    (the layers, dense up to the dense limit, wider ones by the power
    iteration) or "power"; None (default): kron and gaussian, and the plan
    is the one predicted to keep more.  Everything is public: no data is
    read."""
    if not (n >= 1 and 1 <= batch_size <= n and epochs > 0 and target_epsilon > 0 and 0 < target_delta < 1):
        raise ValueError("want n >= 1, 1 <= batch_size <= n, epochs > 0, target_epsilon > 0, 0 < target_delta < 1")
    if not 1 <= releases:
        raise ValueError(f"releases must be >= 1, got {releases}")
    if mechanism not in (None, "kron", "gaussian", "power"):
        raise ValueError(f"mechanism must be kron, gaussian, power or None (the better of kron and gaussian), "
                         f"got {mechanism!r}")
    p = sum(t.numel() for t in model.parameters() if t.requires_grad)
    q = batch_size / n
    steps = max(1, int(round(epochs * n / batch_size)))
    sigma = noise_multiplier(target_epsilon, target_delta, q, steps, method=accountant)
    every = max(1, math.ceil(steps / releases))
    best = None
    for mech in ([mechanism] if mechanism else ["kron", "gaussian"]):
        if mech == "kron" and not any(shape for shape in parameter_shapes(model)):
            continue  # no matrix-shaped tensor
        cand = (mech, *_basis_plan(model, p, mech, k, share, basis_rate, n, steps, every, target_epsilon,
                                   target_delta, accountant))
        if best is None or cand[4] > best[4]:
            best = cand
    if best is None:
        raise ValueError("mechanism kron needs a matrix-shaped parameter tensor; the model has none")
    mech, rho, charged, groups, kept = best
    sigma_basis = noise_multiplier(target_epsilon, target_delta, q, steps, base=charged, method=accountant)
    out = Plan(params=p, n=n, batch_size=batch_size, epochs=epochs, steps=steps, target_epsilon=target_epsilon,
               target_delta=target_delta, sigma=sigma, noise_to_clip=noise_to_clip(sigma, p, batch_size),
               mechanism=mech, share=share, k=k, rho_release=rho, releases=math.ceil(steps / every),
               sigma_with_basis=sigma_basis, groups=groups, kept=kept)
    if out.noise_to_clip < NOISE_LIMITED:
        out.reason = (f"noise-to-clip {out.noise_to_clip:.2f} < {NOISE_LIMITED:g}: DP-SGD is not limited by its "
                      "noise here, so a basis that only lowers noise cannot gain")
    elif out.kept < KEEP_ENOUGH:
        out.reason = (f"the {mech} basis is predicted to keep {out.kept:.2f} < {KEEP_ENOUGH:g} of its strongest "
                      "directions' energy: too noisy to pay for its share of the budget")
    else:
        out.recommendation = f"gep on a private {mech} basis"
        out.reason = (f"noise-to-clip {out.noise_to_clip:.2f} >= {NOISE_LIMITED:g} and the {mech} basis is "
                      f"predicted to keep {out.kept:.2f} >= {KEEP_ENOUGH:g} of its strongest directions' energy")
    return out
