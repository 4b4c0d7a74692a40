"""Dense layers whose CPU matrix products go through oneDNN: ``nn.Linear``, up to twice as fast.

torch multiplies float32 matrices on a CPU with MKL's ``sgemm``. MKL chooses its code by the
processor's vendor: on an AMD processor it runs its AVX2 code, half the width of the AVX-512 units
the processor has. oneDNN, the other math library in every x86 build of torch, chooses by the
instructions the processor reports. On a 2-core AMD EPYC (Zen 5) the products of a ``mini`` step
ran about twice as fast through oneDNN, forward and both gradients, and the whole step 1.4x
(``benchmarks/results/cpu.json``). On an Intel processor the two libraries are close.

:class:`Linear` is ``nn.Linear`` (same parameters, state dict, initialisation), and
:func:`linear` is ``F.linear``; on a CPU, in float32 and outside autocast they compute
``x @ weight.T`` with :func:`cpu_matmul`, everywhere else with ``F.linear``. The results agree
with MKL's to float32 rounding (the order of the sums differs), and are as deterministic.
``ONEDNN = False`` turns it off (the benchmarks compare the two).

:func:`cpu_matmul` is a ``torch.library`` custom op with its own gradient: ``torch.compile``
keeps it as one call (inductor's own lowering of the oneDNN op expects weights packed for
inference) and fuses the bias and what follows around it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import register_flop_formula

# oneDNN ships in every x86 and ARM build of torch; a build without it keeps F.linear.
ONEDNN = torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


@torch.library.custom_op("minielectra::cpu_matmul", mutates_args=())
def cpu_matmul(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``x @ weight.T`` by oneDNN: ``x`` (r, i), ``weight`` (o, i) -> (r, o). Strided views
    (transposes) are read in place, without a copy."""
    return torch.ops.mkldnn._linear_pointwise(x, weight, None, "none", [], "")


@cpu_matmul.register_fake
def _(x, weight):
    return x.new_empty(x.shape[0], weight.shape[0])


def _save(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _grads(ctx, grad):
    """``y = x W^T``: ``dx = g W``, ``dW = g^T x``, both through oneDNN as well."""
    x, weight = ctx.saved_tensors
    dx = cpu_matmul(grad, weight.t()) if ctx.needs_input_grad[0] else None  # (r, o) @ (o, i)
    dw = cpu_matmul(grad.t(), x.t()) if ctx.needs_input_grad[1] else None  # (o, r) @ (r, i)
    return dx, dw


cpu_matmul.register_autograd(_grads, setup_context=_save)


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
