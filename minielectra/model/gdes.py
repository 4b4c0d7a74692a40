"""Gradient-disentangled embedding sharing (``model.tying=gdes``; He, Gao, Chen, DeBERTaV3 2021).

With ``tying=embeddings`` one embedding matrix learns from two losses at once: the generator's MLM
pulls tokens that fit the same contexts together, the discriminator's replaced-token detection
pulls them apart (it must tell a plausible fake from the original). DeBERTaV3 measured this
"tug-of-war" and proposed GDES: the discriminator reads

    E_D = sg(E_G) + E_delta

where ``sg`` is a stop-gradient and ``E_delta`` is the discriminator's own residual, initialised at
zero. The generator's tables ``E_G`` learn from the MLM loss only; the discriminator still starts
from (and keeps following) what the generator learnt, and corrects it through ``E_delta``.

Here the word, position and segment tables are shared this way; the embedding LayerNorm is the
discriminator's own. Everything that leaves the pre-training model (fine-tuning, the
transformers export, diagnostics) sees the folded tables ``E_G + E_delta``
(:func:`plain_state_dict`), an ordinary :class:`~.transformer.Embeddings`.

Axis letters: b batch, n sequence, e embedding width, v vocabulary.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..config import ModelConfig
from .transformer import Embeddings

TABLES = ("word", "position", "segment")


class ResidualEmbeddings(nn.Module):
    """The discriminator's embeddings under GDES: ``sg(base table) + own residual`` per table.

    ``base`` is the generator's :class:`Embeddings` module (registered here too, so a checkpoint
    stores it once and reloads the sharing, as with ``tying=embeddings``). The residuals are
    plain parameters named ``word_delta`` etc., so code that reads ``embeddings.word`` by habit
    fails loudly instead of silently reading a residual.
    """

    def __init__(self, cfg: ModelConfig, base: Embeddings):
        super().__init__()
        self.cfg = cfg
        self.base = base
        # Zero at the start: the discriminator first sees exactly the generator's embeddings.
        self.word_delta = nn.Parameter(torch.zeros_like(base.word.weight))  # (v, e)
        self.position_delta = nn.Parameter(torch.zeros_like(base.position.weight))  # (n_max, e)
        self.segment_delta = nn.Parameter(torch.zeros_like(base.segment.weight))  # (2, e)
        self.norm = nn.LayerNorm(cfg.embedding_size, eps=cfg.layer_norm_eps)
        self.dropout = nn.Dropout(cfg.dropout)

    def _lookup(self, table: str, ids: torch.Tensor) -> torch.Tensor:
        # The stop-gradient: the generator's table gets no gradient from the discriminator.
        shared = getattr(self.base, table)(ids).detach()
        return shared + F.embedding(ids, getattr(self, f"{table}_delta"))

    def forward(self, input_ids: torch.Tensor,
                token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        n = input_ids.shape[1]
        if n > self.position_delta.shape[0]:
            raise ValueError(f"sequence length {n} exceeds max_position_embeddings "
                             f"{self.position_delta.shape[0]}")
        positions = torch.arange(n, device=input_ids.device)  # (n,) broadcast over the batch
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)  # every token in segment 0
        x = (self._lookup("word", input_ids) + self._lookup("position", positions)
             + self._lookup("segment", token_type_ids))  # (b, n, e)
        return self.dropout(self.norm(x))

    @torch.no_grad()
    def folded(self) -> Embeddings:
        """An ordinary :class:`Embeddings` computing the same function: tables ``E_G + E_delta``."""
        out = Embeddings(self.cfg).to(self.word_delta.device)
        for table in TABLES:
            getattr(out, table).weight.copy_(getattr(self.base, table).weight
                                             + getattr(self, f"{table}_delta"))
        out.norm.load_state_dict(self.norm.state_dict())
        return out


def plain_state_dict(net: nn.Module) -> dict[str, torch.Tensor]:
    """``net.state_dict()`` with every :class:`ResidualEmbeddings` folded into plain tables.

    For a model without GDES this is ``net.state_dict()`` itself. A discriminator's folded state
    loads into an ordinary :class:`~.transformer.Encoder` (fine-tuning) and maps one-to-one onto
    transformers' ELECTRA (the export).
    """
    state = net.state_dict()
    for prefix, module in net.named_modules():
        if isinstance(module, ResidualEmbeddings):
            head = f"{prefix}." if prefix else ""
            state = {k: v for k, v in state.items() if not k.startswith(head)}
            state.update({head + k: v for k, v in module.folded().state_dict().items()})
    return state


def word_embeddings(embeddings: nn.Module) -> torch.Tensor:
    """The word table a network actually reads, ``(v, e)``, detached (folded under GDES)."""
    if isinstance(embeddings, ResidualEmbeddings):
        return embeddings.folded().word.weight.detach()
    return embeddings.word.weight.detach()
