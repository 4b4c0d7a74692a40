"""The fine-tuning model: a classifier on the discriminator, its optimiser groups, its loss.

Paper section 3.1 and appendix Table 7; official code: google-research/electra
``configure_finetuning.py``, ``finetune/classification/``, ``model/optimization.py``; the recipe
is listed in ``tutorial/appendix_official_recipe.md`` section A.4 and, option by option, in
:class:`FinetuneConfig`. The head is the final ``[CLS]`` vector -> dropout -> one linear layer
(Glorot init): no pooler and no extra dense layer, unlike transformers'
``ElectraForSequenceClassification``. The loop and the paper's protocol: :mod:`.train`.

Axis letters: b batch, n sequence, d width, c classes.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ..config import FinetuneConfig, ModelConfig, TrainConfig
from ..model.electra import Electra
from ..model.transformer import Encoder
from ..training.optim import AdamWeightDecay, lr_at
from .task import Example, Task


class SequenceClassifier(nn.Module):
    """An ELECTRA encoder plus the paper's head: ``[CLS]`` -> dropout -> linear."""

    def __init__(self, cfg: ModelConfig, num_labels: int, *, dropout: float = 0.1):
        super().__init__()
        self.config = cfg
        self.encoder = Encoder(cfg)
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(cfg.hidden_size, num_labels)
        nn.init.xavier_uniform_(self.head.weight)  # TF's default for tf.layers.dense: Glorot
        nn.init.zeros_(self.head.bias)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        """Logits ``(b, c)``; for regression ``c = 1``."""
        h = self.encoder(input_ids, attention_mask, token_type_ids)  # (b, n, d)
        return self.head(self.dropout(h[:, 0]))  # the [CLS] vector, (b, d) -> (b, c)


def load_encoder(model: nn.Module, pretrained, cfg: FinetuneConfig) -> nn.Module:
    """``model`` (a classifier or span head, just built) with a copy of ``pretrained``'s
    discriminator encoder; with ``from_scratch`` a fresh one of the same shape."""
    source = Electra(pretrained.config) if cfg.from_scratch else pretrained
    model.encoder.load_state_dict(source.discriminator.encoder.state_dict())
    return model


def model_config(pretrained, cfg: FinetuneConfig) -> ModelConfig:
    """The checkpoint's model config with the encoder dropout fine-tuning uses."""
    if cfg.encoder_dropout is None:
        return pretrained.config
    return dataclasses.replace(pretrained.config, dropout=cfg.encoder_dropout,
                               attention_dropout=cfg.encoder_dropout)


def build_classifier(pretrained, task: Task, cfg: FinetuneConfig) -> SequenceClassifier:
    """A classifier for ``task`` holding a copy of ``pretrained``'s discriminator encoder.
    Seed torch before calling: the head (and, with ``from_scratch``, the encoder) is random."""
    model = SequenceClassifier(model_config(pretrained, cfg), task.num_labels,
                               dropout=cfg.head_dropout)
    return load_encoder(model, pretrained, cfg)


def layerwise_param_groups(model: SequenceClassifier, cfg: FinetuneConfig) -> list[dict]:
    """Optimizer groups, one per (depth, decay) pair, each with its own peak ``lr``: depth 0 is
    the embeddings and their projection, ``i + 1`` encoder layer ``i``, the head on top. No weight
    decay on biases and LayerNorm (1-d tensors), as officially."""
    num_layers = len(model.encoder.layers)
    top = num_layers + (2 if cfg.layerwise_decay_official else 1)
    depth_of = [(model.encoder.embeddings, 0), (model.encoder.embed_proj, 0)]
    depth_of += [(layer, i + 1) for i, layer in enumerate(model.encoder.layers)]
    depth_of += [(model.head, top)]
    groups: dict[tuple[int, bool], dict] = {}
    for module, depth in depth_of:
        for p in module.parameters():
            decay = p.ndim > 1 and cfg.weight_decay > 0
            g = groups.setdefault((depth, decay), {
                "params": [], "depth": depth, "weight_decay": cfg.weight_decay if decay else 0.0,
                "lr": cfg.learning_rate * cfg.layerwise_decay ** (top - depth)})
            g["params"].append(p)
    covered = sum(p.numel() for g in groups.values() for p in g["params"])
    assert covered == sum(p.numel() for p in model.parameters()), "a parameter has no group"
    return list(groups.values())


def lr_factor(step: int, total: int, warmup: int, schedule: str) -> float:
    """Multiplier of each group's peak lr at update ``step`` (0-based): the pre-training
    schedule (:func:`~minielectra.training.optim.lr_at`) over this run's ``total`` steps."""
    return lr_at(step, TrainConfig(learning_rate=1.0, max_steps=total, warmup_steps=warmup,
                                   schedule=schedule))


def make_optimizer(model: nn.Module, cfg: FinetuneConfig) -> AdamWeightDecay:
    """The official Adam over :func:`layerwise_param_groups`, shared by both loops."""
    return AdamWeightDecay(layerwise_param_groups(model, cfg), lr=cfg.learning_rate,
                           betas=(cfg.adam_beta1, cfg.adam_beta2), eps=cfg.adam_eps,
                           bias_correction=cfg.bias_correction)


def optimizer_step(model: nn.Module, opt: torch.optim.Optimizer, loss: torch.Tensor,
                   cfg: FinetuneConfig, examples: int) -> float:
    """One update on ``loss`` (gradients cleared, clipped at ``cfg.grad_clip``), shared by the
    classification and SQuAD loops; returns the loss per example (a summed loss is divided)."""
    opt.zero_grad(set_to_none=True)
    loss.backward()
    if cfg.grad_clip > 0:
        nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
    opt.step()
    return loss.item() / (examples if cfg.loss_reduction == "sum" else 1)


def encode(tokenizer, examples: Sequence[Example], max_len: int) -> list[tuple[list, list]]:
    """``[CLS] A [SEP] B [SEP]`` ids and segment ids, longest-first truncated, unpadded."""
    return [tokenizer.encode_pair(e.text_a, e.text_b, max_len=max_len) for e in examples]


def collate(encoded: Sequence[tuple[list, list]], pad_id: int) -> dict[str, torch.Tensor]:
    """Pad to the longest sequence in the batch (not to 128: same result, less CPU time)."""
    n = max(len(ids) for ids, _ in encoded)
    input_ids = torch.full((len(encoded), n), pad_id, dtype=torch.long)
    token_type_ids = torch.zeros((len(encoded), n), dtype=torch.long)
    attention_mask = torch.zeros_like(input_ids)
    for row, (ids, types) in enumerate(encoded):
        input_ids[row, :len(ids)] = torch.tensor(ids)
        token_type_ids[row, :len(types)] = torch.tensor(types)
        attention_mask[row, :len(ids)] = 1
    return {"input_ids": input_ids, "attention_mask": attention_mask,
            "token_type_ids": token_type_ids}


def task_loss(task: Task, logits: torch.Tensor, labels: torch.Tensor, *,
              reduction: str = "sum") -> torch.Tensor:
    """Per-example losses, summed (official) or averaged: cross-entropy, or for regression the
    squared error against the scaled label (``Task.label_scale``; STS-B: ``label / 5``)."""
    if task.is_regression:
        target = (labels.float() - task.label_shift) / task.label_scale
        losses = (logits.squeeze(-1).float() - target) ** 2  # (b,)
    else:
        losses = F.cross_entropy(logits.float(), labels.long(), reduction="none")  # (b,)
    return losses.sum() if reduction == "sum" else losses.mean()
