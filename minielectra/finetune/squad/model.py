"""The span head for extractive question answering, its loss, and the saved model.

ELECTRA paper section 3.1, official code: google-research/electra ``finetune/qa/qa_tasks.py``.
One linear layer gives each position a start and an end logit; each is a softmax over the window,
trained by cross-entropy, the two averaged. Positions outside the passage get a large negative
logit, as officially; ``[CLS]`` stays open: an unanswerable window points there (BERT's null
score for 2.0). We deliberately keep this simpler head (transformers'
``ElectraForQuestionAnswering``), not the official one's start-conditioned end logits, beam search
and answerability classifier (tutorial chapter 7).

Axis letters: b batch, n sequence, d width.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ...config import FinetuneConfig, ModelConfig, SquadConfig
from ...data.tokenizer import WordPieceTokenizer
from ...model.electra import Electra
from ...model.transformer import Encoder
from ...overrides import from_dict
from ..classifier import load_encoder, model_config
from ..saved import META, load_weights, write_model

NEG = -10000.0  # the official mask value (1000 there, on logits of the same scale)


class SpanQA(nn.Module):
    """An ELECTRA encoder plus a linear span head: start and end logits per position."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.config = cfg
        self.encoder = Encoder(cfg)
        self.head = nn.Linear(cfg.hidden_size, 2)  # named like the classifier's: same lr groups
        nn.init.xavier_uniform_(self.head.weight)  # tf.layers.dense's default, as officially
        nn.init.zeros_(self.head.bias)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                token_type_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(start, end)`` logits, each ``(b, n)``; only ``[CLS]`` and the passage are open."""
        h = self.encoder(input_ids, attention_mask, token_type_ids)  # (b, n, d)
        logits = self.head(h).float()  # (b, n, 2)
        allowed = (token_type_ids == 1) & attention_mask.bool()
        allowed[:, 0] = True
        logits = logits.masked_fill(~allowed.unsqueeze(-1), NEG)
        return logits[..., 0], logits[..., 1]


def span_loss(start_logits: torch.Tensor, end_logits: torch.Tensor, starts: torch.Tensor,
              ends: torch.Tensor, *, reduction: str = "sum") -> torch.Tensor:
    """``(CE(start) + CE(end)) / 2`` per window, summed (official) or averaged over the batch."""
    losses = (F.cross_entropy(start_logits.float(), starts, reduction="none")
              + F.cross_entropy(end_logits.float(), ends, reduction="none")) / 2  # (b,)
    return losses.sum() if reduction == "sum" else losses.mean()


def build_span_qa(pretrained: Electra, cfg: FinetuneConfig) -> SpanQA:
    """A :class:`SpanQA` holding a copy of ``pretrained``'s discriminator encoder (with
    ``from_scratch``, a fresh one of the same shape). Seed torch first: the head is random."""
    return load_encoder(SpanQA(model_config(pretrained, cfg)), pretrained, cfg)


@dataclass
class FinetunedQA:
    """A fine-tuned question answerer: what ``predict`` needs."""

    model: SpanQA
    tokenizer: Any
    task: str  # "squad" or "squad_v2"
    config: FinetuneConfig
    squad: SquadConfig
    na_prob_threshold: float  # 2.0: answer "" above this P(no answer); 1.1: 1.0 (never)


def save_qa(qa: FinetunedQA, path: str | Path, *, result: dict | None = None) -> Path:
    """Weights, configs, the no-answer threshold, the tokenizer and checksums in ``path``."""
    return write_model(path, qa.model, qa.tokenizer, {
        "task": qa.task, "kind": "span_qa", "na_prob_threshold": qa.na_prob_threshold,
        "model": dataclasses.asdict(qa.model.config), "finetune": dataclasses.asdict(qa.config),
        "squad": dataclasses.asdict(qa.squad), "result": result})


def is_qa_model(path: str | Path) -> bool:
    """Whether ``path`` is a directory written by :func:`save_qa`."""
    try:
        return json.loads((Path(path) / META).read_text()).get("kind") == "span_qa"
    except (OSError, ValueError, AttributeError):
        return False


def load_qa(path: str | Path, *, device: str = "cpu") -> FinetunedQA:
    """The model :func:`save_qa` wrote, in eval mode."""
    path = Path(path)
    try:
        meta = json.loads((path / META).read_text())
        mcfg = from_dict(ModelConfig, meta["model"], prefix="model.")
        cfg = from_dict(FinetuneConfig, meta["finetune"], prefix="finetune.")
        squad = from_dict(SquadConfig, meta["squad"], prefix="squad.")
        task, thresh = meta["task"], float(meta["na_prob_threshold"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"{path / META}: not a fine-tuned question answerer "
                         f"({type(e).__name__}: {e})") from None
    model = load_weights(path, SpanQA, mcfg)
    return FinetunedQA(model.to(device).eval(), WordPieceTokenizer.load(path), task, cfg, squad,
                       thresh)
