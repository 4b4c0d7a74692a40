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
import typing
from dataclasses import dataclass
from typing import Iterable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ..config import ModelConfig, TrainConfig
from ..overrides import apply_overrides
from ..model.electra import Electra
from ..model.gdes import plain_state_dict
from ..model.transformer import Encoder
from ..training.device import check_precision, device_named
from ..training.optim import AdamWeightDecay, lr_at
from .task import Example, Task


@dataclass
class FinetuneConfig:
    """The paper's GLUE recipe for ELECTRA-Small; every official-code quirk is an option."""

    learning_rate: float = 3e-4  # Small; the paper uses 1e-4 for Base, 5e-5 for Large
    layerwise_decay: float = 0.8  # 1.0 turns layer-wise decay off
    # False: the head gets lr, the top layer lr*0.8, ..., the embeddings lr*0.8^(L+1) (intended).
    # True: the official code's off-by-one, top layer lr*0.8^2, embeddings lr*0.8^(L+2).
    layerwise_decay_official: bool = False
    weight_decay: float = 0.0  # paper Table 7; the official code's default is 0.01
    warmup_fraction: float = 0.1
    # "official": lr = peak * (1 - step/T) * min(1, step/warmup), as optimization.py computes it;
    # "linear": ramp to the peak, then decay linearly from the peak to 0.
    schedule: typing.Literal["official", "linear"] = "official"
    batch_size: int = 32
    eval_batch_size: int = 128
    max_seq_len: int = 128
    epochs: int = 0  # 0: the paper's per-task number (3; 10 for RTE and STS-B)
    head_dropout: float = 0.1
    # Dropout inside the encoder while fine-tuning (the official code uses 0.1 whatever the
    # pre-training used); None keeps the checkpoint's own values.
    encoder_dropout: float | None = 0.1
    double_unordered: bool = True  # official name: MRPC and STS-B doubled with A, B swapped
    # 0: a fresh permutation every epoch. N > 0: the official input pipeline (preprocessing.py,
    # N = 100; .train.batch_order), so epochs overlap and an example may come twice in a row.
    shuffle_buffer: int = 0
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_eps: float = 1e-6
    bias_correction: bool = False  # the official AdamWeightDecayOptimizer has none
    grad_clip: float = 1.0  # global norm; 0 disables
    # "sum": the official run_finetuning.py minimises tf.reduce_sum of the per-example losses:
    # Adam hardly notices the 32x scale, but the clip at 1.0 then bites on almost every step and
    # eps weighs 32x less. "mean": the PyTorch habit. Logged losses are per example either way.
    loss_reduction: typing.Literal["sum", "mean"] = "sum"
    # Re-initialise the encoder at random (same shape and tokenizer): the no-pre-training baseline.
    from_scratch: bool = False
    # Re-initialise the top K encoder layers before fine-tuning (few-sample recipe, .fewsample).
    reinit_layers: int = 0
    vocab: str | None = None  # a vocab.txt for checkpoints that ship no tokenizer
    # A text longer than max_seq_len: "truncate" cuts it (the paper); "windows" reads a single
    # text whole in half-overlapping windows, averaging their logits (see .windows).
    long_text: typing.Literal["truncate", "windows"] = "truncate"
    # The model a run keeps: "last" (the paper), or "best", the best epoch on 10% of the training
    # set held out for the choice (.train.hold_out): the dev set is reported, so it never chooses.
    keep_epoch: typing.Literal["last", "best"] = "last"
    device: str = "auto"
    # bf16 autocast (a GPU with bfloat16, or a CPU that has it natively): the products in bf16,
    # the loss, the optimiser and the weights in fp32 (training.device).
    precision: typing.Literal["fp32", "bf16"] = "fp32"
    # torch.compile the training forward: True, False, or None: on a CPU when the run repays
    # the compiling (training.compiling's measured rule; what `minielectra finetune` passes).
    compile: bool | None = False
    # CPU threads (0: torch's default); a tiny model on a busy machine is faster on 1 than on 2.
    num_threads: int = 0

    def validate(self) -> FinetuneConfig:
        """Refuse values no run can use (types: :func:`minielectra.overrides.check_types`)."""
        positive = ("positive", lambda x: x > 0)
        dropout = ("in [0, 1)", lambda x: x is None or 0 <= x < 1)  # None: the checkpoint's
        rules = {  # name -> (the range as the error says it, the test), checked in this order
            "learning_rate": positive, "batch_size": positive, "eval_batch_size": positive,
            "max_seq_len": positive, "layerwise_decay": ("in (0, 1]", lambda x: 0 < x <= 1),
            "warmup_fraction": ("in [0, 1)", lambda x: 0 <= x < 1),
            "shuffle_buffer": (">= 0 (0 = reshuffle each epoch)", lambda x: x >= 0),
            "head_dropout": dropout, "encoder_dropout": dropout,
            "reinit_layers": (">= 0", lambda x: x >= 0),
            "epochs": (">= 0 (0 = the task's)", lambda x: x >= 0)}
        for name, (allowed, ok) in rules.items():
            if not ok(getattr(self, name)):
                raise ValueError(f"finetune.{name} must be {allowed}, got {getattr(self, name)}")
        check_precision(device_named(self.device), self.precision)  # this machine can run it
        return self


def finetune_config(overrides: Iterable[str] = ()) -> FinetuneConfig:
    """The recipe with ``finetune.KEY=VALUE`` overrides applied, its ranges checked."""
    cfg = FinetuneConfig()
    apply_overrides({"finetune": cfg}, overrides)
    return cfg.validate()


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
    model.encoder.load_state_dict(plain_state_dict(source.discriminator.encoder))  # GDES folded
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
