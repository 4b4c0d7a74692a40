"""Fine-tuning the discriminator on SQuAD 1.1 or 2.0, and scoring it on the dev set.

ELECTRA paper section 3.1 and appendix Table 7; official code: google-research/electra
``configure_finetuning.py`` and ``finetune/qa/``. The recipe for Small is the GLUE one
(:mod:`..classifier`) with 2 epochs and windows of 384 tokens, stride 128 (BERT's numbers; the
official ELECTRA code uses 512). A model with fewer positions (the bundled one has 128) gets
windows as long as it can read.

Axis letters: b batch, n sequence.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from ...overrides import apply_overrides, override_keys
from ...safeio import write_file
from . import data as squad_data, eval as squad_eval
from ...training.device import autocast, device_named, resolve_device
from ...training.opening import open_checkpoint
from ...config import FinetuneConfig, SquadConfig
from ..classifier import lr_factor, make_optimizer, optimizer_step
from ..classifier import collate as collate_rows
from ..train import batch_order, get_tokenizer
from .data import SquadSet
from .features import Window, make_all_windows
from .model import FinetunedQA, SpanQA, build_span_qa, save_qa, span_loss
from .post import predict_answers

log = logging.getLogger(__name__)
TASKS = ("squad", "squad_v2")
RECIPE = {"max_seq_len": 384, "epochs": 2}  # what SQuAD changes in the GLUE recipe


def collate(windows: Sequence[Window], pad_id: int) -> dict[str, torch.Tensor]:
    """Pad a batch of windows to the longest; labels as ``starts``/``ends``."""
    return {**collate_rows([(w.input_ids, w.token_type_ids) for w in windows], pad_id),
            "starts": torch.tensor([w.start for w in windows]),
            "ends": torch.tensor([w.end for w in windows])}


def train_span_qa(model: SpanQA, windows: list[Window], cfg: FinetuneConfig, *, seed: int,
                  pad_id: int, progress: bool = False) -> dict[str, Any]:
    """The recipe's loop: a fresh permutation each epoch, warmup then linear decay."""
    device = next(model.parameters()).device
    gen = torch.Generator().manual_seed(seed)
    epochs = cfg.epochs or RECIPE["epochs"]
    order = batch_order(len(windows), cfg.batch_size, epochs, gen)
    total, warmup = len(order), int(cfg.warmup_fraction * len(order))
    opt = make_optimizer(model, cfg)
    peaks = [g["lr"] for g in opt.param_groups]
    model.train()
    losses = []
    for step, idx in enumerate(order):
        batch = {k: v.to(device) for k, v in collate([windows[i] for i in idx], pad_id).items()}
        for group, peak in zip(opt.param_groups, peaks):
            group["lr"] = peak * lr_factor(step, total, warmup, cfg.schedule)
        with autocast(device, cfg.precision):
            start, end = model(batch["input_ids"], batch["attention_mask"],
                               batch["token_type_ids"])
        loss = span_loss(start, end, batch["starts"], batch["ends"], reduction=cfg.loss_reduction)
        losses.append(optimizer_step(model, opt, loss, cfg, len(idx)))
        if progress and (step % 50 == 0 or step == total - 1):
            log.info("step %d/%d loss %.4f", step + 1, total, np.mean(losses[-50:]))
    return {"epochs": epochs, "steps": total, "warmup_steps": warmup,
            "final_train_loss": float(np.mean(losses[-20:]))}


@torch.no_grad()
def window_logits(model: SpanQA, windows: Sequence[Window], *, pad_id: int,
                  batch_size: int = 128, precision: str = "fp32"
                  ) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(start (n,), end (n,))`` logits of every window, unpadded, in input order, computed in
    ``precision`` and read back in fp32."""
    model.eval()
    device = next(model.parameters()).device
    order = sorted(range(len(windows)), key=lambda i: len(windows[i].input_ids))
    out: list = [None] * len(windows)
    for first in range(0, len(order), batch_size):
        idx = order[first:first + batch_size]
        b = collate([windows[i] for i in idx], pad_id)
        with autocast(device, precision):
            start, end = model(b["input_ids"].to(device), b["attention_mask"].to(device),
                               b["token_type_ids"].to(device))
        start, end = start.float(), end.float()
        for row, i in enumerate(idx):
            n = len(windows[i].input_ids)
            out[i] = (start[row, :n].cpu().numpy(), end[row, :n].cpu().numpy())
    return out


def score_dev(model: SpanQA, tokenizer, dev: SquadSet, cfg: FinetuneConfig, squad: SquadConfig,
              *, max_len: int) -> tuple[dict, dict, dict, float]:
    """``(metrics, predictions, na_probs, threshold)`` on ``dev``; for 2.0 the threshold is the
    one with the best F1 on this set (the official script's ``best_f1_thresh``)."""
    windows = make_all_windows(tokenizer, dev.examples, max_len=max_len, stride=squad.doc_stride,
                               max_query_len=squad.max_query_len)
    logits = window_logits(model, windows, pad_id=tokenizer.pad_id,
                           batch_size=cfg.eval_batch_size, precision=cfg.precision)
    raw, na_probs = predict_answers(dev.examples, windows, logits, n_best=squad.n_best,
                                    max_answer_len=squad.max_answer_len, v2=dev.is_v2)
    if not dev.is_v2:
        return squad_eval.evaluate(dev.dataset, raw), raw, {}, 1.0
    thresh = squad_eval.evaluate(dev.dataset, raw, na_probs=na_probs)["best_f1_thresh"]
    metrics = squad_eval.evaluate(dev.dataset, raw, na_probs=na_probs, na_prob_thresh=thresh)
    answers = {q: "" if na_probs[q] > thresh else a for q, a in raw.items()}
    return metrics, answers, na_probs, thresh


def load_sets(task: str, squad: SquadConfig, *, train=None, dev=None, data_dir=None
              ) -> tuple[SquadSet, SquadSet]:
    """Training and scoring sets: ``--train``/``--dev`` files, the data directory and the hub;
    with ``squad.train_articles=N`` one file split by article (the offline runs)."""
    dev_set = squad_data.load_split(task, "dev", path=dev, data_dir=data_dir)
    if squad.train_articles:
        if train is not None:
            raise ValueError("give --train FILE or squad.train_articles, not both")
        sets = squad_data.split_articles(dev_set, squad.train_articles)
    else:
        sets = squad_data.load_split(task, "train", path=train, data_dir=data_dir), dev_set
    for s in sets:  # a 2.0 file read as 1.1 drops its unanswerable questions without a word
        if s.is_v2 != (task == "squad_v2"):
            raise ValueError(f"{s.source} is SQuAD {'2.0' if s.is_v2 else '1.1'}, but --task "
                             f"{task} is SQuAD {'2.0' if task == 'squad_v2' else '1.1'}: use "
                             f"--task {'squad_v2' if s.is_v2 else 'squad'}")
    return sets


def _configs(overrides: Sequence[str], max_positions: int
             ) -> tuple[FinetuneConfig, SquadConfig, str | None]:
    """The GLUE recipe, SQuAD's length and epochs unless ``--set`` says otherwise, and a warning
    to give once the data is read (windows cut to the model's positions), or None."""
    cfg, squad, given = FinetuneConfig(), SquadConfig(), override_keys(overrides)
    defaults = [f"finetune.{k}={v}" for k, v in RECIPE.items() if f"finetune.{k}" not in given]
    apply_overrides({"finetune": cfg, "squad": squad}, defaults + list(overrides))
    cfg.validate()
    squad.validate()
    resolve_device(cfg)  # a device or precision this machine lacks
    if cfg.shuffle_buffer:  # the official stream is only reproduced for GLUE's loop
        raise ValueError("finetune.shuffle_buffer is for GLUE tasks; SQuAD reshuffles each epoch")
    if cfg.max_seq_len > max_positions:
        if "finetune.max_seq_len" in given:
            raise ValueError(f"finetune.max_seq_len {cfg.max_seq_len} exceeds the model's "
                             f"max_position_embeddings {max_positions}")
        note = (f"windows of {max_positions} tokens: the model reads no more (the recipe's "
                f"{cfg.max_seq_len})")
        cfg.max_seq_len = max_positions
        return cfg, squad, note
    return cfg, squad, None


def finetune_squad(checkpoint, task: str = "squad", *, out=None, seed: int = 0,
                   overrides: Sequence[str] = (), train=None, dev=None, data_dir=None,
                   max_train_examples: int | None = None, progress: bool = True,
                   save_model: bool = True, on_start=None) -> dict[str, Any]:
    """Fine-tune ``checkpoint`` on SQuAD (``task``: squad or squad_v2), score the dev set. With
    ``out``: ``result.json``, ``predictions.json`` (2.0: ``na_probs.json``) and the model.
    ``on_start()`` runs once the data is read."""
    if task not in TASKS:
        raise ValueError(f"unknown question-answering task {task!r}: {' or '.join(TASKS)}")
    pretrained, path = open_checkpoint(checkpoint)
    source = None if path is None else str(path)
    cfg, squad, note = _configs(overrides, pretrained.config.max_position_embeddings)
    tokenizer = get_tokenizer(pretrained, cfg)
    train_set, dev_set = load_sets(task, squad, train=train, dev=dev, data_dir=data_dir)
    if on_start is not None:  # said once the data is read: a refusal stays one line
        on_start()
    if note is not None:
        log.warning("%s", note)
    examples = squad_data.trainable(train_set.examples)
    if max_train_examples is not None:
        keep = np.random.default_rng(seed).permutation(len(examples))[:max_train_examples]
        examples = [examples[i] for i in sorted(keep)]
    windows = make_all_windows(tokenizer, examples, max_len=cfg.max_seq_len,
                               stride=squad.doc_stride, max_query_len=squad.max_query_len,
                               training=True)
    torch.manual_seed(seed)
    model = build_span_qa(pretrained, cfg).to(device_named(cfg.device))
    t0 = time.perf_counter()
    info = train_span_qa(model, windows, cfg, seed=seed, pad_id=tokenizer.pad_id,
                         progress=progress)
    t1 = time.perf_counter()
    metrics, answers, na_probs, thresh = score_dev(model, tokenizer, dev_set, cfg, squad,
                                                   max_len=cfg.max_seq_len)
    result = {"task": task, "metrics": metrics, "na_prob_threshold": thresh, "seed": seed,
              "checkpoint": source, "train_source": train_set.source,
              "dev_source": dev_set.source, "train_questions": len(examples),
              "train_windows": len(windows), "dev_questions": len(dev_set.examples), **info,
              "train_seconds": round(t1 - t0, 1),
              "eval_seconds": round(time.perf_counter() - t1, 1),
              "config": {"finetune": vars(cfg), "squad": vars(squad)}}
    if out is not None:
        _write(Path(out), FinetunedQA(model.cpu(), tokenizer, task, cfg, squad, thresh), result,
               answers, na_probs if dev_set.is_v2 else None, save_model=save_model)
    return result


def _write(out: Path, qa: FinetunedQA, result: dict, answers: dict, na_probs: dict | None, *,
           save_model: bool) -> None:
    out.mkdir(parents=True, exist_ok=True)
    if save_model:
        save_qa(qa, out, result=result)
    write_file(out / "predictions.json", json.dumps(answers, indent=1) + "\n")
    if na_probs is not None:
        write_file(out / "na_probs.json", json.dumps(na_probs, indent=1) + "\n")
    write_file(out / "result.json", json.dumps(result, indent=2) + "\n")
