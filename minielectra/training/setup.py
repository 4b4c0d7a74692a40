"""Everything before the library loop's first step: the run directory, the resume checks, the model.

The run directory is locked and claimed first (:func:`minielectra.outputs.output_folder`, with
:data:`RUN_DIR` and :func:`run_inputs`; ``docs/guides/faults.md``).
A fresh run refuses one that holds an earlier run's checkpoints; a resumed run continues from
the newest *intact* checkpoint, written by the same configuration (:func:`resume_point`). Then
the model is built, or reloaded, on the data of :mod:`minielectra.training.inputs`
(:func:`model_and_data`).

Run layout (``train.out_dir``)::

    run.lock                held (a POSIX lock) while a run uses the directory: pid, host, start
    .minielectra-files.json the record of what minielectra wrote here (ownership.MANIFEST)
    config.json             the resolved RunConfig
    metrics.jsonl           one JSON object per logged step ("kind": "train" | "eval")
    tokenizer/              the vocabulary the run trained or loaded
    checkpoints/step_0001500/   model.safetensors, config.json, vocab.txt  (Electra.from_pretrained)
                                run_config.json, trainer_state.pt          (resume)
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import torch

from ..config import RunConfig
from ..model.electra import Electra
from ..objectives.compute import build_model, load_model
from ..model.storage import CheckpointError, verify_checksums
from ..ownership import Layout
from ..safeio import write_file
from .checkpoints import checkpoint_dir, list_checkpoints
from .inputs import prepare_data, set_token_ids

log = logging.getLogger(__name__)


def _is_run(folder: Path) -> bool:
    """A run directory's own record: a ``config.json`` that reads as a whole run config."""
    saved = json.loads((folder / "config.json").read_text())
    return {"model", "objective", "data", "train"} <= set(saved) and bool(
        RunConfig.from_dict(saved))


# What a run writes in train.out_dir (experiments add their judges' files to a run's directory).
RUN_DIR = Layout("pretrain", ("config.json", "metrics.jsonl", "tokenizer", "checkpoints",
                              "timing.json", "pretrain.json", "result.json"), _is_run)
RUN_FILES = ("config.json", "metrics.jsonl", "tokenizer/", "checkpoints/")


def run_inputs(cfg: RunConfig) -> list[tuple[str, str | None]]:
    """What the run reads, which ``--out`` must not be, hold or lie inside: the corpus (each
    part of ``a+b``), a prepared folder, a vocabulary file."""
    d = cfg.data
    corpus = str(d.corpus or "")
    parts = corpus.split("+") if "+" in corpus and not Path(corpus).exists() else [corpus]
    return [*(("--corpus", p) for p in parts), ("--data", d.prepared), ("data.vocab", d.vocab)]


# Settings that may change between a run and its resume: they do not change the trajectory.
RESUMABLE_CHANGES = {"train.device", "train.compile", "train.log_every", "train.eval_every",
                     "train.eval_examples", "train.save_every", "train.keep_last",
                     "train.max_minutes", "train.out_dir", "data.cache_dir", "data.num_workers"}


def check_resumable(saved: RunConfig, cfg: RunConfig) -> None:
    """Refuse to resume a checkpoint written by a different configuration, naming the keys."""
    a, b = _flatten(saved.to_dict()), _flatten(cfg.to_dict())
    diff = sorted(k for k in a.keys() | b.keys()
                  if a.get(k) != b.get(k) and k not in RESUMABLE_CHANGES)
    if diff:
        shown = ", ".join(f"{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in diff)
        raise ValueError(f"cannot resume: the checkpoint was trained with another config ({shown})")


def _flatten(d: dict, prefix: str = "") -> dict[str, Any]:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[prefix + k] = list(v) if isinstance(v, tuple) else v
    return out


def intact_checkpoint(out_dir: str | Path) -> tuple[Path, RunConfig]:
    """The newest checkpoint whose files match their sha256 sums and whose run config reads;
    a damaged newer one is renamed ``step_N.damaged``, so pruning never keeps it instead."""
    found = list_checkpoints(out_dir)
    if not found:
        raise FileNotFoundError(f"--resume: no checkpoint in {checkpoint_dir(out_dir)}")
    for _, ckpt in reversed(found):
        try:
            verify_checksums(ckpt)
            return ckpt, RunConfig.load(ckpt / "run_config.json")
        except (CheckpointError, ValueError, KeyError, OSError) as e:
            aside, n = ckpt.with_name(f"{ckpt.name}.damaged"), 1
            while aside.exists():
                aside, n = ckpt.with_name(f"{ckpt.name}.damaged{n}"), n + 1
            ckpt.rename(aside)
            log.warning("--resume: checkpoint %s is damaged (%s); moved it to %s and fall back "
                        "to the one before", ckpt.name, e, aside.name)
    raise CheckpointError(f"--resume: every checkpoint in {checkpoint_dir(out_dir)} is damaged "
                          "(renamed *.damaged); start afresh in another --out")


def resume_point(cfg: RunConfig) -> Path:
    """The newest intact checkpoint of ``train.out_dir``, refused unless written by ``cfg``."""
    ckpt, saved = intact_checkpoint(cfg.train.out_dir)
    for k in ("vocab_size", "pad_token_id", "cls_token_id", "sep_token_id", "mask_token_id"):
        setattr(cfg.model, k, getattr(saved.model, k))  # resolved from the tokenizer, not set
    check_resumable(saved, cfg)
    return ckpt


def refuse_earlier_run(cfg: RunConfig) -> None:
    """A fresh run must not mix its checkpoints with an earlier run's in ``train.out_dir``:
    pruning would delete them, and ``--resume`` would later pick whichever step is largest."""
    found = list_checkpoints(cfg.train.out_dir)
    if found:
        raise ValueError(
            f"{checkpoint_dir(cfg.train.out_dir)} already holds {len(found)} checkpoint(s) of an "
            f"earlier run (latest step {found[-1][0]}): delete them, choose another --out "
            "(train.out_dir), or continue that run with --resume")


def model_and_data(cfg: RunConfig, ckpt: Path | None, device: torch.device, progress: bool):
    """The model (fresh, or the checkpoint's weights) and the train and held-out datasets."""
    torch.manual_seed(cfg.train.seed)  # first: the initial weights are a function of the seed
    loaded = load_model(ckpt) if ckpt is not None else None
    tokenizer, train_ds, heldout_ds = prepare_data(
        cfg, tokenizer=loaded.tokenizer if loaded is not None else None, progress=progress)
    set_token_ids(cfg, tokenizer)
    model = build_model(cfg.model, cfg.objective)
    if loaded is not None:
        model.load_state_dict(loaded.state_dict())
    model.tokenizer = tokenizer
    return model.to(device).train(), train_ds, heldout_ds


def _truncate_metrics(path: Path, step: int) -> list[dict[str, Any]]:
    """On resume, drop the log lines of steps after the checkpoint (they will be redone), and a
    line that does not parse: the last one, cut short by a crash in the middle of writing it.
    Returns the records kept."""
    if not path.exists():
        return []
    keep = []
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and record.get("step", 0) <= step:
            keep.append(record)
    write_file(path, "".join(json.dumps(r) + "\n" for r in keep))  # never through a link
    return keep


def prepare_out_dir(cfg: RunConfig, model: Electra, step: int,
                     resumed: bool) -> tuple[Path, set[int]]:
    """``config.json``, ``tokenizer/`` and ``metrics.jsonl`` (emptied, or cut back to ``step``);
    returns the log's path and the steps already evaluated."""
    out = Path(cfg.train.out_dir)
    write_file(out / "config.json", json.dumps(cfg.to_dict(), indent=2) + "\n")
    model.tokenizer.save(out / "tokenizer")
    metrics_path = out / "metrics.jsonl"
    kept = []
    if resumed:
        kept = _truncate_metrics(metrics_path, step)
    else:
        write_file(metrics_path, "")  # a link there is replaced, its target untouched
    return metrics_path, {r["step"] for r in kept if r.get("kind") == "eval"}
