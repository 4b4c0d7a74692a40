"""Multi-head self-attention written with einops (Vaswani et al. 2017, section 3.2).

Two interchangeable paths compute the same function:

- ``"sdpa"``: ``torch.nn.functional.scaled_dot_product_attention``, which picks a fused kernel
  (flash / memory-efficient on GPU, a fused C++ loop on CPU). This is what training uses.
- ``"reference"``: ``softmax(Q K^T / sqrt(d_head)) V`` written out, so a student can read every
  step and a test can compare the two.

Axis letters used in every pattern and shape comment of the library:
``b`` batch, ``n`` sequence (queries), ``m`` sequence (keys), ``d`` model width, ``h`` heads,
``e`` head width (``d = h * e``), ``v`` vocabulary.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from .cpu import Linear


def padding_mask(attention_mask: torch.Tensor | None) -> torch.Tensor | None:
    """``(b, m)`` 1/0 keep-mask -> ``(b, 1, 1, m)`` boolean, broadcast over heads and queries."""
    if attention_mask is None:
        return None
    return rearrange(attention_mask.bool(), "b m -> b 1 1 m")


def additive(mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """Boolean keep-mask -> additive float mask: 0 where kept, the most negative finite value not.

    SDPA given a boolean mask returns zeros for a query whose keys are all masked (a sequence that
    is all padding); an additive mask gives the uniform average that :func:`reference_attention`,
    BERT and transformers give, so both paths agree on every row.
    """
    if mask is None:
        return None
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(
        ~mask, torch.finfo(dtype).min)


def reference_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                        mask: torch.Tensor | None = None, *, dropout: float = 0.0,
                        training: bool = False) -> torch.Tensor:
    """``softmax(q k^T / sqrt(e)) v`` for ``q, k, v`` of shape ``(b, h, n, e)``.

    ``mask`` is boolean ``(b, 1, 1, m)``, True where a key may be attended to.
    """
    scores = torch.einsum("bhne,bhme->bhnm", q, k) / math.sqrt(q.shape[-1])  # (b, h, n, m)
    if mask is not None:
        # The most negative finite value, not -inf: a row with every key masked then gives a
        # uniform average instead of NaN (the same choice as BERT and transformers).
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    probs = scores.softmax(dim=-1)
    probs = F.dropout(probs, p=dropout, training=training)
    return torch.einsum("bhnm,bhme->bhne", probs, v)  # (b, h, n, e)


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, *,
         dropout: float = 0.0) -> torch.Tensor:
    """:func:`reference_attention` by torch's fused kernel, ``(b, h, n, e)`` -> ``(b, h, n, e)``.

    Under bf16 autocast on a CPU the kernel runs in float32: torch's CPU kernel in bfloat16 took
    3.5x as long as in float32 for forward and backward at ``mini``'s shapes (2 cores, AVX512-BF16),
    and the softmax keeps float32's precision, as it does on a GPU.
    """
    if q.device.type == "cpu" and torch.is_autocast_enabled("cpu"):
        with torch.autocast("cpu", enabled=False):
            q, k, v = q.float(), k.float(), v.float()
            return F.scaled_dot_product_attention(q, k, v, attn_mask=additive(mask, q.dtype),
                                                  dropout_p=dropout)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=additive(mask, q.dtype),
                                          dropout_p=dropout)


class MultiHeadAttention(nn.Module):
    """Project to queries, keys and values, attend per head, merge heads, project back.

    Q, K and V come from one fused ``(d -> 3d)`` linear layer: one matmul instead of three, which
    matters for the small widths of ELECTRA-Small. ``minielectra.model.hf`` splits it into the separate
    ``query``/``key``/``value`` weights of the original checkpoints.
    """

    def __init__(self, hidden_size: int, num_heads: int, *, dropout: float = 0.1,
                 impl: str = "sdpa"):
        super().__init__()
        if hidden_size % num_heads:
            raise ValueError(f"hidden_size {hidden_size} not divisible by num_heads {num_heads}")
        if impl not in ("sdpa", "reference"):
            raise ValueError(f"attention impl must be 'sdpa' or 'reference', got {impl!r}")
        self.num_heads = num_heads
        self.dropout = dropout
        self.impl = impl
        self.qkv = Linear(hidden_size, 3 * hidden_size)
        self.out = Linear(hidden_size, hidden_size)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """``x`` (b, n, d), ``mask`` (b, 1, 1, n) boolean from :func:`padding_mask` -> (b, n, d)."""
        q, k, v = rearrange(self.qkv(x), "b n (three h e) -> three b h n e",
                            three=3, h=self.num_heads)
        dropout = self.dropout if self.training else 0.0
        if self.impl == "sdpa":
            ctx = sdpa(q, k, v, mask, dropout=dropout)
        else:
            ctx = reference_attention(q, k, v, mask, dropout=dropout, training=self.training)
        merged = rearrange(ctx, "b h n e -> b n (h e)")  # (b, n, d)
        return self.out(merged)
