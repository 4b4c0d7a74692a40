"""Fine-tuning the discriminator on one task, the way the ELECTRA paper measured GLUE.

Paper section 3.1 and appendix Table 7. The model, optimiser and loss are :mod:`.classifier`;
this is the loop around them: batch 32, length 128, 3 epochs (10 for RTE and STS-B), MRPC and
STS-B doubled with the segments swapped. The paper reports the median dev score of 10 runs
(``seeds``); we keep the median *run*, so its score, metrics and saved model belong together.
Entry points: :mod:`.run`, :mod:`.glue.suite`. Axis letters: b batch, n sequence, c classes.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from ..data.tokenizer import WordPieceTokenizer
from ..safeio import write_file
from ..training.compiling import compile_module, decide_finetune
from . import fewsample, metrics
from ..training.device import autocast, resolve_device
from .classifier import (FinetuneConfig, SequenceClassifier, build_classifier, collate,
                         lr_factor, make_optimizer, optimizer_step, task_loss)
from .epochs import EpochScores
from .saved import save_finetuned
from ..progress import progress_bar
from .task import Task, subset, swap_segments
from .windows import (Encoded, encode_texts, predict_texts, warn_long,
                      warn_untrained_positions)


@dataclass
class TaskData:
    """A task's examples, tokenised once and shared by every seed."""

    train: list[tuple[list, list]]
    train_labels: list
    dev: list[tuple[list, list]]
    dev_labels: list
    raw_train_examples: int  # after max_train_examples, before MRPC/STS-B doubling
    available_train_examples: int  # the whole training set
    dev_owner: list[int] | None = None  # with long_text="windows": each dev row's text
    long_texts: dict[str, int] = dataclasses.field(default_factory=dict)  # texts too long
    # keep_epoch="best": training examples held out to choose the epoch (never trained on)
    choice: list[tuple[list, list]] | None = None
    choice_labels: list | None = None
    choice_owner: list[int] | None = None


# keep_epoch="best" chooses the epoch on this share of the training set, held out from training
# (the dev set is reported, so it must not choose); at least CHOICE_MIN examples are needed.
CHOICE_FRACTION, CHOICE_MIN = 0.1, 20


def hold_out(train: list, fraction: float = CHOICE_FRACTION) -> tuple[list, list]:
    """(training, held out): a fixed random ``fraction`` of ``train`` (seed 0, every run the
    same), both kept in file order."""
    if len(train) < CHOICE_MIN:
        raise ValueError(f"finetune.keep_epoch=best holds out {fraction:.0%} of the training "
                         f"set to choose the epoch: needs at least {CHOICE_MIN} training "
                         f"examples, got {len(train)} (use keep_epoch=last)")
    held = set(np.random.default_rng(0).choice(len(train), max(1, round(fraction * len(train))),
                                               replace=False).tolist())
    return ([e for i, e in enumerate(train) if i not in held],
            [e for i, e in enumerate(train) if i in held])


def prepare_data(task: Task, tokenizer, cfg: FinetuneConfig, *, data_dir=None,
                 max_train_examples: int | None = None) -> TaskData:
    """Tokenised train and dev sets; ``max_train_examples`` keeps a fixed random subset."""
    full, dev = (task.examples(split, data_dir=data_dir) for split in ("train", "dev"))
    train = subset(full, max_train_examples)
    raw = len(train)
    train, choice = hold_out(train) if cfg.keep_epoch == "best" else (train, None)
    if task.swap_augment and cfg.double_unordered:
        train = swap_segments(train)
    mode = cfg.long_text
    tr, dv = (encode_texts(tokenizer, split, cfg.max_seq_len, long_text=mode)
              for split in (train, dev))
    for enc, what in ((tr, "training"), (dv, "dev")):
        warn_long(enc, f"{task.name}, {what} set", mode, pairs=task.is_pair)
    labels = [e.label for e in train]
    data = TaskData(tr.rows, labels if tr.owner is None else [labels[t] for t in tr.owner],
                    dv.rows, [e.label for e in dev], raw, len(full), dv.owner,
                    {"train": tr.long, "dev": dv.long})
    if choice is not None:
        ch = encode_texts(tokenizer, choice, cfg.max_seq_len, long_text=mode)
        data.choice, data.choice_labels, data.choice_owner = (ch.rows, [e.label for e in choice],
                                                              ch.owner)
    return data


def batch_order(n: int, batch_size: int, epochs: int, gen: torch.Generator, *,
                shuffle_buffer: int = 0) -> list[torch.Tensor]:
    """The training examples of every step: ``ceil(n / batch_size) * epochs`` index tensors.
    ``shuffle_buffer=0``: each epoch a fresh permutation split into batches, the last smaller.
    ``N``: the official stream, shuffled once, padded with dummy slots to a multiple of the batch
    (their loss is zero there, so we drop them: a batch may come out smaller, even empty),
    repeated, and read through a ``tf.data`` shuffle buffer of ``N`` (emit a uniformly chosen
    element, put the next input element in its place)."""
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
                     *, seed: int, pad_id: int, progress: bool = True,
                     on_epoch=None) -> dict[str, Any]:
    """The recipe's optimisation loop; data order from a generator seeded with ``seed``.
    ``on_epoch(epoch)`` (1-based) runs after each epoch's last step (:mod:`.epochs`)."""
    device = next(model.parameters()).device
    gen = torch.Generator().manual_seed(seed)
    epochs = cfg.epochs or task.epochs
    # The official preprocessing pads the training set to a multiple of the batch with dummy
    # examples whose loss is zeroed, so it also takes ceil(n / bs) steps an epoch; with the summed
    # loss our smaller last batch is exactly such a padded batch (a mean would up-weight it).
    order = batch_order(len(data.train), cfg.batch_size, epochs, gen,
                        shuffle_buffer=cfg.shuffle_buffer)
    total = len(order)
    per_epoch = total // epochs  # both orders take ceil(n / batch_size) steps an epoch
    warmup = int(cfg.warmup_fraction * total)
    opt = make_optimizer(model, cfg)
    peaks = [g["lr"] for g in opt.param_groups]
    labels = torch.tensor(data.train_labels,
                          dtype=torch.float32 if task.is_regression else torch.long)
    model.train()
    net = compile_module(model, device, dynamic=True) if cfg.compile else model  # lengths vary
    losses = []
    with progress_bar(total=total, desc=f"{task.name} seed {seed}", disable=not progress) as bar:
        for step, idx in enumerate(order):
            bar.update()
            if len(idx) == 0:  # all dummies (official stream, a set smaller than a batch)
                continue
            batch = {k: v.to(device) for k, v in
                     collate([data.train[i] for i in idx], pad_id).items()}
            for group, peak in zip(opt.param_groups, peaks):
                group["lr"] = peak * lr_factor(step, total, warmup, cfg.schedule)
            with autocast(device, cfg.precision):
                logits = net(**batch)
            loss = task_loss(task, logits, labels[idx].to(device), reduction=cfg.loss_reduction)
            losses.append(optimizer_step(model, opt, loss, cfg, len(idx)))
            bar.set_postfix(loss=f"{np.mean(losses[-20:]):.4f}", refresh=False)
            if on_epoch is not None and (step + 1) % per_epoch == 0:
                on_epoch((step + 1) // per_epoch)
    return {"epochs": epochs, "steps": total, "warmup_steps": warmup,
            "final_train_loss": float(np.mean(losses[-20:]))}


def evaluate(model: SequenceClassifier, task: Task, data: TaskData, cfg: FinetuneConfig, *,
             pad_id: int, split: str = "dev") -> dict[str, float]:
    """Every metric of ``task`` on its dev set (or ``split="choice"``: the training examples
    held out to choose the epoch), in percent."""
    rows, owner, labels = ((data.dev, data.dev_owner, data.dev_labels) if split == "dev" else
                           (data.choice, data.choice_owner, data.choice_labels))
    encoded = Encoded(rows, owner, len(labels), 0, cfg.max_seq_len)
    outputs, _ = predict_texts(model, task, encoded, pad_id=pad_id,
                               batch_size=cfg.eval_batch_size, precision=cfg.precision)
    return metrics.compute_metrics(task, outputs, np.asarray(labels))


def get_tokenizer(pretrained, cfg: FinetuneConfig):
    """``finetune.vocab`` if set, else the tokenizer that came with the checkpoint."""
    tokenizer = (WordPieceTokenizer.from_vocab_file(cfg.vocab) if cfg.vocab
                 else getattr(pretrained, "tokenizer", None))
    if tokenizer is None:
        raise ValueError("the checkpoint has no tokenizer; pass one with "
                         "--set finetune.vocab=PATH/vocab.txt")
    if tokenizer.vocab_size > pretrained.config.vocab_size:
        raise ValueError(f"tokenizer has {tokenizer.vocab_size} tokens but the model only "
                         f"{pretrained.config.vocab_size} embeddings")
    return tokenizer


def _run_one(pretrained, tokenizer, task: Task, data: TaskData, cfg: FinetuneConfig, *,
             device: torch.device, seed: int, out: Path | None, progress: bool) -> dict[str, Any]:
    torch.manual_seed(seed)  # head init, dropout masks (and the encoder with from_scratch)
    model = build_classifier(pretrained, task, cfg).to(device)
    fewsample.prepare(model, cfg, initializer_range=pretrained.config.initializer_range)
    pad = tokenizer.pad_id
    choose = None if data.choice is None else (
        lambda: evaluate(model, task, data, cfg, pad_id=pad, split="choice"))
    epochs = EpochScores(model, lambda: evaluate(model, task, data, cfg, pad_id=pad),
                         task.metric, keep=cfg.keep_epoch, choose=choose)  # after every epoch
    t0 = time.perf_counter()
    info = train_classifier(model, task, data, cfg, seed=seed, pad_id=tokenizer.pad_id,
                            progress=progress, on_epoch=epochs)
    metrics, kept = epochs.finish()
    seconds = time.perf_counter() - t0
    run = {"seed": seed, "score": metrics[task.metric], "metrics": metrics, **info, **kept,
           "train_seconds": round(seconds - epochs.seconds, 2),
           "eval_seconds": round(epochs.seconds, 2)}
    if out is not None:
        save_finetuned(model, tokenizer, task, cfg, out, result=run)
    return run


def median_run(runs: Sequence[dict]) -> int:
    """Index of the run with the median score (with an even number, the lower of the middle two;
    ties go to the earlier seed): a real run, whose metrics and saved model belong together."""
    order = sorted(range(len(runs)), key=lambda i: (runs[i]["score"], i))
    return order[(len(runs) - 1) // 2]


def _summarise(task: Task, runs: list[dict], data: TaskData, cfg: FinetuneConfig,
               source: str | None) -> dict[str, Any]:
    """The JSON of a ``finetune`` call: the median run is the result (the paper's protocol)."""
    best = runs[median_run(runs)]
    scores = [r["score"] for r in runs]
    return {
        "task": task.name, "metric": metrics.METRIC_NAMES[task.metric], "metric_key": task.metric,
        "score": best["score"], "metrics": best["metrics"], "median_seed": best["seed"],
        "scores": scores, "median": float(np.median(scores)), "std": float(np.std(scores)),
        "seeds": [r["seed"] for r in runs], "checkpoint": source,
        "train_examples": data.raw_train_examples,
        "train_examples_available": data.available_train_examples,
        "train_subset": data.raw_train_examples < data.available_train_examples,
        "train_examples_used": len(data.train), "dev_examples": len(data.dev_labels),
        "kept_epoch": best.get("kept_epoch"), "best_epoch": best.get("best_epoch"),
        "epoch_scores": best.get("epoch_scores"), "choice_scores": best.get("choice_scores"),
        "choice_examples": None if data.choice is None else len(data.choice_labels),
        "texts_over_max_seq_len": data.long_texts,
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


def finetune_loaded(pretrained, source: str | None, task: Task, cfg: FinetuneConfig, *, out, seed,
              seeds, data_dir, max_train_examples, progress, save_model,
              keep_all_models, on_start=None) -> dict[str, Any]:
    if cfg.max_seq_len > pretrained.config.max_position_embeddings:
        raise ValueError(f"finetune.max_seq_len {cfg.max_seq_len} exceeds the model's "
                         f"max_position_embeddings {pretrained.config.max_position_embeddings}")
    device = resolve_device(cfg)  # once: every run and the compile rule use it
    tokenizer = get_tokenizer(pretrained, cfg)
    data = prepare_data(task, tokenizer, cfg, data_dir=data_dir,
                        max_train_examples=max_train_examples)
    if on_start is not None:  # said once the data is read: a refusal stays one line
        on_start()
    warn_untrained_positions(source, data.train, f"{task.name}, training set")
    cfg = choose_compile(cfg, task, data, pretrained.config, device, progress=progress)
    save = out is not None and save_model
    threads = torch.get_num_threads()
    if cfg.num_threads > 0:
        torch.set_num_threads(cfg.num_threads)
    try:
        runs = [_run_one(pretrained, tokenizer, task, data, cfg, device=device, seed=s,
                         progress=progress,
                         out=None if not save else (out if seeds == 1 else out / f"seed-{s}"))
                for s in range(seed, seed + seeds)]
    finally:
        torch.set_num_threads(threads)
    result = _summarise(task, runs, data, cfg, source)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        if save and seeds > 1:
            _keep_median_model(out, runs, result["median_seed"], keep_all_models)
        write_file(out / "result.json", json.dumps(result, indent=2) + "\n")
    return result


def choose_compile(cfg: FinetuneConfig, task: Task, data: TaskData, model_cfg,
                   device: torch.device, *, progress: bool) -> FinetuneConfig:
    """``finetune.compile=None``: on a CPU, the measured rule of
    :mod:`minielectra.training.compiling` decides, said in one line; off on a GPU (not measured)."""
    if cfg.compile is not None:
        return cfg
    if device.type != "cpu" or not data.train:
        return dataclasses.replace(cfg, compile=False)
    steps = math.ceil(len(data.train) / cfg.batch_size) * (cfg.epochs or task.epochs)
    length = float(np.mean([len(ids) for ids, _ in data.train]))
    choice = decide_finetune(model_cfg, steps=steps, batch=cfg.batch_size, length=length)
    if progress:
        print(choice.line, file=sys.stderr)
    return dataclasses.replace(cfg, compile=choice.compile)


def check_counts(seeds: int, max_train_examples: int | None) -> None:
    if seeds < 1:
        raise ValueError(f"--seeds must be >= 1, got {seeds}")
    if max_train_examples is not None and max_train_examples < 1:
        raise ValueError(f"--max-train-examples must be >= 1 (leave it out for the whole "
                         f"training set), got {max_train_examples}")
