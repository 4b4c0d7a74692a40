"""Dense and embedding layers as a CPU runs them fastest: ``nn.Linear`` and ``nn.Embedding``.

Two of torch's defaults cost a small model much of its CPU time; each layer here computes the same
function with the same parameters (state dict, initialisation) by another route, on a CPU only.

- :class:`Linear`: torch multiplies float32 matrices on a CPU with MKL's ``sgemm``, which chooses
  its code by the processor's vendor: on an AMD processor it runs its AVX2 code, half the width of
  the AVX-512 units the processor has. oneDNN, the other math library in every x86 build of torch,
  chooses by the instructions the processor reports. On a 2-core AMD EPYC (Zen 5) the products of
  a ``mini`` step (forward and both gradients) ran about twice as fast through oneDNN
  (``benchmarks/results/cpu.json``). The results agree with MKL's to float32 rounding (the sums
  run in another order) and are as deterministic. ``ONEDNN = False`` turns it off.
- :class:`Embedding`: ``torch.compile`` turns an embedding's gradient into one atomic addition per
  number (``index_put`` with ``accumulate``); on a CPU that is a compare-and-swap loop, contended
  by every thread adding into the same rows (the segment table has two). Eager torch's kernel
  sums each row once; :func:`embedding_grad` keeps that kernel inside compiled code.

The two routes are ``torch.library`` custom ops with their gradients registered, so
``torch.compile`` calls them as they are and fuses what comes before and after (the bias, GELU,
LayerNorm). Axis letters: r rows (batch x sequence), i inputs, o outputs, e embedding width.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import register_flop_formula

# oneDNN ships in every x86 and ARM build of torch; a build without it keeps F.linear.
ONEDNN = torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")

# --------------------------------------------------------------------------------- products


@torch.library.custom_op("minielectra::cpu_matmul", mutates_args=())
def cpu_matmul(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``x @ weight.T`` by oneDNN: ``x`` (r, i), ``weight`` (o, i) -> (r, o)."""
    return torch.ops.mkldnn._linear_pointwise(x, weight, None, "none", [], "")


@cpu_matmul.register_fake
def _(x, weight):
    return x.new_empty(x.shape[0], weight.shape[0])


def _save_inputs(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _matmul_grads(ctx, grad):
    """``y = x W^T``: ``dx = g W`` and ``dW = g^T x``, through oneDNN too.

    oneDNN reads a transposed operand from a copy, which costs less than MKL's slower product;
    for ``dW``, a sum over all r rows, it runs about twice as fast with the smaller of o and i
    as its rows, so ``dW^T = x^T g`` is computed when i < o.
    """
    x, weight = ctx.saved_tensors
    dx = cpu_matmul(grad, weight.t()) if ctx.needs_input_grad[0] else None  # (r, o) @ (o, i)
    if not ctx.needs_input_grad[1]:
        dw = None
    elif weight.shape[0] <= weight.shape[1]:
        dw = cpu_matmul(grad.t(), x.t())  # (o, r) @ (r, i)
    else:
        dw = cpu_matmul(x.t(), grad.t()).t()  # ((i, r) @ (r, o))^T
    return dx, dw


cpu_matmul.register_autograd(_matmul_grads, setup_context=_save_inputs)


@register_flop_formula(torch.ops.minielectra.cpu_matmul)
def _flops(x_shape, weight_shape, *args, **kwargs) -> int:
    """What ``torch.utils.flop_counter`` counts for a product: 2 r i o (a multiply and an add)."""
    return 2 * x_shape[0] * x_shape[1] * weight_shape[0]


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``F.linear(x, weight, bias)``: ``(..., i)`` -> ``(..., o)``, on a CPU through oneDNN."""
    if not (ONEDNN and x.device.type == "cpu" and x.dtype == weight.dtype == torch.float32
            and not torch.is_autocast_enabled("cpu")):
        return F.linear(x, weight, bias)
    y = cpu_matmul(x.reshape(-1, x.shape[-1]), weight).view(*x.shape[:-1], weight.shape[0])
    return y if bias is None else y + bias


class Linear(nn.Linear):
    """``nn.Linear`` computed by :func:`linear`."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias)

# ------------------------------------------------------------------------------- embeddings


@torch.library.custom_op("minielectra::embedding_grad", mutates_args=())
def embedding_grad(grad: torch.Tensor, ids: torch.Tensor, rows: int) -> torch.Tensor:
    """The gradient of a ``(rows, e)`` table looked up at ``ids`` (...): ``grad`` (..., e)
    summed into the rows it came from, by eager torch's kernel."""
    return torch.ops.aten.embedding_dense_backward(grad, ids, rows, -1, False)


@embedding_grad.register_fake
def _(grad, ids, rows):
    return grad.new_empty(rows, grad.shape[-1])


class _Lookup(torch.autograd.Function):
    """``weight[ids]`` whose gradient is :func:`embedding_grad` (the forward stays an ordinary
    gather that compiled code fuses with the sum and LayerNorm after it)."""

    @staticmethod
    def forward(weight: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        return F.embedding(ids, weight)

    @staticmethod
    def setup_context(ctx, inputs, output):
        weight, ids = inputs
        ctx.save_for_backward(ids)
        ctx.rows = weight.shape[0]

    @staticmethod
    def backward(ctx, grad):
        (ids,) = ctx.saved_tensors
        return embedding_grad(grad, ids, ctx.rows), None


def embedding(ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``F.embedding(ids, weight)``: ``(...)`` -> ``(..., e)``; on a CPU with :func:`embedding_grad`
    as its gradient."""
    if weight.device.type != "cpu" or not weight.requires_grad or not torch.is_grad_enabled():
        return F.embedding(ids, weight)
    return _Lookup.apply(weight, ids)


class Embedding(nn.Embedding):
    """``nn.Embedding`` (without ``padding_idx`` or ``max_norm``) computed by :func:`embedding`."""

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return embedding(ids, self.weight)
