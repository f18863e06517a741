"""dpsgd_train.py - one DP-SGD training run, with or without a gradient
subspace, at a total (eps, delta) that includes the basis releases: the run
dpsgd.py's rows and dpsgd_map.py's arms are made of.

An arm is "dpsgd" (plain DP-SGD: clip C, noise sigma C) or MODE-BASIS with
MODE "gep" (GEP: the gradient's part in the basis and its residual, each
clipped and noised) or "proj" (projection only, PDP-SGD) and BASIS one of
  power    a basis the library releases privately (noisy power iteration, one group)
  groups   per-layer bases (gaussian, parameter groups by layer; groups wider than 4 096 by power)
  kron     Kronecker-factored bases of the matrix-shaped tensors (the rest dense)
  noisy    the top directions of the already released noisy gradients (post-processing, free)
  oracle   the NON-PRIVATE top-k of the current clipped gradients (an upper bound)
  random   a random k-dim basis (a lower bound)
sigma is calibrated so that the steps plus the basis releases spend exactly
the target eps (dpsubspace.noise_multiplier, the PLD accountant).  The
accuracies are the FINAL model's, never the best epoch's.

Owns nothing between runs: the caller owns the data and the results."""
import math
import sys
import time

import numpy as np

PRIVATE_BASES = ("power", "groups", "kron")
BASES = PRIVATE_BASES + ("noisy", "oracle", "random")
MODES = {"gep": "gep", "proj": "projection"}
MOMENTUM = 0.9
# The held-out examples whose per-example gradients measure a basis's captured energy: 2 000, or fewer for a
# wide model, so that their gradients stay within ENERGY_FLOATS floats (1 GB: 614 rows of the MLP's 407 050)
ENERGY_ROWS, ENERGY_FLOATS = 2000, 250_000_000


def arm_parts(arm):
    """(DPOptimizer mode, basis name or None) of an arm; ValueError if it is not one."""
    if arm == "dpsgd":
        return "dpsgd", None
    mode, _, basis = arm.partition("-")
    if mode not in MODES or basis not in BASES:
        raise ValueError(f"unknown arm {arm!r}: dpsgd or MODE-BASIS, MODE in {', '.join(MODES)}, "
                         f"BASIS in {', '.join(BASES)}")
    return MODES[mode], basis


def tanh_cnn(torch):
    """Papernot et al. 2021 / Tramer-Boneh 2021's Fashion-MNIST CNN: 26 010 parameters."""
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(1, 16, 8, 2, padding=3), nn.Tanh(), nn.MaxPool2d(2, 1),
                         nn.Conv2d(16, 32, 4, 2), nn.Tanh(), nn.MaxPool2d(2, 1), nn.Flatten(),
                         nn.Linear(32 * 4 * 4, 32), nn.Tanh(), nn.Linear(32, 10))


def wide_mlp(torch):
    """784-512-10, tanh: 407 050 parameters, 401 920 of them in one 512 x 784
    matrix (the layer a Kronecker-factored basis is for)."""
    nn = torch.nn
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.Tanh(), nn.Linear(512, 10))


def logreg(torch):
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 10))


MODELS = {"cnn": tanh_cnn, "mlp": wide_mlp, "logreg": logreg}


class OracleBasis:
    """NOT PRIVATE: the top-k of the clipped per-example gradients of a sample
    (rate `rate`) every `every` steps, by a randomized SVD (Halko et al.,
    20 extra columns, 4 power iterations; the library's exact top-k forms a
    min(n, d)-square Gram, minutes at 15 000 x 26 010).  An upper bound."""

    def __init__(self, x, y, k, rate, every, torch):
        self.x, self.y, self.k, self.rate, self.every, self.torch = x, y, k, rate, every, torch
        self.V, self.releases = None, 0

    def update(self, opt, step):
        if step % self.every:
            return self.V
        from dpsubspace import torch as dpt
        ix = self.torch.as_tensor(opt.noise.poisson_sample(len(self.x), self.rate))
        G = dpt.clip_rows(opt.grads(self.x[ix], self.y[ix]), opt.max_grad_norm)
        G = G / G.norm(dim=1, keepdim=True).clamp_min(1e-12)  # unit rows, as the library's estimators see them
        self.V = self.torch.svd_lowrank(G, q=self.k + 20, niter=4)[2][:, :self.k].T.contiguous()
        self.releases += 1
        return self.V


def private_basis_kwargs(basis, model, k, dpt):
    """The estimator settings of a private basis for `model`."""
    if basis == "power":
        return dict(mechanism="power")
    if basis == "groups":
        groups = dpt.parameter_groups(model, "layer")
        return dict(mechanism="gaussian", groups=groups, group_components=[min(k, w) for w in groups],
                    dense_max_d=4096)
    if basis == "kron":
        groups, shapes = dpt.parameter_groups(model, "tensor"), dpt.parameter_shapes(model)
        return dict(mechanism="kron", groups=groups, group_shapes=shapes,
                    group_components=[min(k, w) for w in groups])
    raise ValueError(f"{basis!r} is not a private basis ({', '.join(PRIVATE_BASES)})")


def keep_freed_memory():
    """Ask glibc to keep freed memory in the heap instead of returning each
    large block to the kernel (M_MMAP_THRESHOLD 1 GiB, M_TRIM_THRESHOLD and
    M_TOP_PAD large): every step allocates per-example gradients of ~200 MB,
    and on this machine touching fresh pages costs ~3.4 us a page (213 MB:
    0.73 s, against 0.01 s to refill touched memory), 2/3 of a step's time
    (profile of 15 steps: 38.7 s -> 12.0 s).  Same results, less wall time."""
    import ctypes
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3
    libc.mallopt(M_MMAP_THRESHOLD, 1 << 30)
    libc.mallopt(M_TRIM_THRESHOLD, 1 << 34)
    libc.mallopt(M_TOP_PAD, 1 << 28)


def parse_shard(text, prog):
    """(i, n) from "I/N" (0 <= I < N), (0, 1) for None; exits with a message naming prog otherwise."""
    if not text:
        return 0, 1
    try:
        shard, shards = (int(v) for v in text.split("/"))
    except ValueError:
        shard, shards = 0, 0
    if not 0 <= shard < shards:
        sys.exit(f"{prog}: --shard wants I/N with 0 <= I < N, got {text!r}")
    return shard, shards


def accuracy(model, x, y, torch):
    with torch.no_grad():
        correct = sum(int((model(x[s:s + 2000]).argmax(1) == y[s:s + 2000]).sum()) for s in range(0, len(x), 2000))
    return correct / len(x)


def _snr(where, part):
    """Where the noise goes: the mean over steps of ||signal sum|| / ||noise|| of
    the whole gradient or one GEP part (NaN where the part did not exist)."""
    r = [w["signal" + part] / w["noise" + part] for w in where if w.get("noise" + part)]
    return round(float(np.mean(r)), 4) if r else math.nan


def train(model_name, arm, eps, seed, hp, train_set, eval_sets, torch, dp, delta=1e-5, log=None, energy_set=None):
    """Train one model; returns (result dict, the optimizer).

    hp: lr, batch (expected Poisson batch), epochs or steps, clip (C), and for
    a basis: k, residual_clip and embedding_clip (fractions of C),
    embedding_share (None: DPOptimizer's rule), basis_rate (a private or
    oracle basis's sample rate), releases (basis updates per run) or
    every_epochs, share (a private basis's share of the budget in rho units),
    on_weak (what a WEAK private release does, PrivateBasis's; default "warn":
    it is used).
    eval_sets: {name: (x, y)}, each reported as NAME_acc.  energy_set: (x, y)
    whose first examples' gradients (ENERGY_ROWS, fewer for a wide model)
    measure the captured energy of the final basis and of the non-private
    top-k (default: the first eval set)."""
    from dpsubspace import torch as dpt
    mode, basis_name = arm_parts(arm)
    t0 = time.time()
    torch.manual_seed(seed)  # the initial weights: public randomness
    model = MODELS[model_name](torch)
    xtr, ytr = train_set
    n, k = len(xtr), hp.get("k", 10)
    q = hp["batch"] / n
    steps = hp.get("steps") or int(round(hp["epochs"] * n / hp["batch"]))
    steps_per_epoch = max(1, int(round(n / hp["batch"])))
    every = steps_per_epoch * hp["every_epochs"] if hp.get("every_epochs") else \
        max(1, math.ceil(steps / hp.get("releases", 5)))
    clip = hp["clip"]
    d = sum(p.numel() for p in model.parameters())
    base = dp.Accountant()
    rho_est, basis = 0.0, None
    if basis_name in PRIVATE_BASES:  # the releases, charged as PrivateBasis charges them, spend `share` of the budget
        basis = dpt.PrivateBasis(xtr, ytr, k, basis_rate=hp.get("basis_rate", 0.5), every=every, seed=seed + 1000,
                                 share=hp["share"], on_weak=hp.get("on_weak", "warn"),
                                 **private_basis_kwargs(basis_name, model, k, dpt))
        rho_est = basis.rho_for_share(eps, delta, steps, d)
        basis.set_rho(rho_est)
        basis.plan(base, steps, d)
    elif basis_name == "oracle":
        basis = OracleBasis(xtr, ytr, k, hp.get("basis_rate", 0.5), every, torch)
    elif basis_name == "noisy":
        basis = dpt.NoisyGradientBasis(k, window=100, every=10)
    elif basis_name == "random":
        g = np.random.default_rng(seed + 2000)
        basis = dpt.FixedBasis(np.linalg.qr(g.standard_normal((d, k)))[0].T)
    sigma = dp.noise_multiplier(eps, delta, q, steps, base=base)
    acct = dp.Accountant()
    opt = dpt.DPOptimizer(model, torch.optim.SGD(model.parameters(), lr=hp["lr"], momentum=MOMENTUM),
                          torch.nn.functional.cross_entropy, noise_multiplier=sigma, max_grad_norm=clip,
                          sample_rate=q, dataset_size=n, mode=mode, basis=basis, accountant=acct, seed=seed,
                          embedding_clip=hp.get("embedding_clip", 1.0) * clip,
                          residual_clip=hp.get("residual_clip", 0.5) * clip,
                          embedding_share=hp.get("embedding_share"))
    losses, where = [], []
    for step, idx in enumerate(dpt.poisson_batches(n, q, steps, opt.noise)):
        ix = torch.as_tensor(idx)
        opt.zero_grad()
        loss = opt.backward(xtr[ix], ytr[ix])
        opt.step()
        losses.append(loss)
        where.append(dict(opt.last))
        if log and ((step + 1) % max(1, steps // 5) == 0 or step + 1 == steps):
            log(f"  {arm} eps {eps:g} seed {seed}: step {step + 1}/{steps}  batch loss {loss:.3f}")
    out = {f"{name}_acc": round(accuracy(model, x, y, torch), 4) for name, x, y in
           ((name, *xy) for name, xy in eval_sets.items())}
    # the share of held-out per-example gradient energy the final basis keeps, and the top-k's
    ex, ey = energy_set or next(iter(eval_sets.values()))
    rows = min(ENERGY_ROWS, ENERGY_FLOATS // d)
    G = opt.grads(ex[:rows], ey[:rows])
    energy = float((G.double() ** 2).sum())
    V = getattr(basis, "V", None) if basis is not None else None
    captured = float(((G @ V.T).double() ** 2).sum()) / energy if V is not None else math.nan
    # the top-k by a randomized SVD (Halko et al.: 20 extra columns, 6 power iterations; its error
    # in captured energy is far below the differences reported)
    Vt = torch.svd_lowrank(G, q=k + 20, niter=6)[2][:, :k].T
    captured_topk = float(((G @ Vt.T).double() ** 2).sum()) / energy
    tail = [x for x in losses[-max(1, steps // 10):] if not math.isnan(x)]
    out.update(arm=arm, model=model_name, eps_target=eps, seed=seed, eps_spent=round(acct.get_epsilon(delta), 4),
               delta=delta, sigma=round(sigma, 4), noise_to_clip=round(dpt.noise_to_clip(sigma, d, hp["batch"]), 4),
               params=d, rho_basis=round(rho_est, 8), basis_releases=getattr(basis, "releases", 0),
               weak_releases=getattr(basis, "weak_releases", ""),
               epochs=round(steps * q, 3), steps=steps, n_train=n, k=k if basis is not None else 0,
               train_loss=round(float(np.mean(tail)), 4) if tail else math.nan,
               captured=round(captured, 4), captured_topk=round(captured_topk, 4), wall_s=round(time.time() - t0, 1),
               snr=_snr(where, ""), snr_embedding=_snr(where, "_embedding"), snr_residual=_snr(where, "_residual"),
               private="no (oracle basis)" if basis_name == "oracle" else "yes",
               kept=getattr(basis, "kept", "") if basis_name == "noisy" else "")
    return out, opt
