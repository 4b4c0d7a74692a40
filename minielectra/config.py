"""Typed configuration: one dataclass per concern, composed into :class:`RunConfig`, plus presets
and fine-tuning's own two sections, :class:`FinetuneConfig` and :class:`SquadConfig`.

Defaults are the official ELECTRA-Small values (Clark et al. 2020, appendix Table 6, and
google-research/electra ``configure_pretraining.py``); each place we differ says why. The presets
are ``PRESETS`` (:mod:`.presets`); ``apply_overrides(cfg, ["train.max_steps=20"])`` sets dotted,
type-checked values (:mod:`.overrides`); each section's ``validate()`` checks ranges.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Literal

from .overrides import apply_overrides, check_types, checked, from_dict, override_keys  # noqa: F401
from .presets import PRESETS
from .safeio import read_json, write_file

Tying = Literal["none", "embeddings", "all"]
Objective = Literal["electra", "mlm", "electra-15", "replace-mlm", "all-tokens-mlm"]
Procedure = Literal["joint", "two-stage", "adversarial"]


@dataclass
class ModelConfig:
    """The discriminator's shape; the generator is derived from it (see :meth:`generator`)."""

    vocab_size: int = 30522
    embedding_size: int = 128  # ELECTRA-Small factorises embeddings: 128, projected to hidden
    hidden_size: int = 256
    num_layers: int = 12
    num_heads: int = 4
    intermediate_size: int = 1024
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    dropout: float = 0.1
    attention_dropout: float = 0.1
    layer_norm_eps: float = 1e-12
    initializer_range: float = 0.02
    # How the learned position table starts: "normal" like every other weight (the official
    # code), or Vaswani et al.'s sines and cosines (2017, sec. 3.5), scaled to the same std: one
    # pattern per offset, so `mini` compares neighbours 1,500-2,000 steps sooner (tutorial 02,
    # "Where the position table starts").
    position_init: Literal["normal", "sinusoidal"] = "normal"
    # Generator width as a fraction of the discriminator's: hidden, heads and FFN are scaled, the
    # depth is not (the official code keeps all 12 layers). 1/4 is ELECTRA-Small; 1.0 is Small++.
    generator_size: float = 0.25
    # none: two separate models; embeddings: share word/position/segment embeddings and the
    # embedding LayerNorm (official default); all: share every encoder weight (needs size 1.0).
    tying: Tying = "embeddings"
    # "sdpa" calls torch's fused scaled_dot_product_attention; "reference" writes the softmax out.
    attention: Literal["sdpa", "reference"] = "sdpa"
    share_layers: bool = False  # ALBERT-style: one block's weights for every layer (ALECTRA)
    # Special ids (BERT uncased vocab by default); set from the tokenizer when a vocab is trained.
    pad_token_id: int = 0
    cls_token_id: int = 101
    sep_token_id: int = 102
    mask_token_id: int = 103

    def __post_init__(self) -> None:  # a model is only ever built from a valid config
        checked(self, "model.")

    def generator(self) -> "ModelConfig":
        """The generator's shape: width scaled by ``generator_size``, same depth and embeddings."""
        hidden, heads, intermediate = self.generator_widths()
        return dataclasses.replace(self, hidden_size=hidden, num_heads=heads,
                                   intermediate_size=intermediate, generator_size=1.0)

    def generator_widths(self) -> tuple[int, int, int]:
        """The generator's hidden size, heads and FFN width: the discriminator's, scaled."""
        s = self.generator_size
        return tuple(max(1, round(n * s)) for n in (self.hidden_size, self.num_heads,
                                                    self.intermediate_size))

    def validate(self) -> None:
        for name in ("vocab_size", "embedding_size", "hidden_size", "num_layers", "num_heads",
                     "intermediate_size", "max_position_embeddings", "type_vocab_size"):
            if getattr(self, name) <= 0:
                raise ValueError(f"model.{name} must be positive, got {getattr(self, name)}")
        for name in ("dropout", "attention_dropout"):  # a probability; 1 or more drops everything
            if not 0 <= getattr(self, name) < 1:
                raise ValueError(f"model.{name} must be in [0, 1), got {getattr(self, name)}")
        if not 0 < self.layer_norm_eps < 1:  # <= 0: a division by zero, NaN at the first step
            raise ValueError(f"model.layer_norm_eps must be in (0, 1), got {self.layer_norm_eps}")
        if not 0 <= self.initializer_range < float("inf"):
            raise ValueError(f"model.initializer_range must be >= 0, got "
                             f"{self.initializer_range}")
        if not 0 < self.generator_size <= 1:
            raise ValueError(f"model.generator_size must be in (0, 1], got {self.generator_size}")
        for (hidden, heads, _), who in (((self.hidden_size, self.num_heads, 0), "discriminator"),
                                        (self.generator_widths(), "generator")):
            if hidden % heads:
                raise ValueError(f"{who} hidden_size {hidden} is not divisible by "
                                 f"num_heads {heads}")
        if self.tying == "all" and self.generator_size != 1.0:
            raise ValueError("model.tying='all' shares every encoder weight, so it needs "
                             f"generator_size=1.0 (got {self.generator_size})")


@dataclass
class ObjectiveConfig:
    """The replaced-token-detection objective (paper section 2) and its alternatives (3.2)."""

    name: Objective = "electra"  # or an ablation of paper Table 5 (minielectra.objectives)
    procedure: Procedure = "joint"  # electra only: or two-stage, adversarial (paper 3.2, app. F)
    two_stage_fraction: float = 0.5  # two-stage: the generator's share of train.max_steps
    adversarial_weight: float = 1.0  # adversarial: the REINFORCE term's weight
    mask_prob: float = 0.15
    # Of the selected positions: 85% -> [MASK], 15% keep the original, 0% random (BERT: 80/10/10).
    mask_token_prob: float = 0.85
    random_token_prob: float = 0.0
    # Official code draws int((mask_prob + 0.005) * n) positions *with replacement* (duplicates
    # mask fewer distinct tokens, ~17.7 of 19 at n=128). We default to *without* replacement so
    # that "15%" means 15%; "with_replacement" reproduces the official draw on purpose.
    mask_sampling: Literal["without_replacement", "with_replacement"] = "without_replacement"
    gen_weight: float = 1.0
    disc_weight: float = 50.0  # the paper's lambda
    temperature: float = 1.0  # Gumbel-max sampling temperature for the generator

    def __post_init__(self) -> None:
        checked(self, "objective.")

    def validate(self) -> None:
        if not 0 < self.mask_prob < 1:
            raise ValueError(f"objective.mask_prob must be in (0, 1), got {self.mask_prob}")
        if self.mask_token_prob < 0 or self.random_token_prob < 0 or \
                self.mask_token_prob + self.random_token_prob > 1:
            raise ValueError("objective.mask_token_prob + random_token_prob must lie in [0, 1]")
        if self.temperature <= 0:
            raise ValueError(f"objective.temperature must be positive, got {self.temperature}")
        if self.procedure != "joint" and self.name != "electra":
            raise ValueError(f"objective.procedure={self.procedure!r} needs objective.name="
                             f"'electra' (it trains ELECTRA's two networks), got {self.name!r}")
        if not 0 < self.two_stage_fraction < 1:
            raise ValueError("objective.two_stage_fraction must be in (0, 1)")


@dataclass
class DataConfig:
    """Where text comes from and how it becomes examples (official ExampleBuilder)."""

    corpus: str = "pydocs"
    # A vocab.txt path, the word "bert-uncased" (the BERT vocab in the data dir), or None to train
    # a WordPiece vocabulary of `vocab_size` on the corpus.
    vocab: str | None = None
    vocab_size: int = 30522
    max_seq_len: int = 128
    short_seq_prob: float = 0.05  # official: 5% of examples get a random target length
    single_segment_prob: float = 0.1  # official: 10% of examples are one segment
    held_out_fraction: float = 0.02  # documents held out for evaluation, chosen by hash
    cache_dir: str | None = None  # default: ~/.cache/minielectra
    num_workers: int = 0  # processes for tokenisation; 0 = all cores
    # A `minielectra prepare --out` folder: its shards and tokenizer replace corpus and vocab.
    prepared: str | None = None
    # Two lengths, BERT's schedule (the paper's ELECTRA trains at one): 0 = one length. Else the
    # last `long_fraction` of the steps read `long_seq_len`-token examples, with the batch shrunk
    # so that a step holds as many tokens (train.batch_size x max_seq_len / long_seq_len).
    # Attention needs the short start to find its neighbours (docs/results/suite.md).
    long_seq_len: int = 0
    long_fraction: float = 0.1

    def final_seq_len(self) -> int:
        """The length a run ends at: the one its final checkpoint is scored at."""
        return self.long_seq_len or self.max_seq_len


@dataclass
class TrainConfig:
    """The official optimisation recipe (``configure_pretraining.py``, ``optimization.py``)."""

    batch_size: int = 128
    max_steps: int = 1_000_000
    learning_rate: float = 5e-4
    warmup_steps: int = 10_000
    schedule: Literal["official", "linear"] = "official"  # the two: training.optim.lr_at
    weight_decay: float = 0.01
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_eps: float = 1e-6
    bias_correction: bool = False  # the official AdamWeightDecayOptimizer has none
    grad_clip: float = 1.0
    grad_accum: int = 1
    device: str = "auto"
    precision: Literal["fp32", "bf16", "fp16"] = "fp32"
    compile: bool = False
    seed: int = 0
    log_every: int = 10
    eval_every: int = 0  # 0: only at the end
    eval_examples: int = 512
    save_every: int = 0  # 0: only at the end
    keep_last: int = 2
    keep_every: int = 0  # also keep every K-th save_every checkpoint (viz --run replays them)
    milestones: tuple[float, ...] = (0.0625, 0.125, 0.25, 0.5)  # the paper's partial checkpoints
    max_minutes: float = 0.0  # 0: no wall-clock limit; else stop (and save) after this long
    out_dir: str = "runs/electra"

    def validate(self) -> None:
        """Refuse values no run can use, naming the key and the value."""
        def refuse(name: str, rule: str) -> None:
            raise ValueError(f"train.{name} must be {rule}, got {getattr(self, name)!r}")

        for name in ("batch_size", "max_steps", "grad_accum", "log_every", "eval_examples"):
            if getattr(self, name) <= 0:
                refuse(name, "positive")
        for name in ("learning_rate", "adam_eps", "grad_clip"):
            if not 0 < getattr(self, name) < float("inf"):
                refuse(name, "positive and finite")
        for name in ("warmup_steps", "eval_every", "save_every", "keep_every", "seed"):
            if getattr(self, name) < 0:
                refuse(name, ">= 0 (0 means off)" if name != "seed" else ">= 0")
        if not 0 <= self.weight_decay < float("inf"):
            refuse("weight_decay", ">= 0 and finite")
        for name in ("adam_beta1", "adam_beta2"):
            if not 0 <= getattr(self, name) < 1:
                refuse(name, "in [0, 1)")
        if self.keep_last < 1:
            refuse("keep_last", ">= 1 (the latest checkpoint is what --resume needs)")
        if self.keep_every and not self.save_every:
            refuse("keep_every", "0 unless train.save_every is set (it keeps every K-th of those)")
        if not all(0 < f <= 1 for f in self.milestones):
            refuse("milestones", "fractions of max_steps in (0, 1]")
        if not 0 <= self.max_minutes < float("inf"):
            refuse("max_minutes", ">= 0 (0 means no limit)")
        if self.device not in ("auto", "cpu", "cuda") and not self.device.startswith("cuda:"):
            refuse("device", "auto|cpu|cuda|cuda:N")
        if not self.out_dir.strip():
            refuse("out_dir", "a directory")


@dataclass
class RunConfig:
    """Everything a run needs; written as ``config.json`` next to its outputs."""

    preset: str = "small"
    model: ModelConfig = field(default_factory=ModelConfig)
    objective: ObjectiveConfig = field(default_factory=ObjectiveConfig)
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def validate(self) -> "RunConfig":
        """Every field's type (one check for all sections), then each section's ranges and the
        rules across sections; returns the config."""
        check_types(self)
        self.model.validate()
        self.objective.validate()
        if self.objective.procedure == "two-stage" and (
                self.model.generator_size != 1.0 or self.model.tying == "all"):
            raise ValueError("objective.procedure='two-stage' copies the generator into the "
                             "discriminator: it needs model.generator_size=1.0, tying "
                             "none|embeddings")
        self.train.validate()
        d = self.data
        if d.final_seq_len() > self.model.max_position_embeddings:
            name = "long_seq_len" if d.long_seq_len else "max_seq_len"
            raise ValueError(f"data.{name} {d.final_seq_len()} exceeds "
                             f"model.max_position_embeddings {self.model.max_position_embeddings}")
        if d.long_seq_len:
            self._check_two_lengths()
        return self

    def _check_two_lengths(self) -> None:
        d, b = self.data, self.train.batch_size
        if d.long_seq_len <= d.max_seq_len:
            raise ValueError(f"data.long_seq_len must be 0 or longer than data.max_seq_len "
                             f"{d.max_seq_len}, got {d.long_seq_len}")
        if not 0 < d.long_fraction < 1:
            raise ValueError(f"data.long_fraction must be in (0, 1), got {d.long_fraction!r}")
        if (b * d.max_seq_len) % d.long_seq_len:
            raise ValueError(f"data.long_seq_len {d.long_seq_len} must divide train.batch_size x "
                             f"data.max_seq_len ({b} x {d.max_seq_len}): the long steps hold as "
                             "many tokens as the short ones")
        if d.prepared:
            raise ValueError("data.long_seq_len: a prepared folder holds examples of one length; "
                             "train from the corpus (--corpus) to use two")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "RunConfig":
        return from_dict(cls, d)

    def save(self, path: str | Path) -> None:
        write_file(path, json.dumps(self.to_dict(), indent=2) + "\n")  # never through a link

    @classmethod
    def load(cls, path: str | Path) -> "RunConfig":
        d = read_json(path)  # not UTF-8, not JSON, not an object: refused, naming the file
        try:
            return cls.from_dict(d)
        except (KeyError, ValueError) as e:  # name the file as well as the key
            raise type(e)(f"{path}: {e.args[0] if e.args else e}") from None


# ------------------------------------------------------------------------ fine-tuning


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
    schedule: Literal["official", "linear"] = "official"
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
    loss_reduction: Literal["sum", "mean"] = "sum"
    # Re-initialise the encoder at random (same shape and tokenizer): the no-pre-training baseline.
    from_scratch: bool = False
    # Re-initialise the top K encoder layers before fine-tuning (few-sample recipe, .fewsample).
    reinit_layers: int = 0
    vocab: str | None = None  # a vocab.txt for checkpoints that ship no tokenizer
    # A text longer than max_seq_len: "truncate" cuts it (the paper); "windows" reads a single
    # text whole in half-overlapping windows, averaging their logits (see .windows).
    long_text: Literal["truncate", "windows"] = "truncate"
    # The model a run keeps: "last" (the paper), or "best", the best epoch on 10% of the training
    # set held out for the choice (.train.hold_out): the dev set is reported, so it never chooses.
    keep_epoch: Literal["last", "best"] = "last"
    device: str = "auto"
    # bf16 autocast (a GPU with bfloat16, or a CPU that has it natively): the products in bf16,
    # the loss, the optimiser and the weights in fp32 (training.device).
    precision: Literal["fp32", "bf16"] = "fp32"
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
        return self  # whether this machine runs it: training.device.resolve_device


def finetune_config(overrides: Iterable[str] = ()) -> FinetuneConfig:
    """The recipe with ``finetune.KEY=VALUE`` overrides applied, its ranges checked."""
    cfg = FinetuneConfig()
    apply_overrides({"finetune": cfg}, overrides)
    return cfg.validate()


@dataclass
class SquadConfig:
    """What question answering adds to :class:`FinetuneConfig` (``--set squad.KEY=VALUE``)."""

    doc_stride: int = 128  # tokens between the starts of a passage's windows
    max_query_len: int = 64  # a longer question is cut
    n_best: int = 20  # start and end candidates per window
    max_answer_len: int = 30  # tokens
    # Offline there is no training set: train on the first N articles of the dev file and score
    # on the rest (0: train on --train FILE or the hub's training set).
    train_articles: int = 0

    def validate(self) -> "SquadConfig":
        for f in ("doc_stride", "max_query_len", "n_best", "max_answer_len"):
            if getattr(self, f) <= 0:
                raise ValueError(f"squad.{f} must be positive, got {getattr(self, f)}")
        if self.train_articles < 0:
            raise ValueError(f"squad.train_articles must be >= 0, got {self.train_articles}")
        return self


def preset(name: str) -> RunConfig:
    """The :class:`RunConfig` of a named preset (see ``PRESETS``)."""
    if name not in PRESETS:
        raise KeyError(f"unknown preset {name!r}; valid presets: {sorted(PRESETS)}")
    cfg = RunConfig(preset=name)
    overrides = [f"{k}={v!r}" if isinstance(v, str) else f"{k}={v}"
                 for k, v in PRESETS[name].items()]
    return apply_overrides(cfg, overrides)
