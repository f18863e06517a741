"""gradients.py - per-example gradients, the B x d matrix every private step
starts from.  Owns both ways of getting it:

    PerExampleGradients -- functorch vmap(grad) of a loss over the whole
                           model (DPOptimizer's: it is given x, y and the loss)
    GradSampler         -- hooks on the modules, filled by the ordinary
                           loss.backward() (PrivacyEngine's, as Opacus'
                           GradSampleModule): a forward hook keeps each
                           module's input, a hook on its output receives the
                           gradient there, and the module's parameters'
                           per-example gradients follow by einsum (Linear,
                           Conv1d, Conv2d, Embedding, LayerNorm, GroupNorm)
                           or by functorch vmap(vjp) of that module alone
                           (any other module with parameters of its own)
    SampleGradients     -- the GradSampler's gradients of a batch outside
                           the training step (the bases' own samples)

and the helpers on that matrix: parameter_groups, clip_rows,
refuse_batch_statistics.

Columns are the trainable parameters (requires_grad at construction) in
named_parameters() order, each flattened: both classes agree, so a d-vector
of either unflattens the same way.

What a per-example gradient presumes (the clipping's sensitivity bound rests
on it): the loss is a sum or a mean over the batch of per-example terms, and
no module mixes examples.  Batch normalisation does, and is refused; a
custom module that mixes examples without parameters of its own (x minus
the batch mean, attention across the batch) is NOT detected, by these hooks
or by Opacus'.
"""
import contextlib
from typing import Any, Callable, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn.functional as F

try:  # torch >= 2.0
    from torch.func import functional_call, grad, vjp, vmap
except ImportError:  # torch 1.13 (Debian bookworm): functorch
    from functorch import grad, vjp, vmap
    from torch.nn.utils.stateless import functional_call


# ------------------------------------------------------------- whole model
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
        return _unflatten(v, self.shapes)


def _unflatten(v: torch.Tensor, shapes: Sequence[torch.Size]) -> List[torch.Tensor]:
    parts, off = [], 0
    for s in shapes:
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


def parameter_shapes(model: torch.nn.Module) -> List[Optional[Tuple[int, int]]]:
    """Each parameter tensor's matrix shape, in the order of
    parameter_groups(model, "tensor"), for the kron mechanism (DESIGN 7.6):
    a tensor of two or more dimensions (a Linear weight (out, in), a Conv
    weight (out, in, kh, kw)) is (out, numel / out), the matrix its
    row-major flattening is; a bias or any 1-d tensor is None (released as
    the gaussian mechanism releases a group)."""
    return [(p.shape[0], p.numel() // p.shape[0]) if p.dim() >= 2 else None
            for _, p in model.named_parameters() if p.requires_grad]


def clip_rows(G: torch.Tensor, C: float) -> torch.Tensor:
    """Scale each row of G (in place) to norm at most C; returns G."""
    G.mul_(clip_factors(G, C).unsqueeze(1))
    return G


def clip_factors(G: torch.Tensor, C: float) -> torch.Tensor:
    """min(1, C / ||G_i||) for each row: c_i G_i has norm < C (the 1e-12
    keeps a zero row's factor finite; it only lowers the factor)."""
    return (C / (torch.linalg.vector_norm(G, dim=1) + 1e-12)).clamp_(max=1.0)


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


# ------------------------------------------------------------------- hooks
# Each rule: (module, captured inputs, gradient at the module's output, already
# per example: batch first) -> [(parameter, its per-example gradients B x
# shape)] for the module's trainable parameters.  The gradient at the output
# of example i depends on example i only (no module mixes examples), so each
# row is that example's.

class Outer(NamedTuple):
    """The per-example outer products a_i b_i^T (a: B x p, b: B x q), made
    by GradSampler straight into their columns (no B x p x q temporary)."""
    a: torch.Tensor
    b: torch.Tensor


class Bmm(NamedTuple):
    """The per-example products a_i b_i (a: B x p x r, b: B x r x q), made
    by GradSampler straight into their columns (bmm writes into the strided
    rows of G: no B x p x q temporary)."""
    a: torch.Tensor
    b: torch.Tensor


def _linear(m: torch.nn.Linear, act: Tuple[torch.Tensor, ...], g: torch.Tensor):
    x = act[0]
    B, out = g.shape[0], []
    if x.dim() == 2:  # (B, in): an outer product per example
        if m.weight.requires_grad:
            out.append((m.weight, Outer(g, x)))
        if m.bias is not None and m.bias.requires_grad:
            out.append((m.bias, g))
        return out
    g3, x3 = g.reshape(B, -1, g.shape[-1]), x.reshape(B, -1, x.shape[-1])  # (B, positions, features)
    if m.weight.requires_grad:
        out.append((m.weight, Bmm(g3.transpose(1, 2), x3)))
    if m.bias is not None and m.bias.requires_grad:
        out.append((m.bias, g3.sum(1)))
    return out


def _conv(m: torch.nn.modules.conv._ConvNd, act: Tuple[torch.Tensor, ...], g: torch.Tensor):
    """Conv1d and Conv2d (Conv1d as Conv2d on a height-1 image), on the
    input padded as the module pads it.  The weight's per-example gradient
    dW[b, o, c, i, j] = sum_(u, v) g[b, o, u, v] x[b, c, s u + e i, s v + e j]
    (stride s, dilation e) is computed one of two ways, the same numbers:
    - one input channel per group (a grayscale first layer, depthwise): as
      ONE grouped convolution of the batch's channels (groups = B C_in) by
      the output gradients as kernels (stride e, dilation s), cropped to the
      kernel's size -- no patches are copied;
    - otherwise per group and example, the output gradient (C_out/groups x
      L) times the input's patches (L x C_in/groups k_h k_w), the patches an
      as_strided view of the input copied once (faster than F.unfold)."""
    x = act[0]
    one_d = isinstance(m, torch.nn.Conv1d)
    if x.dim() != (3 if one_d else 4):
        raise ValueError(f"{type(m).__name__} got an input of {x.dim()} dimensions: the engine needs a batch "
                         "dimension first")
    if isinstance(m.padding, str) or m.padding_mode != "zeros":
        pad = m._reversed_padding_repeated_twice
    else:
        pad = tuple(q for p in reversed(m.padding) for q in (p, p))
    if any(pad):
        x = F.pad(x, pad, mode="constant" if m.padding_mode == "zeros" else m.padding_mode)
    kernel, stride, dilation = m.kernel_size, m.stride, m.dilation
    if one_d:
        x, g = x.unsqueeze(2), g.unsqueeze(2)
        kernel, stride, dilation = (1, *kernel), (1, *stride), (1, *dilation)
    B, groups, C_in, C_out = x.shape[0], m.groups, m.in_channels, m.out_channels
    oh, ow = g.shape[2], g.shape[3]
    out = []
    if m.weight.requires_grad:
        if C_in == groups:
            r = F.conv2d(x.reshape(1, B * C_in, x.shape[2], x.shape[3]), g.reshape(B * C_out, 1, oh, ow),
                         stride=dilation, dilation=stride, groups=B * C_in)
            out.append((m.weight, r[:, :, :kernel[0], :kernel[1]].reshape(B, *m.weight.shape)))
        else:
            # patches[b, u, v, c, i, j] = x[b, c, s u + e i, s v + e j], copied once into (B groups, L, C_in/groups kk)
            sB, sC, sH, sW = x.stride()
            patches = x.as_strided((B, oh, ow, C_in, kernel[0], kernel[1]),
                                   (sB, stride[0] * sH, stride[1] * sW, sC, dilation[0] * sH, dilation[1] * sW))
            U = patches.reshape(B, oh * ow, groups, C_in // groups * kernel[0] * kernel[1]).transpose(1, 2)
            U = U.reshape(B * groups, oh * ow, -1)
            gg = g.reshape(B * groups, C_out // groups, oh * ow)
            if groups == 1:  # (C_out x L) (L x C_in kk) per example is the weight's layout: straight into G
                out.append((m.weight, Bmm(gg, U)))
            else:
                out.append((m.weight, torch.bmm(gg, U).reshape(B, *m.weight.shape)))
    if m.bias is not None and m.bias.requires_grad:
        out.append((m.bias, g.reshape(B, C_out, oh * ow).sum(2)))
    return out


def _embedding(m: torch.nn.Embedding, act: Tuple[torch.Tensor, ...], g: torch.Tensor):
    """Each example's rows: the gradients at its positions added into the
    rows its indices name (zero at padding_idx, as torch's backward)."""
    if not m.weight.requires_grad:
        return []
    idx = act[0]
    B, D = g.shape[0], m.embedding_dim
    idx2, g3 = idx.reshape(B, -1), g.reshape(B, -1, D)
    if m.padding_idx is not None:
        g3 = g3.masked_fill((idx2 == m.padding_idx).unsqueeze(2), 0.0)
    w = torch.zeros((B, m.num_embeddings, D), dtype=g.dtype, device=g.device)
    w.scatter_add_(1, idx2.unsqueeze(2).expand(-1, -1, D), g3)
    return [(m.weight, w)]


def _layer_norm(m: torch.nn.LayerNorm, act: Tuple[torch.Tensor, ...], g: torch.Tensor):
    x = act[0]
    shape = tuple(m.normalized_shape)
    if x.dim() <= len(shape):
        raise ValueError("LayerNorm got an input without a batch dimension before its normalized_shape")
    B, out = x.shape[0], []
    g3 = g.reshape(B, -1, *shape)
    if m.weight.requires_grad:
        xhat = F.layer_norm(x, shape, eps=m.eps)
        out.append((m.weight, (g * xhat).reshape(B, -1, *shape).sum(1)))
    if m.bias is not None and m.bias.requires_grad:
        out.append((m.bias, g3.sum(1)))
    return out


def _group_norm(m: torch.nn.GroupNorm, act: Tuple[torch.Tensor, ...], g: torch.Tensor):
    x = act[0]
    B, C, out = x.shape[0], m.num_channels, []
    if m.weight.requires_grad:
        xhat = F.group_norm(x, m.num_groups, eps=m.eps)
        out.append((m.weight, (g * xhat).reshape(B, C, -1).sum(2)))
    if m.bias is not None and m.bias.requires_grad:
        out.append((m.bias, g.reshape(B, C, -1).sum(2)))
    return out


def _own_module(m: torch.nn.Module, act: Tuple[Any, ...], g: torch.Tensor):
    """Any other module with parameters of its own: the vector-Jacobian
    product of its forward on each example's captured input (a batch of
    one) with that example's output gradient, by functorch vmap(vjp), w.r.t.
    its own parameters only (its children's have their own hooks).  The last
    entry of act is the module's batch output: the recomputed outputs must
    equal it (to float rounding), else ValueError -- the forward does not
    give each example's output from that example alone (keyword arguments,
    which the hooks do not see, or examples mixed).  functorch refuses
    randomness (dropout) inside vmap."""
    *inputs, output = act
    B = g.shape[0]
    params = {n: p.detach() for n, p in m.named_parameters(recurse=False) if p.requires_grad}
    batched = [isinstance(a, torch.Tensor) and a.dim() > 0 and a.shape[0] == B for a in inputs]

    def one(*args: Any):
        *xs, gi = args
        xs = [x.unsqueeze(0) if b else x for x, b in zip(xs, batched)]
        out, back = vjp(lambda prm: functional_call(m, prm, tuple(xs)), params)
        return back(gi.unsqueeze(0))[0], out[0]

    res, outs = vmap(one, in_dims=tuple(0 if b else None for b in batched) + (0,))(*inputs, g)
    scale = float(output.abs().max()) if output.numel() else 0.0
    if outs.shape != output.shape or not torch.allclose(outs, output, rtol=1e-4, atol=1e-5 * scale):
        raise ValueError(f"{type(m).__name__}: its forward on each example alone does not give its output on the "
                         "batch (keyword arguments, which the hooks do not see, or examples mixed): no per-example "
                         "gradient for its parameters")
    own = dict(m.named_parameters(recurse=False))
    return [(own[n], res[n]) for n in params]


LAYER_RULES: Dict[type, Callable] = {
    torch.nn.Linear: _linear, torch.nn.Conv1d: _conv, torch.nn.Conv2d: _conv, torch.nn.Embedding: _embedding,
    torch.nn.LayerNorm: _layer_norm, torch.nn.GroupNorm: _group_norm,
}


class _Hook:
    """A GradSampler's hook.  A copy of the hooked model (copy.deepcopy,
    torch.save then torch.load) gets an inert hook instead: the copy is an
    ordinary module, not the engine's (make_private it to train it
    privately), and the hook's closure over this sampler could neither be
    pickled nor serve the copy's parameters."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn

    def __call__(self, *args: Any) -> Any:
        return self.fn(*args)

    def __reduce__(self) -> Tuple[Any, ...]:
        return (_Inert, ())

    def __deepcopy__(self, memo: Dict[int, Any]) -> "_Inert":
        return _Inert()


class _Inert:
    def __call__(self, *args: Any) -> None:
        return None


class _Session:
    """The per-example gradients of one step: B x d, filled by the backward
    hooks of ONE forward pass (forward_id), added up over as many backward
    passes through it as the caller makes (as .grad is).  G is the first B
    rows of `buffer` when one is given (reused from step to step: a fresh
    B x d block costs a page fault per 4 KiB on every step), else new."""

    def __init__(self, buffer: Optional[List[torch.Tensor]] = None) -> None:
        self.buffer = buffer
        self.G: Optional[torch.Tensor] = None
        self.written: set = set()
        self.forward_id: Optional[int] = None
        self.closed = False


class GradSampler:
    """Per-example gradients from the ordinary loss.backward(), by hooks on
    `model`'s modules (see the module's text).  take() returns the B x d
    matrix of the last forward pass's backward passes (columns as
    PerExampleGradients') and starts a new step; reset() drops it.

    loss_reduction: "mean" -- the loss is the batch's mean of per-example
      losses, so the gradient at each output is 1/B of that example's and
      is multiplied by B (B the batch's actual size, as Opacus; each row is
      then exactly grad l_i); "sum" -- taken as is.
    Refused: batch normalisation (refuse_batch_statistics), Embedding with
    scale_grad_by_freq (the batch's counts mix examples) or sparse, a module
    with parameters whose output is not one tensor, and per-example
    gradients from two forward passes in one step (the backward of a second
    forward before take() or reset(): each step is ONE Poisson batch).  A
    forward pass that no backward follows (an evaluation without
    torch.no_grad()) is harmless.  Parameters with requires_grad False at
    construction have no columns and are never touched."""

    def __init__(self, model: torch.nn.Module, loss_reduction: str = "mean") -> None:
        if loss_reduction not in ("mean", "sum"):
            raise ValueError(f"loss_reduction must be 'mean' or 'sum', got {loss_reduction!r}")
        refuse_batch_statistics(model)
        self.model, self.loss_reduction = model, loss_reduction
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        self.names = [n for n, _ in named]
        self.params = [p for _, p in named]
        self.shapes = [p.shape for p in self.params]
        self.columns: Dict[int, Tuple[int, int]] = {}
        col = 0
        for p in self.params:
            self.columns[id(p)] = (col, col + p.numel())
            col += p.numel()
        self.d = col
        self._buffer: List[torch.Tensor] = []  # the training steps' G (one step's at a time: take() hands it
        self._session = _Session(self._buffer)  # to step(), which is done with it before the next backward)
        self._forward_id = 0
        self._suspended = False
        self._handles: List[Any] = []
        for name, m in model.named_modules():
            if not any(p.requires_grad for p in m.parameters(recurse=False)):
                continue
            if isinstance(m, torch.nn.Embedding) and (m.scale_grad_by_freq or m.sparse):
                raise ValueError(f"module {name} (Embedding) has scale_grad_by_freq or sparse: the first scales "
                                 "by counts over the whole batch (examples mix), the second makes sparse "
                                 "gradients the private step does not write; turn them off")
            rule = LAYER_RULES.get(type(m), _own_module)  # exact type: a subclass may change forward
            self._handles.append(m.register_forward_hook(_Hook(self._forward_hook(rule, name or type(m).__name__))))
        self._handles.append(model.register_forward_pre_hook(_Hook(self._count_forward)))

    # the hooks
    def _count_forward(self, module: torch.nn.Module, inputs: Any) -> None:
        if not self._suspended:
            self._forward_id += 1

    def _forward_hook(self, rule: Callable, name: str) -> Callable:
        def hook(module: torch.nn.Module, inputs: Tuple[Any, ...], output: Any) -> None:
            if self._suspended or not torch.is_grad_enabled():
                return
            if not isinstance(output, torch.Tensor):
                raise TypeError(f"module {name} ({type(module).__name__}) returned {type(output).__name__}: "
                                "per-example gradients of a module with parameters need one tensor output, so "
                                "recurrent and attention modules (LSTM, GRU, RNN, MultiheadAttention, Transformer "
                                "layers) are not supported: write the layer from Linear modules (a cell stepped in "
                                "forward; attention from Linear projections), whose gradients the hooks take")
            if not output.requires_grad:
                return
            act = tuple(a.detach() if isinstance(a, torch.Tensor) else a for a in inputs)
            if rule is _own_module:  # its check needs the batch output (a copy: ops after it may work in place)
                act = act + (output.detach().clone(),)
            session, fid = self._session, self._forward_id
            output.register_hook(lambda g: self._backward(rule, name, module, act, session, fid, g))
        return hook

    def _backward(self, rule: Callable, name: str, module: torch.nn.Module, act: Tuple[Any, ...],
                  session: _Session, fid: int, g: torch.Tensor) -> None:
        if session.closed:
            raise RuntimeError("a backward pass through a forward pass made before the last optimizer.step() or "
                               "zero_grad(): per-example gradients are taken from the forward pass of the step")
        if session.forward_id is None:
            session.forward_id = fid
        elif session.forward_id != fid:
            raise RuntimeError("per-example gradients of two forward passes in one step: each step takes ONE "
                               "Poisson batch (one forward pass, then loss.backward(), then optimizer.step()); "
                               "accumulating batches would change the sampling the accounting assumes")
        with torch.no_grad(), self.suspended():
            if g.shape[0] == 0:  # an empty batch: rows of nothing (the rules' reshapes need a row to infer from)
                blocks = [(p, g.new_zeros((0, *p.shape))) for p in module.parameters(recurse=False)
                          if id(p) in self.columns]
            else:
                if self.loss_reduction == "mean":
                    g = g * g.shape[0]
                blocks = rule(module, act, g)
        for p, t in blocks:
            self._add(session, name, p, t)

    def _add(self, session: _Session, name: str, p: torch.Tensor, t: Any) -> None:
        """t (B x p's shape, an Outer or a Bmm) into p's columns of the session's G."""
        B = t.a.shape[0] if isinstance(t, (Outer, Bmm)) else t.shape[0]
        if session.G is None:
            buf = session.buffer
            if buf is None:
                session.G = torch.empty((B, self.d), dtype=torch.float32, device=p.device)
            else:
                if not buf or buf[0].shape[0] < B or buf[0].device != p.device:
                    buf[:] = [torch.empty((max(B, 1), self.d), dtype=torch.float32, device=p.device)]
                session.G = buf[0][:B]
        elif session.G.shape[0] != B:
            raise ValueError(f"module {name} saw {B} examples where the batch has {session.G.shape[0]}: every "
                             "module with parameters needs the batch dimension first")
        lo, hi = self.columns[id(p)]
        dst = session.G[:, lo:hi]
        again = id(p) in session.written  # a module used twice, or a second backward: added, as .grad is
        if isinstance(t, (Outer, Bmm)):
            a, b = t.a.to(dst.dtype), t.b.to(dst.dtype)  # G is float32 whatever the model's dtype
            if isinstance(t, Outer):
                dst3 = dst.view(B, a.shape[1], b.shape[1])
                if again:
                    dst3.addcmul_(a.unsqueeze(2), b.unsqueeze(1))
                else:
                    torch.mul(a.unsqueeze(2), b.unsqueeze(1), out=dst3)
            else:
                dst3 = dst.view(B, a.shape[1], b.shape[2])
                if again:
                    dst3.baddbmm_(a, b)
                else:
                    torch.bmm(a, b, out=dst3)
        elif again:
            dst += t.reshape(B, hi - lo)
        else:
            dst.copy_(t.reshape(B, hi - lo))
        session.written.add(id(p))

    # the caller's side
    @contextlib.contextmanager
    def suspended(self) -> Iterator[None]:
        """Hooks off (forward passes not counted, nothing captured)."""
        was, self._suspended = self._suspended, True
        try:
            yield
        finally:
            self._suspended = was

    @contextlib.contextmanager
    def isolated(self) -> Iterator[None]:
        """A fresh session for a computation outside the training step (the
        step's own session is kept and restored)."""
        kept, self._session = self._session, _Session()
        try:
            yield
        finally:
            self._session.closed = True
            self._session = kept

    def take(self) -> Optional[torch.Tensor]:
        """The B x d per-example gradients of this step (None without a
        backward pass), the columns of parameters that got none zero; starts
        a new step.  Outside isolated(), a view of the buffer that the next
        step's backward pass overwrites: use it before then."""
        s = self._session
        self.reset()
        if s.G is None:
            return None
        for p in self.params:
            if id(p) not in s.written:  # unused in this forward pass: zero gradient
                a, b = self.columns[id(p)]
                s.G[:, a:b] = 0.0
        return s.G

    def zero_grad(self) -> None:
        """Drop the per-example gradients taken since the last step (the
        optimizer's zero_grad).  A forward pass none of whose backward
        hooks has run yet stays the step's, so that the order forward,
        zero_grad(), backward, step() works: still one forward pass a step."""
        if self._session.G is not None or self._session.forward_id is not None:
            self.reset()

    def reset(self) -> None:
        """Drop this step's per-example gradients; a backward through an
        earlier forward pass is refused from now on."""
        self._session.closed = True
        self._session = _Session(self._buffer)

    def unflatten(self, v: torch.Tensor) -> List[torch.Tensor]:
        return _unflatten(v, self.shapes)

    def remove_hooks(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []


class SampleGradients:
    """Per-example gradients of criterion(model(*inputs), target) for a
    batch outside the training step, by the GradSampler's hooks in a session
    of their own: the callable with the interface of PerExampleGradients
    (grads(x, y) -> B x d, .d) that the bases' own samples use.  The model
    runs in whatever mode (train / eval) it is in."""

    def __init__(self, sampler: GradSampler, criterion: Callable[[Any, Any], torch.Tensor]) -> None:
        self.sampler, self.criterion = sampler, criterion
        self.d = sampler.d

    def __call__(self, *batch: Any) -> torch.Tensor:
        if len(batch) < 2:
            raise ValueError("a batch for per-example gradients is (input, ..., target)")
        *inputs, target = batch
        s = self.sampler
        with torch.enable_grad(), s.isolated():
            loss = self.criterion(s.model(*inputs), target)
            torch.autograd.grad(loss, s.params, allow_unused=True)
            G = s.take()
        if G is None:
            raise RuntimeError("no per-example gradient reached the hooks (does the loss depend on the model?)")
        return G

    def unflatten(self, v: torch.Tensor) -> List[torch.Tensor]:
        return self.sampler.unflatten(v)
