"""What a ``--checkpoint`` means, in one place: the model it names, and where that model is.

Every command and the Python API open a pre-trained checkpoint here: ``"bundled"`` (the packaged
one), a checkpoint directory (minielectra's or transformers'), or a run directory (its newest
complete ``checkpoints/step_N``). A hub id is named as such when it is not on disk. What a run
does with its own checkpoints while it trains (saving, pruning, resuming):
:mod:`.checkpoints`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from torch import nn

from ..model import hf
from ..model.hubmodels import owner_hint
from ..model.storage import BUNDLED, CheckpointError, resolve_bundled
from ..objectives.compute import load_model
from .checkpoints import latest_checkpoint


def checkpoint_path(checkpoint) -> Path | None:
    """Where a ``--checkpoint`` is on disk, unresolved (None: a model in memory): what an output
    folder must not be or hold."""
    if not isinstance(checkpoint, (str, Path)):
        return None
    return BUNDLED if str(checkpoint) == "bundled" else Path(checkpoint)


def resolve_checkpoint(checkpoint: str | Path) -> Path:
    """A checkpoint directory, a run directory (its latest checkpoint), or ``"bundled"``."""
    path = resolve_bundled(checkpoint)
    # model.safetensors, or a transformers directory (pytorch_model.bin alone, or discriminator/
    # and generator/ subdirectories), as finetune takes them
    if (path / "config.json").is_file() and any(path.glob("*model.*")) or hf.is_hf_dir(path):
        return path
    latest = latest_checkpoint(path)
    if latest is None and (path / "finetune.json").is_file():  # finetune --out's record
        raise FileNotFoundError(f"{checkpoint}: a fine-tuned model (`minielectra finetune "
                                "--out`), not a pre-trained checkpoint; it scores texts: "
                                f"minielectra predict --model {checkpoint} TEXT")
    if latest is None:
        raise FileNotFoundError(f"{checkpoint}: not a checkpoint directory, nor a run directory "
                                f"with checkpoints/step_*{owner_hint(checkpoint)}")
    return latest


def open_checkpoint(checkpoint, load: Callable[[Path], Any] = load_model
                    ) -> tuple[Any, Path | None]:
    """``(load(path), path)`` for what :func:`resolve_checkpoint` finds (``load``: any
    objective's model, :func:`~minielectra.objectives.compute.load_model`); a model given in
    memory comes back as it is, with no path. A run still training prunes its older checkpoints:
    when the one picked is deleted while it is read, the newest complete one is read instead."""
    if isinstance(checkpoint, nn.Module):
        return checkpoint, None
    for attempt in range(5):
        path = resolve_checkpoint(checkpoint)
        try:
            loaded = load(path)
        except (OSError, CheckpointError):
            if path.is_dir() or attempt == 4:  # still there: the error is the checkpoint's own
                raise
            continue
        if path.is_dir() or attempt == 4:  # not deleted while it was read
            return loaded, path
    raise AssertionError("unreachable")
