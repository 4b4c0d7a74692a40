"""Held-out evaluation of a pre-trained ELECTRA: how well does the discriminator spot fakes?

The generator corrupts held-out text as in training, with a *fixed* seed, so that the same
checkpoint always gets the same numbers:

- ``disc_auc``: ROC-AUC of the discriminator's P(replaced) over every non-padding token, exact
  from ranks (:func:`roc_auc`); threshold-free, so fair even when replaced tokens are rare.
- ``disc_auc_text``: the same without [CLS] and [SEP]. They are never replaced, which lifts
  ``disc_auc`` the more the shorter the sequences: this one is fair across sequence lengths.
- ``disc_accuracy``, ``disc_precision``, ``disc_recall`` at P = 0.5 (*replaced* is positive),
  ``gen_accuracy`` at the masked positions, ``replaced_fraction`` (a sample equal to the
  original counts as original, paper section 2), ``masked_fraction``, the two losses.

:func:`evaluate` loads a checkpoint and its held-out split; :func:`evaluate_model` scores the
model in memory (the training loop's call).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np
import torch

from ..config import RunConfig
from ..data.corpus import absent_local_corpora, open_corpus
from ..data.dataset import build_dataset, collate
from ..data.prepare import load_prepared
from ..model.electra import Electra
from ..objectives.compute import DISCRIMINATIVE, compute, load_model
from ..progress import counted, progress_bar
from .inputs import long_stage
from .opening import open_checkpoint
from .device import autocast, check_precision, device_named

log = logging.getLogger(__name__)


RUN_CONFIG = "run_config.json"


def roc_auc(scores, labels) -> float:
    """Exact ROC-AUC by ranks (Mann-Whitney): ``(sum of positive ranks - P (P + 1) / 2) / (P N)``,
    tied scores sharing their mean rank (a tie counts 1/2); ``nan`` when a class is absent."""
    scores = np.asarray(scores, dtype=np.float64).ravel()
    labels = np.asarray(labels).ravel().astype(bool)
    n_pos = int(labels.sum())
    n_neg = labels.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    last = np.cumsum(counts)  # 1-based rank of the last member of each group of equal scores
    mean_rank = last - (counts - 1) / 2.0  # the average of ranks last-count+1 .. last
    rank_sum = mean_rank[inverse][labels].sum()
    return float((rank_sum - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def heldout_batches(dataset, *, batch_size: int, max_examples: int | None = None,
                    device: torch.device | str = "cpu", progress: bool = False,
                    desc: str = "evaluate") -> Iterator[dict[str, torch.Tensor]]:
    """Batches of a ``PretrainingDataset`` in order, the last one maybe smaller (training drops
    it, evaluation must not); ``max_examples`` evenly spaced ones cover every document.
    ``progress``: a bar named ``desc``, a step per batch handed on."""
    rows = np.arange(len(dataset))
    if max_examples is not None and max_examples < len(dataset):
        rows = np.linspace(0, len(dataset) - 1, max_examples).round().astype(np.int64)
    starts = range(0, len(rows), batch_size)
    with progress_bar(total=len(starts), desc=desc, unit="batch", disable=not progress) as bar:
        for i in counted(starts, bar):
            yield {k: v.to(device) for k, v in collate(dataset, rows[i:i + batch_size]).items()}


@torch.no_grad()
def evaluate_model(model: Electra, batches: Iterable[dict[str, torch.Tensor]], *, seed: int = 0,
                   precision: str = "fp32", keep_tokens: bool = False) -> dict[str, Any]:
    """Corrupt ``batches`` with a generator seeded by ``seed`` and score the discriminator
    (the MLM objectives have none: :func:`evaluate_mlm` scores their predictions instead).
    ``keep_tokens`` adds every real token's ``token_logits``, ``token_replaced`` and
    ``token_text`` (False for [CLS]/[SEP]) as arrays, for calibration and precision-recall."""
    if model.objective.name not in DISCRIMINATIVE:
        return evaluate_mlm(model, batches, seed=seed, precision=precision)
    was_training = model.training
    model.eval()  # no dropout: the result depends only on the weights, the data and the seed
    device = next(model.parameters()).device
    rng = torch.Generator(device=device).manual_seed(seed)
    scores, labels, text = [], [], []
    specials = torch.tensor([model.config.cls_token_id, model.config.sep_token_id], device=device)
    n = dict(examples=0, masked=0, gen_correct=0, gen_loss=0.0, disc_loss=0.0)
    for batch in batches:
        mask = batch["attention_mask"]
        with autocast(device, precision):
            out = model(batch["input_ids"], mask, batch["token_type_ids"], generator=rng)
        real = mask.bool()
        # (tokens,) each; the logits rank tokens as P(replaced) does
        scores.append(out.disc_logits.float()[real].cpu())
        labels.append(out.is_replaced[real].cpu())
        text.append(~torch.isin(out.corrupted_ids[real], specials).cpu())
        w = out.masked.weights  # host reads are fine here: evaluation, not a step
        masked = float(w.sum())
        n["examples"] += len(real)
        n["masked"] += masked
        n["gen_correct"] += float(((out.gen_logits.argmax(-1) == out.masked.targets) * w).sum())
        n["gen_loss"] += float(out.gen_loss) * masked  # the batch means, re-weighted to a total
        n["disc_loss"] += float(out.disc_loss) * len(labels[-1])
    model.train(was_training)
    if not sum(len(t) for t in labels):
        raise ValueError("evaluation got no examples (is the held-out split empty?)")
    scores_all, labels_all = torch.cat(scores).numpy(), torch.cat(labels).numpy()
    is_text = torch.cat(text).numpy()
    pred = scores_all > 0  # P(replaced) > 0.5
    n.update(tokens=len(labels_all), replaced=int(labels_all.sum()), predicted=int(pred.sum()),
             true_pos=int((pred & labels_all).sum()), correct=int((pred == labels_all).sum()))
    tokens = ({"token_logits": scores_all, "token_replaced": labels_all, "token_text": is_text}
              if keep_tokens else {})
    return {
        **tokens,
        "disc_auc": roc_auc(scores_all, labels_all),
        "disc_auc_text": roc_auc(scores_all[is_text], labels_all[is_text]),
        "disc_accuracy": n["correct"] / n["tokens"],
        "disc_precision": n["true_pos"] / max(n["predicted"], 1),
        "disc_recall": n["true_pos"] / max(n["replaced"], 1),
        "gen_accuracy": n["gen_correct"] / max(n["masked"], 1),
        "replaced_fraction": n["replaced"] / n["tokens"],
        "masked_fraction": n["masked"] / n["tokens"],
        "gen_loss": n["gen_loss"] / max(n["masked"], 1),
        "disc_loss": n["disc_loss"] / n["tokens"],
        "examples": n["examples"],
        "tokens": n["tokens"],
    }


@torch.no_grad()
def evaluate_mlm(model: Electra, batches: Iterable[dict[str, torch.Tensor]], *, seed: int = 0,
                 precision: str = "fp32") -> dict[str, Any]:
    """Held-out metrics of an MLM objective (``mlm``, ``replace-mlm``, ``all-tokens-mlm``):
    its loss and its accuracy at the masked positions, the examples weighted by their masks."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    rng = torch.Generator(device=device).manual_seed(seed)
    n = dict(examples=0, masked=0.0, correct=0.0, loss=0.0)
    for batch in batches:
        with autocast(device, precision):
            out = compute(model, batch["input_ids"], batch["attention_mask"],
                          batch["token_type_ids"], generator=rng)
        masked = float(out.masked.weights.sum())
        n["examples"] += len(batch["input_ids"])
        n["masked"] += masked
        n["correct"] += float(out.metrics["mlm_accuracy"]) * masked
        n["loss"] += float(out.disc_loss) * masked
    model.train(was_training)
    if not n["examples"]:
        raise ValueError("evaluation got no examples (is the held-out split empty?)")
    return {"objective": model.objective.name, "mlm_accuracy": n["correct"] / n["masked"],
            "mlm_loss": n["loss"] / n["masked"], "examples": n["examples"]}


def evaluate(checkpoint: str | Path, *, corpus: str | None = None,
             max_examples: int | None = None, batch_size: int | None = None,
             seed: int | None = None, device: str = "auto", progress: bool = False,
             split: str = "heldout", max_seq_len: int | None = None,
             precision: str = "fp32") -> dict[str, Any]:
    """Held-out metrics of a checkpoint (``minielectra evaluate``), as a JSON-ready dict.

    Data settings, batch size and seed come from the checkpoint's ``run_config.json`` when it
    has one, so the numbers are the ones the training loop logged; ``corpus`` names another
    corpus, and ``split="all"`` scores all of it (``"train"``: the part a run trains on). A run's
    corpus that lives only in an absent data dir is replaced by ``pydocs``, with a warning.
    ``max_seq_len`` builds the examples at another length than the run's last one (a run
    pre-trained at two lengths is worth scoring at both). ``progress``: bars for building the
    examples and for scoring them (``minielectra evaluate`` shows them). ``precision``: fp32, or
    bf16 autocast where the machine has it (:func:`.device.check_precision`).
    """
    if split not in ("heldout", "train", "all"):
        raise ValueError(f"split must be heldout, train or all, got {split!r}")
    for name, value in (("max_examples", max_examples), ("batch_size", batch_size),
                        ("max_seq_len", max_seq_len)):
        if value is not None and value <= 0:
            raise ValueError(f"{name} must be positive, got {value}")
    dev = device_named(device)
    check_precision(dev, precision)  # before a checkpoint or a corpus is read

    def read(path: Path):
        model = load_model(path)
        return model, run_config_for(path, model), (path / RUN_CONFIG).is_file()
    # a run dir: its newest complete checkpoint, never one its pruning is deleting
    (model, cfg, has_run_config), path = open_checkpoint(checkpoint, read)
    if model.tokenizer is None:
        raise FileNotFoundError(f"{path}: the checkpoint has no vocab.txt to tokenize text with")
    if has_run_config:
        model.objective = cfg.objective
    if (stage := long_stage(cfg)) is not None:  # a two-length run: its last length and batch
        cfg = stage[1]
    if max_seq_len is not None:
        if max_seq_len > model.config.max_position_embeddings:
            raise ValueError(f"max_seq_len {max_seq_len} is longer than the checkpoint's "
                             f"{model.config.max_position_embeddings} positions")
        cfg.data.max_seq_len = max_seq_len
    batch_size = batch_size or cfg.train.batch_size
    seed = cfg.train.seed if seed is None else seed
    spec, dataset = examples_for(cfg, model.tokenizer, corpus, split, progress)
    model.to(dev)
    batches = heldout_batches(dataset, batch_size=batch_size, max_examples=max_examples,
                              device=dev, progress=progress)
    result = evaluate_model(model, batches, seed=seed, precision=precision)
    return {"checkpoint": str(path), "corpus": spec, "split": split, "seed": seed,
            "max_seq_len": cfg.data.max_seq_len, "precision": precision, **result}


def run_config_for(path: Path, model) -> RunConfig:
    """The run config a checkpoint was trained with; for one without (e.g. an imported
    transformers checkpoint) the defaults, at its positions (at most 128) and batch 64."""
    run_file = path / RUN_CONFIG
    if run_file.is_file():
        return RunConfig.load(run_file)
    cfg = RunConfig()
    cfg.data.max_seq_len = min(128, model.config.max_position_embeddings)
    cfg.train.batch_size = 64
    return cfg


def examples_for(cfg: RunConfig, tokenizer, corpus: str | None = None, split: str = "heldout",
                 progress: bool = False):
    """(what was read, the examples): the run's own data (its ``prepare`` folder, or its corpus
    with its settings) unless ``corpus`` names another."""
    d = cfg.data
    if corpus is None and d.prepared and Path(d.prepared).is_dir():
        if split == "all":
            raise ValueError(f"the run trained from the prepared folder {d.prepared}, which "
                             "holds a train and a held-out part: use --split heldout or train")
        _, train, heldout = load_prepared(d.prepared)
        if heldout.input_ids.shape[1] != d.max_seq_len:  # evaluate --max-seq-len
            raise ValueError(f"the run trained from the prepared folder {d.prepared}, whose "
                             f"examples have {heldout.input_ids.shape[1]} tokens: to score "
                             f"{d.max_seq_len}-token ones, name the text to build them from "
                             "with --corpus")
        return f"prepared:{d.prepared}", heldout if split == "heldout" else train
    spec = corpus or d.corpus
    if corpus is None and absent_local_corpora(spec):
        log.warning("evaluate: the checkpoint's corpus %r needs %s from a data dir "
                    "(MINIELECTRA_DATA_DIR), which is not here; evaluating on the built-in "
                    "'pydocs' instead (--corpus chooses another)", spec,
                    " and ".join(absent_local_corpora(spec)))
        spec = "pydocs"  # held out by document hash, so still text the run never trained on
    dataset = build_dataset(open_corpus(spec), tokenizer, max_seq_len=d.max_seq_len,
                            split=split, held_out_fraction=d.held_out_fraction,
                            seed=cfg.train.seed, short_seq_prob=d.short_seq_prob,
                            single_segment_prob=d.single_segment_prob, cache_dir=d.cache_dir,
                            num_workers=d.num_workers, progress=progress)
    return spec, dataset
