"""The BERT encoder that both ELECTRA networks use (Devlin et al. 2019; Clark et al. 2020, sec. 3).

Leaves first: :class:`Embeddings` (word + position + segment, LayerNorm, dropout), :class:`Block`
(post-LN: ``x = LN(x + Attn(x)); x = LN(x + FFN(x))``, exact GELU), then :class:`Encoder`, which
projects embeddings to the hidden width when they differ (ELECTRA-Small: 128 -> 256) and runs the
blocks. The embeddings module is passed in, so the generator and the discriminator can hold the
very same one (weight tying, paper section 3.2).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .attention import MultiHeadAttention, padding_mask
from .cpu import Embedding, Linear
from ..config import ModelConfig


class Embeddings(nn.Module):
    """Token ids -> ``(b, n, embedding_size)``: word + position + segment, then LayerNorm."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        # No padding_idx: the official TF model has none (transformers sets 0; it only affects init).
        self.word = Embedding(cfg.vocab_size, cfg.embedding_size)
        self.position = Embedding(cfg.max_position_embeddings, cfg.embedding_size)
        self.segment = Embedding(cfg.type_vocab_size, cfg.embedding_size)
        self.norm = nn.LayerNorm(cfg.embedding_size, eps=cfg.layer_norm_eps)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, input_ids: torch.Tensor,
                token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        n = input_ids.shape[1]
        if n > self.position.num_embeddings:
            raise ValueError(f"sequence length {n} exceeds max_position_embeddings "
                             f"{self.position.num_embeddings}")
        positions = torch.arange(n, device=input_ids.device)  # (n,) broadcast over the batch
        x = self.word(input_ids) + self.position(positions)
        if token_type_ids is None:
            x = x + self.segment.weight[0]  # every token in segment 0
        else:
            x = x + self.segment(token_type_ids)
        return self.dropout(self.norm(x))  # (b, n, embedding_size)


class Block(nn.Module):
    """One post-LN transformer layer, as BERT and ELECTRA have it."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        d = cfg.hidden_size
        self.attn = MultiHeadAttention(d, cfg.num_heads, dropout=cfg.attention_dropout,
                                       impl=cfg.attention)
        self.attn_norm = nn.LayerNorm(d, eps=cfg.layer_norm_eps)
        self.ffn_in = Linear(d, cfg.intermediate_size)
        self.ffn_out = Linear(cfg.intermediate_size, d)
        self.ffn_norm = nn.LayerNorm(d, eps=cfg.layer_norm_eps)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        x = self.attn_norm(x + self.dropout(self.attn(x, mask)))  # (b, n, d)
        h = F.gelu(self.ffn_in(x))  # exact (erf) GELU, as the official code
        return self.ffn_norm(x + self.dropout(self.ffn_out(h)))  # (b, n, d)


class Encoder(nn.Module):
    """Embeddings -> optional projection -> ``num_layers`` blocks -> ``(b, n, hidden_size)``."""

    def __init__(self, cfg: ModelConfig, *, embeddings: Embeddings | None = None):
        super().__init__()
        self.embeddings = embeddings if embeddings is not None else Embeddings(cfg)
        # Each network keeps its own projection even when embeddings are shared (official code).
        self.embed_proj = (Linear(cfg.embedding_size, cfg.hidden_size)
                           if cfg.embedding_size != cfg.hidden_size else nn.Identity())
        # ALBERT-style sharing (model.share_layers, ALECTRA) keeps one block and applies it
        # num_layers times: the compute of num_layers blocks, the parameters of one.
        self.layers = nn.ModuleList(Block(cfg)
                                    for _ in range(1 if cfg.share_layers else cfg.num_layers))
        self.depth = cfg.num_layers

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        x = self.embed_proj(self.embeddings(input_ids, token_type_ids))  # (b, n, d)
        mask = padding_mask(attention_mask)  # (b, 1, 1, n) or None
        for i in range(self.depth):
            x = self.layers[i % len(self.layers)](x, mask)
        return x


def init_weights(module: nn.Module, std: float = 0.02) -> None:
    """BERT initialisation: truncated normal (std 0.02, cut at 2 std) for dense and embedding
    weights, zero biases, unit LayerNorm. Glorot layers are re-initialised by their owners."""
    for m in module.modules():
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.trunc_normal_(m.weight, std=std, a=-2 * std, b=2 * std)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


def sinusoids(n: int, d: int) -> torch.Tensor:
    """Vaswani et al. 2017, sec. 3.5: row p is ``sin, cos(p / 10000^(2i/d))`` interleaved, (n, d).

    The dot product of rows p and q is a sum of ``cos((p - q) / 10000^(2i/d))``: it depends on the
    offset p - q only, largest at 0 and falling off with distance."""
    position = torch.arange(n, dtype=torch.float32)[:, None]  # (n, 1)
    inv_freq = torch.exp(-math.log(10000.0) * torch.arange(0, d, 2, dtype=torch.float32) / d)
    angles = position * inv_freq  # (n, ceil(d/2))
    table = torch.zeros(n, d)
    table[:, 0::2] = torch.sin(angles)
    table[:, 1::2] = torch.cos(angles[:, : d // 2])
    return table


@torch.no_grad()
def init_sinusoidal_positions(module: nn.Module, std: float = 0.02) -> None:
    """Start every :class:`Embeddings` position table below ``module`` as sinusoids with the
    other weights' ``std`` (so that, after the embedding LayerNorm, position weighs as much as
    word identity, as with the normal init)."""
    for m in module.modules():
        if isinstance(m, Embeddings):
            table = sinusoids(*m.position.weight.shape)
            m.position.weight.copy_(table / table.std() * std)
