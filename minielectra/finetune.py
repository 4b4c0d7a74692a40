"""Fine-tuning the discriminator on GLUE, the way the ELECTRA paper measured it.

Paper section 3.1 and appendix Table 7; official code: google-research/electra
``configure_finetuning.py``, ``finetune/classification/classification_tasks.py``,
``model/optimization.py``. See ``ELECTRA_REFERENCE.md`` section 3. The recipe:

- **Head**: the final ``[CLS]`` vector -> dropout 0.1 -> one linear layer (Glorot init). No pooler
  and no extra dense layer (transformers' ``ElectraForSequenceClassification`` has one; we don't).
- **Optimiser**: the official Adam (:class:`train.AdamWeightDecay`: no bias correction, eps 1e-6)
  with decoupled weight decay 0 (the paper; the code's default is 0.01), global-norm clipping 1.0;
  lr 3e-4 for Small, warmup over 10% of the steps, then linear decay to 0.
- **Layer-wise lr decay 0.8**: a parameter at depth ``k`` (embeddings 0, layer ``i`` at ``i+1``,
  head on top) gets ``lr * 0.8^(top - k)``. The official code puts the head one step too high, so
  its top layer gets ``lr * 0.8^2`` (google-research/electra#51); ``layerwise_decay_official=True``
  reproduces that.
- **Loss**: cross-entropy (STS-B: squared error on ``label / 5``), *summed* over the batch as
  ``run_finetuning.py`` does (``tf.reduce_sum``); ``loss_reduction="mean"`` averages instead.
- **Data**: batch 32, length 128 (longest-first truncation), 3 epochs (10 for RTE and STS-B);
  STS-B is regression on ``label / 5``; MRPC and STS-B training sets are doubled with the two
  segments swapped. Each epoch is a fresh permutation; ``shuffle_buffer=100`` reproduces the
  official stream instead (shuffled once, repeated, read through a 100-example buffer).
- **Protocol**: the paper reports the median dev score over 10 runs (``seeds``); we keep the
  median *run*, so its score, other metrics and saved model belong together.

Saving, reloading and scoring new text with a fine-tuned model: :mod:`minielectra.predict`. The
GLUE table and average: :func:`minielectra.glue.format_table`.

Axis letters: b batch, n sequence, d width, c classes.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import shutil
import time
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from . import glue
from .config import ModelConfig, TrainConfig, _parse
from .glue import Example, Task
from .train import AdamWeightDecay, lr_at
from .transformer import Encoder

# ------------------------------------------------------------------------------------ config


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
    # 0: a fresh permutation of the training set every epoch. N > 0: the official input pipeline
    # (finetune/preprocessing.py): the set shuffled once, padded with loss-free dummies to a
    # multiple of the batch, repeated, and drawn through an N-example shuffle buffer (the
    # official N is 100), so epochs overlap and an example may be seen twice in a row.
    shuffle_buffer: int = 0
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_eps: float = 1e-6
    bias_correction: bool = False  # the official AdamWeightDecayOptimizer has none
    grad_clip: float = 1.0  # global norm; 0 disables
    # "sum": the official run_finetuning.py minimises tf.reduce_sum of the per-example losses,
    # so its gradients are batch-size (32x) larger than a mean's. Adam hardly notices the scale,
    # but the global-norm clip at 1.0 then bites on almost every step and eps 1e-6 weighs 32x
    # less. "mean" is the PyTorch/transformers habit. Logged losses are per example either way.
    loss_reduction: typing.Literal["sum", "mean"] = "sum"
    # Re-initialise the encoder at random (same shape and tokenizer): the no-pre-training baseline.
    from_scratch: bool = False
    vocab: str | None = None  # a vocab.txt for checkpoints that ship no tokenizer
    device: str = "auto"
    # CPU threads for this run (0: torch's default). Tiny models on a busy machine run faster
    # on 1 thread than on 2 that wait on each other.
    num_threads: int = 0

    def validate(self) -> "FinetuneConfig":
        for name in ("learning_rate", "batch_size", "eval_batch_size", "max_seq_len"):
            if getattr(self, name) <= 0:
                raise ValueError(f"finetune.{name} must be positive, got {getattr(self, name)}")
        if not 0 < self.layerwise_decay <= 1:
            raise ValueError(f"finetune.layerwise_decay must be in (0, 1], got "
                             f"{self.layerwise_decay}")
        if not 0 <= self.warmup_fraction < 1:
            raise ValueError(f"finetune.warmup_fraction must be in [0, 1), got "
                             f"{self.warmup_fraction}")
        if self.shuffle_buffer < 0:
            raise ValueError(f"finetune.shuffle_buffer must be >= 0 (0 = reshuffle each epoch), "
                             f"got {self.shuffle_buffer}")
        if self.epochs < 0:
            raise ValueError(f"finetune.epochs must be >= 0 (0 = the task's), got {self.epochs}")
        if self.schedule not in ("official", "linear"):
            raise ValueError(f"finetune.schedule must be official|linear, got {self.schedule!r}")
        if self.loss_reduction not in ("sum", "mean"):
            raise ValueError(f"finetune.loss_reduction must be sum|mean, got "
                             f"{self.loss_reduction!r}")
        return self


def apply_finetune_overrides(cfg: FinetuneConfig, overrides: Iterable[str]) -> FinetuneConfig:
    """Apply ``finetune.key=value`` strings, type-checked like :func:`config.apply_overrides`."""
    hints = typing.get_type_hints(FinetuneConfig)
    for item in overrides:
        key, eq, raw = item.partition("=")
        section, _, name = key.strip().rpartition(".")
        if not eq or section != "finetune" or name not in hints:
            raise KeyError(f"unknown fine-tuning override {item!r}; valid keys: "
                           f"{sorted('finetune.' + n for n in hints)}")
        setattr(cfg, name, _parse(raw.strip(), hints[name], key.strip()))
    return cfg.validate()


# ------------------------------------------------------------------------------------- model


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


def build_classifier(pretrained, task: Task, cfg: FinetuneConfig) -> SequenceClassifier:
    """A classifier for ``task`` holding a copy of ``pretrained``'s discriminator encoder.

    Seed torch before calling: the head (and, with ``from_scratch``, the encoder) is random.
    """
    mcfg = pretrained.config
    if cfg.encoder_dropout is not None:
        mcfg = dataclasses.replace(mcfg, dropout=cfg.encoder_dropout,
                                   attention_dropout=cfg.encoder_dropout)
    model = SequenceClassifier(mcfg, task.num_labels, dropout=cfg.head_dropout)
    if cfg.from_scratch:  # the official initialisation of a fresh discriminator, same shape
        from .electra import Electra
        source = Electra(pretrained.config).discriminator.encoder
    else:
        source = pretrained.discriminator.encoder
    model.encoder.load_state_dict(source.state_dict())
    return model


def layerwise_param_groups(model: SequenceClassifier, cfg: FinetuneConfig) -> list[dict]:
    """Optimizer groups, one per (depth, decay) pair, each with its own peak ``lr``.

    Depth 0 is the embeddings and their projection, depth ``i + 1`` encoder layer ``i``, and the
    head sits at the top. No weight decay on biases and LayerNorm (1-d tensors), as officially.
    """
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
    schedule (:func:`train.lr_at`, same official quirk) over this run's ``total`` steps."""
    return lr_at(step, TrainConfig(learning_rate=1.0, max_steps=total, warmup_steps=warmup,
                                   schedule=schedule))


# -------------------------------------------------------------------------------------- data


def encode(tokenizer, examples: Sequence[Example], max_len: int) -> list[tuple[list, list]]:
    """``[CLS] A [SEP] B [SEP]`` ids and segment ids, longest-first truncated, unpadded."""
    return [tokenizer.encode_pair(e.text_a, e.text_b, max_len=max_len) for e in examples]


def collate(encoded: Sequence[tuple[list, list]], pad_id: int) -> dict[str, torch.Tensor]:
    """Pad to the longest sequence in the batch (not to 128: same result, less CPU time)."""
    n = max(len(ids) for ids, _ in encoded)
    input_ids = torch.full((len(encoded), n), pad_id, dtype=torch.long)
    token_type_ids = torch.zeros((len(encoded), n), dtype=torch.long)
    for row, (ids, types) in enumerate(encoded):
        input_ids[row, :len(ids)] = torch.tensor(ids)
        token_type_ids[row, :len(types)] = torch.tensor(types)
    attention_mask = torch.zeros_like(input_ids)
    for row, (ids, _) in enumerate(encoded):
        attention_mask[row, :len(ids)] = 1
    return {"input_ids": input_ids, "attention_mask": attention_mask,
            "token_type_ids": token_type_ids}


def task_loss(task: Task, logits: torch.Tensor, labels: torch.Tensor, *,
              reduction: str = "sum") -> torch.Tensor:
    """Per-example losses, summed (official) or averaged over the batch: cross-entropy, or for
    STS-B the squared error against ``label / 5`` (official: the score scaled to [0, 1])."""
    if task.is_regression:
        losses = (logits.squeeze(-1).float() - labels.float() / 5.0) ** 2  # (b,)
    else:
        losses = F.cross_entropy(logits.float(), labels.long(), reduction="none")  # (b,)
    return losses.sum() if reduction == "sum" else losses.mean()


def _to_outputs(task: Task, logits: torch.Tensor) -> np.ndarray:
    """Class ids, or STS-B scores back on the 0-5 scale."""
    if task.is_regression:
        return (logits.squeeze(-1).float() * 5.0).cpu().numpy()
    return logits.argmax(-1).cpu().numpy()


@dataclass
class TaskData:
    """A task's examples, tokenised once and shared by every seed."""

    train: list[tuple[list, list]]
    train_labels: list
    dev: list[tuple[list, list]]
    dev_labels: list
    raw_train_examples: int  # after max_train_examples, before MRPC/STS-B doubling
    available_train_examples: int  # the whole training set


def prepare_data(task: Task, tokenizer, cfg: FinetuneConfig, *, data_dir=None,
                 max_train_examples: int | None = None) -> TaskData:
    """Tokenised train and dev sets; ``max_train_examples`` keeps a fixed random subset."""
    full = glue.load_split(task, "train", data_dir=data_dir)
    dev = glue.load_split(task, "dev", data_dir=data_dir)
    train = glue.subset(full, max_train_examples)
    raw = len(train)
    if task.swap_augment and cfg.double_unordered:
        train = glue.swap_segments(train)
    return TaskData(encode(tokenizer, train, cfg.max_seq_len), [e.label for e in train],
                    encode(tokenizer, dev, cfg.max_seq_len), [e.label for e in dev], raw,
                    len(full))


# ------------------------------------------------------------------------- train and evaluate


def _device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def batch_order(n: int, batch_size: int, epochs: int, gen: torch.Generator, *,
                shuffle_buffer: int = 0) -> list[torch.Tensor]:
    """The training examples of every step: ``ceil(n / batch_size) * epochs`` index tensors.

    ``shuffle_buffer=0``: each epoch a fresh permutation split into batches, the last one smaller.
    ``shuffle_buffer=N``: the official stream. The set is shuffled once and padded with dummy
    slots to a multiple of the batch (their loss is zero there, so we simply drop them: a batch
    may come out smaller, or, for a set much smaller than a batch, empty), repeated without end
    and read through a ``tf.data`` shuffle buffer: hold ``N`` elements, emit a uniformly chosen
    one, put the next input element in its place.
    """
    steps = math.ceil(n / batch_size)
    if shuffle_buffer == 0:
        return [idx for _ in range(epochs)
                for idx in torch.randperm(n, generator=gen).split(batch_size)]
    once = torch.randperm(n, generator=gen).tolist() + [-1] * (steps * batch_size - n)
    stream = itertools.cycle(once)
    buffer = list(itertools.islice(stream, shuffle_buffer))
    picks = torch.randint(shuffle_buffer, (steps * epochs * batch_size,), generator=gen).tolist()
    out = []
    for j in picks:
        out.append(buffer[j])
        buffer[j] = next(stream)
    batches = torch.tensor(out).view(-1, batch_size)
    return [b[b >= 0] for b in batches]


def train_classifier(model: SequenceClassifier, task: Task, data: TaskData, cfg: FinetuneConfig,
                     *, seed: int, pad_id: int, progress: bool = True) -> dict[str, Any]:
    """The recipe's optimisation loop; data order from a generator seeded with ``seed``."""
    device = next(model.parameters()).device
    gen = torch.Generator().manual_seed(seed)
    epochs = cfg.epochs or task.epochs
    # The official preprocessing pads the training set to a multiple of the batch with dummy
    # examples whose loss is zeroed, so it also takes ceil(n / bs) steps an epoch; with the summed
    # loss our smaller last batch is exactly such a padded batch (a mean would up-weight it).
    order = batch_order(len(data.train), cfg.batch_size, epochs, gen,
                        shuffle_buffer=cfg.shuffle_buffer)
    total = len(order)
    warmup = int(cfg.warmup_fraction * total)
    opt = AdamWeightDecay(layerwise_param_groups(model, cfg), lr=cfg.learning_rate,
                          betas=(cfg.adam_beta1, cfg.adam_beta2), eps=cfg.adam_eps,
                          bias_correction=cfg.bias_correction)
    peaks = [g["lr"] for g in opt.param_groups]
    labels = torch.tensor(data.train_labels,
                          dtype=torch.float32 if task.is_regression else torch.long)
    model.train()
    losses = []
    with tqdm(total=total, desc=f"{task.name} seed {seed}", disable=not progress) as bar:
        for step, idx in enumerate(order):
            bar.update()
            if len(idx) == 0:  # all dummies (official stream, a set smaller than a batch)
                continue
            batch = {k: v.to(device) for k, v in
                     collate([data.train[i] for i in idx], pad_id).items()}
            for group, peak in zip(opt.param_groups, peaks):
                group["lr"] = peak * lr_factor(step, total, warmup, cfg.schedule)
            loss = task_loss(task, model(**batch), labels[idx].to(device),
                             reduction=cfg.loss_reduction)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.grad_clip > 0:
                nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            opt.step()
            losses.append(loss.item() / (len(idx) if cfg.loss_reduction == "sum" else 1))
            bar.set_postfix(loss=f"{np.mean(losses[-20:]):.4f}", refresh=False)
    return {"epochs": epochs, "steps": total, "warmup_steps": warmup,
            "final_train_loss": float(np.mean(losses[-20:]))}


@torch.no_grad()
def predict_batches(model: SequenceClassifier, task: Task, encoded: Sequence[tuple[list, list]],
                    *, pad_id: int, batch_size: int = 128) -> tuple[np.ndarray, np.ndarray]:
    """``(outputs, logits)`` in input order: class ids (or 0-5 scores) and raw logits ``(N, c)``.

    Batches are built from length-sorted inputs, so little time goes into padding.
    """
    model.eval()
    device = next(model.parameters()).device
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i][0]))
    logits = torch.empty(len(encoded), model.head.out_features)
    for start in range(0, len(order), batch_size):
        idx = order[start:start + batch_size]
        batch = {k: v.to(device) for k, v in collate([encoded[i] for i in idx], pad_id).items()}
        logits[idx] = model(**batch).float().cpu()
    return _to_outputs(task, logits), logits.numpy()


def evaluate(model: SequenceClassifier, task: Task, data: TaskData, cfg: FinetuneConfig, *,
             pad_id: int) -> dict[str, float]:
    """Every metric of ``task`` on its dev set, in percent."""
    outputs, _ = predict_batches(model, task, data.dev, pad_id=pad_id,
                                 batch_size=cfg.eval_batch_size)
    return glue.compute_metrics(task, outputs, np.asarray(data.dev_labels))


# ------------------------------------------------------------------------ the library entry points


def resolve_pretrained(checkpoint: str | Path) -> Path:
    """The checkpoint directory behind ``checkpoint``: ``"bundled"``, a ``minielectra pretrain
    --out`` run directory (its latest checkpoint: the final one once the run is done), a
    minielectra checkpoint directory, or a transformers ELECTRA directory."""
    from . import hf
    from .checkpoint import resolve_bundled
    from .evaluate import resolve_checkpoint

    path = resolve_bundled(checkpoint)
    # resolve_checkpoint recognises a checkpoint by its model.* file; a transformers directory
    # may hold only pytorch_model.bin, so it is recognised by its config first.
    return path if hf.is_hf_dir(path) else resolve_checkpoint(path)


def open_checkpoint(checkpoint) -> tuple[nn.Module, str | None]:
    """The pre-trained :class:`Electra` and the directory it came from (None: a model given in
    memory). Resolved and loaded once, however many tasks and seeds then use it."""
    if isinstance(checkpoint, nn.Module):
        return checkpoint, None
    from .checkpoint import load_pretrained

    path = resolve_pretrained(checkpoint)
    return load_pretrained(path), str(path)


def get_tokenizer(pretrained, cfg: FinetuneConfig):
    """``finetune.vocab`` if set, else the tokenizer that came with the checkpoint."""
    if cfg.vocab:
        from .tokenizer import WordPieceTokenizer
        tokenizer = WordPieceTokenizer.from_vocab_file(cfg.vocab)
    elif getattr(pretrained, "tokenizer", None) is not None:
        tokenizer = pretrained.tokenizer
    else:
        raise ValueError("the checkpoint has no tokenizer; pass one with "
                         "--set finetune.vocab=PATH/vocab.txt")
    if tokenizer.vocab_size > pretrained.config.vocab_size:
        raise ValueError(f"tokenizer has {tokenizer.vocab_size} tokens but the model only "
                         f"{pretrained.config.vocab_size} embeddings")
    return tokenizer


def _run_one(pretrained, tokenizer, task: Task, data: TaskData, cfg: FinetuneConfig, *,
             seed: int, out: Path | None, progress: bool) -> dict[str, Any]:
    torch.manual_seed(seed)  # head init, dropout masks (and the encoder with from_scratch)
    model = build_classifier(pretrained, task, cfg).to(_device(cfg.device))
    t0 = time.perf_counter()
    info = train_classifier(model, task, data, cfg, seed=seed, pad_id=tokenizer.pad_id,
                            progress=progress)
    t1 = time.perf_counter()
    metrics = evaluate(model, task, data, cfg, pad_id=tokenizer.pad_id)
    run = {"seed": seed, "score": metrics[task.metric], "metrics": metrics, **info,
           "train_seconds": round(t1 - t0, 2),
           "eval_seconds": round(time.perf_counter() - t1, 2)}
    if out is not None:
        from .predict import save_finetuned  # predict.py builds on this module
        save_finetuned(model, tokenizer, task, cfg, out, result=run)
    return run


def median_run(runs: Sequence[dict]) -> int:
    """Index of the run with the median score; with an even number of runs, the lower of the
    two middle ones. A real run, so that the score, its other metrics (MRPC's F1, STS-B's
    Pearson) and the saved model all belong together; ties go to the earlier seed."""
    order = sorted(range(len(runs)), key=lambda i: (runs[i]["score"], i))
    return order[(len(runs) - 1) // 2]


def _summarise(task: Task, runs: list[dict], data: TaskData, cfg: FinetuneConfig,
               source: str | None) -> dict[str, Any]:
    """The JSON of a ``finetune`` call: the median run is the result (the paper's protocol)."""
    best = runs[median_run(runs)]
    scores = [r["score"] for r in runs]
    return {
        "task": task.name, "metric": glue.METRIC_NAMES[task.metric], "metric_key": task.metric,
        "score": best["score"], "metrics": best["metrics"], "median_seed": best["seed"],
        "scores": scores, "median": float(np.median(scores)), "std": float(np.std(scores)),
        "seeds": [r["seed"] for r in runs], "checkpoint": source,
        "train_examples": data.raw_train_examples,
        "train_examples_available": data.available_train_examples,
        "train_subset": data.raw_train_examples < data.available_train_examples,
        "train_examples_used": len(data.train), "dev_examples": len(data.dev),
        "config": dataclasses.asdict(cfg), "runs": runs,
    }


def _keep_median_model(out: Path, runs: list[dict], median_seed: int, keep_all: bool) -> None:
    """Copy the median run's model from ``out/seed-N/`` to ``out/`` (what ``predict --model out``
    loads); the other runs' folders are deleted unless ``keep_all``, as the official code does."""
    for f in (out / f"seed-{median_seed}").iterdir():
        shutil.copy2(f, out / f.name)
    if not keep_all:
        for r in runs:
            shutil.rmtree(out / f"seed-{r['seed']}")


def _finetune(pretrained, source: str | None, task: Task, cfg: FinetuneConfig, *, out, seed,
              seeds, data_dir, max_train_examples, progress, save_model,
              keep_all_models) -> dict[str, Any]:
    if cfg.max_seq_len > pretrained.config.max_position_embeddings:
        raise ValueError(f"finetune.max_seq_len {cfg.max_seq_len} exceeds the model's "
                         f"max_position_embeddings {pretrained.config.max_position_embeddings}")
    tokenizer = get_tokenizer(pretrained, cfg)
    data = prepare_data(task, tokenizer, cfg, data_dir=data_dir,
                        max_train_examples=max_train_examples)
    save = out is not None and save_model
    threads = torch.get_num_threads()
    if cfg.num_threads > 0:
        torch.set_num_threads(cfg.num_threads)
    try:
        runs = [_run_one(pretrained, tokenizer, task, data, cfg, seed=s, progress=progress,
                         out=None if not save else (out if seeds == 1 else out / f"seed-{s}"))
                for s in range(seed, seed + seeds)]
    finally:
        torch.set_num_threads(threads)
    result = _summarise(task, runs, data, cfg, source)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        if save and seeds > 1:
            _keep_median_model(out, runs, result["median_seed"], keep_all_models)
        (out / "result.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


def finetune(checkpoint, task: str, *, out: str | Path | None = None, seed: int = 0,
             seeds: int = 1, overrides: Sequence[str] = (), data_dir: str | Path | None = None,
             max_train_examples: int | None = None, progress: bool = True,
             save_model: bool = True, keep_all_models: bool = False) -> dict[str, Any]:
    """Fine-tune ``checkpoint`` on one GLUE task ``seeds`` times (seeds ``seed``, ``seed + 1``,
    ...) and score each run on the dev set; the median run is the result (the paper's protocol).

    ``checkpoint``: an :class:`Electra` in memory or anything :func:`resolve_pretrained` takes.
    With ``out``: ``result.json`` and the median run's fine-tuned model (``keep_all_models``
    also keeps every run's, in ``seed-N/``).
    """
    task = glue.get_task(task)
    cfg = apply_finetune_overrides(FinetuneConfig(), overrides)
    if seeds < 1:
        raise ValueError(f"seeds must be >= 1, got {seeds}")
    pretrained, source = open_checkpoint(checkpoint)
    return _finetune(pretrained, source, task, cfg, out=None if out is None else Path(out),
                     seed=seed, seeds=seeds, data_dir=data_dir,
                     max_train_examples=max_train_examples, progress=progress,
                     save_model=save_model, keep_all_models=keep_all_models)


def _save_glue(out: Path, summary: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "glue.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "glue.md").write_text(summary["table"])


def run_glue(checkpoint, tasks: Sequence[str] | None = None, *, seeds: int = 1, seed: int = 0,
             out: str | Path | None = None, overrides: Sequence[str] = (),
             data_dir: str | Path | None = None, max_train_examples: int | None = None,
             progress: bool = True, save_models: bool = False, skip_missing: bool = True,
             name: str | None = None) -> dict[str, Any]:
    """Fine-tune on several tasks (default: the 8 of the GLUE score) and tabulate them.

    A task whose data is absent is skipped and listed (``skip_missing``), so an offline data dir
    without MNLI/QQP still yields the other columns; the GLUE average is then marked partial.
    With ``out``: ``glue.json``, ``glue.md`` and one folder per task, holding its
    ``result.json`` and, with ``save_models``, the median run's model (``predict --model``).
    """
    if save_models and out is None:
        raise ValueError("save_models needs out: the folder the fine-tuned models go to")
    names = [glue.get_task(t).name for t in (tasks or glue.GLUE_TASKS)]
    cfg = apply_finetune_overrides(FinetuneConfig(), overrides)
    pretrained, source = open_checkpoint(checkpoint)  # once for all tasks
    results, missing = {}, {}
    for t in names:
        try:
            results[t] = _finetune(
                pretrained, source, glue.get_task(t), cfg, seed=seed, seeds=seeds,
                data_dir=data_dir, max_train_examples=max_train_examples, progress=progress,
                save_model=save_models, keep_all_models=False,
                out=None if out is None else Path(out) / t)
        except glue.GlueDataError as e:
            if not skip_missing:
                raise
            missing[t] = str(e)
    # The row is named as the user named the checkpoint: the run, not its step_N directory.
    label = name or (Path(str(checkpoint)).name if source else "model")
    table, average, partial = glue.format_table(results, name=label, missing=missing)
    summary = {"checkpoint": source, "tasks_requested": names,
               "glue_score": None if partial else average, "glue_average": average,
               "glue_partial": partial,
               "glue_average_over": [t for t in glue.GLUE_TASKS if t in results],
               "scores": {t: r["score"] for t, r in results.items()}, "missing": missing,
               "not_run": [t for t in glue.GLUE_TASKS if t not in names],
               "table": table, "tasks": results}
    if out is not None:
        _save_glue(Path(out), summary)
    return summary
