"""A run's checkpoints: ``checkpoints/step_N`` directories, which to keep, and resume state.

Each checkpoint is a model directory (``Electra.from_pretrained`` loads it) plus
``run_config.json`` and ``trainer_state.pt`` (optimiser, scaler, RNG, data position), published by
one atomic rename, so a crash never leaves half a checkpoint. The last ``keep_last`` are kept, plus
the paper's milestones (6.25/12.5/25/50/100% of the steps), which the per-token views replay.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import re
import shutil
from pathlib import Path
from typing import Any

import torch

from ..config import RunConfig, TrainConfig
from ..model import checkpoint
from ..model.electra import Electra
from ..model.storage import CheckpointError
from .optim import load_optimizer_state, lr_at

STATE_FILE = "trainer_state.pt"
_STEP_DIR = re.compile(r"step_(\d+)")


def checkpoint_dir(out_dir: str | Path) -> Path:
    return Path(out_dir) / "checkpoints"


def list_checkpoints(out_dir: str | Path) -> list[tuple[int, Path]]:
    """Complete checkpoints as ``(step, path)``, oldest first. Temporary dirs, those being
    deleted and links (never the run's own) are not listed."""
    root = checkpoint_dir(out_dir)
    found = []
    for p in root.iterdir() if root.is_dir() else []:
        m = _STEP_DIR.fullmatch(p.name)
        if m and not p.is_symlink() and (p / STATE_FILE).is_file():
            found.append((int(m.group(1)), p))
    return sorted(found)


def latest_checkpoint(out_dir: str | Path) -> Path | None:
    found = list_checkpoints(out_dir)
    return found[-1][1] if found else None


def milestone_steps(t: TrainConfig) -> set[int]:
    """The paper's partial checkpoints (fractions of ``max_steps``) plus the last step."""
    return {max(1, round(f * t.max_steps)) for f in t.milestones} | {t.max_steps}


def save_checkpoint(out_dir: str | Path, step: int, model: Electra, state: dict[str, Any],
                    cfg: RunConfig) -> Path:
    """Write ``checkpoints/step_N`` (see the module docstring), all published by one rename
    (:func:`minielectra.safeio.replace_dir`)."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    run_config = json.dumps(cfg.to_dict(), indent=2) + "\n"
    final = checkpoint_dir(out_dir) / f"step_{step:07d}"
    return checkpoint.save_pretrained(model, final, extra_files={"run_config.json": run_config,
                                                      STATE_FILE: buffer.getvalue()})


def prune_checkpoints(out_dir: str | Path, t: TrainConfig) -> list[Path]:
    """Delete all but the last ``keep_last`` checkpoints, never a milestone nor every
    ``keep_every``-th periodic one (the views' slider replays them); returns the deleted."""
    keep = milestone_steps(t)
    every = t.keep_every * t.save_every
    found = list_checkpoints(out_dir)
    recent = {s for s, _ in found[-max(1, t.keep_last):]}
    deleted = []
    for s, p in found:
        if s not in keep and s not in recent and not (every and s % every == 0):
            # renamed first, in one step: a reader (evaluate --checkpoint RUN) meanwhile finds
            # the whole checkpoint or none, never one with half its files deleted
            gone = p.with_name(f".{p.name}.deleting-{os.getpid()}")
            os.rename(p, gone)
            shutil.rmtree(gone)
            deleted.append(p)
    for p in [*checkpoint_dir(out_dir).glob(".step_*.tmp-*"),  # leftovers of a crashed write
              *checkpoint_dir(out_dir).glob(".step_*.deleting-*")]:  # or of a killed prune
        shutil.rmtree(p, ignore_errors=True)
    return deleted


def trainer_state(step: int, optimizer, scaler, t: TrainConfig) -> dict[str, Any]:
    """What resuming needs besides the weights. The schedule is a function of the step, and the
    data position is the number of batches consumed (``batch_iterator(start=...)``). The global
    RNGs matter only between steps: a step reseeds them per slice (``ranks.seed_slice``)."""
    rng = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        rng["cuda"] = torch.cuda.get_rng_state_all()
    return {"step": step, "optimizer": optimizer.state_dict(),
            "scheduler": {"schedule": t.schedule, "step": step, "lr": lr_at(step, t)},
            "scaler": scaler.state_dict() if scaler is not None else None,
            "rng": rng,
            "data": {"batches_consumed": step * t.grad_accum, "seed": t.seed}}


def restore_trainer_state(ckpt: Path, optimizer, scaler) -> int:
    """Load optimiser, scaler and RNG states from ``ckpt``; returns the step to continue from."""
    try:
        state = torch.load(ckpt / STATE_FILE, map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, pickle.UnpicklingError) as e:  # cut short, or not ours
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        raise CheckpointError(f"{ckpt / STATE_FILE}: damaged, cannot be read ({first})") from None
    load_optimizer_state(optimizer, state["optimizer"])
    if scaler is not None and state.get("scaler"):
        scaler.load_state_dict(state["scaler"])
    torch.set_rng_state(state["rng"]["torch"])
    if "cuda" in state["rng"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["rng"]["cuda"])
    return state["step"]


def checkpoint_minutes(checkpoint: str) -> float | None:
    """Pre-training minutes behind ``checkpoint`` by its run's clock: the run's record
    (``pretrain.json``) for its final checkpoint or the run dir; else, for ``step_K`` (a run
    dir's latest), ``metrics.jsonl``'s clock at the evaluation of step K or its first log line
    at or after K (resumed sessions added up)."""
    where = Path(str(checkpoint))
    for record in (where / "pretrain.json", where.parent.parent / "pretrain.json"):
        timing = json.loads(record.read_text()) if record.is_file() else None
        if timing is not None and (record.parent == where
                                   or Path(timing["checkpoint"]).name == where.name):
            return timing["train_seconds"] / 60
    kept = sorted((int(m.group(1)), p) for p in where.glob("checkpoints/step_*")
                  if (m := _STEP_DIR.fullmatch(p.name)))  # not a write's temporary dir
    if kept:  # a `minielectra pretrain --out` dir: its latest checkpoint
        where = kept[-1][1]
    step = _STEP_DIR.fullmatch(where.name)
    metrics = where.parent.parent / "metrics.jsonl"
    if step is None or not metrics.is_file():
        return None
    k, offset, last = int(step.group(1)), 0.0, 0.0
    first_after = None  # minutes at the first log line at or after step K
    for line in metrics.read_text().splitlines():
        entry = json.loads(line) if line.strip() else {}
        if "elapsed_s" not in entry:
            continue
        if entry["elapsed_s"] < last:  # a resumed session's clock starts again at 0
            offset += last
        last = entry["elapsed_s"]
        if entry.get("kind") == "eval" and entry.get("step") == k:
            return (offset + last) / 60
        if first_after is None and entry.get("step", -1) >= k:
            first_after = (offset + last) / 60
    return first_after
