"""Fine-tuned models on disk: what ``minielectra finetune --out DIR`` writes and ``predict`` reads.

The directory holds everything needed to score new text, with neither the pre-trained checkpoint
nor the GLUE data: ``model.safetensors`` (encoder and head), ``finetune.json`` (the task, the
model and fine-tuning configs, the dev result of the run) and the tokenizer (``vocab.txt``).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from safetensors.torch import load_file, save_file

from ..config import ModelConfig, _from_dict
from ..data.tokenizer import WordPieceTokenizer
from . import glue
from .classifier import FinetuneConfig, SequenceClassifier
from .glue import Task

WEIGHTS, META = "model.safetensors", "finetune.json"


def save_finetuned(model: SequenceClassifier, tokenizer, task: Task, cfg: FinetuneConfig,
                   path: str | Path, *, result: dict | None = None) -> Path:
    """Write weights, the model and fine-tuning configs, the tokenizer and the dev result."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, path / WEIGHTS)
    meta = {"task": task.name, "num_labels": task.num_labels, "label_names": task.label_names,
            "model": dataclasses.asdict(model.config), "finetune": dataclasses.asdict(cfg),
            "result": result}
    (path / META).write_text(json.dumps(meta, indent=2) + "\n")
    tokenizer.save(path)
    return path


@dataclass
class Finetuned:
    """A fine-tuned model ready for :func:`predict`."""

    model: SequenceClassifier
    tokenizer: Any
    task: Task
    config: FinetuneConfig


def load_finetuned(path: str | Path, *, device: str = "cpu") -> Finetuned:
    """The model written by :func:`save_finetuned`, in eval mode."""
    path = Path(path)
    if not (path / META).is_file():
        raise FileNotFoundError(f"{path} is not a fine-tuned model: no {META} (written by "
                                "`minielectra finetune --out DIR`)")
    meta = json.loads((path / META).read_text())
    task = glue.get_task(meta["task"])
    cfg = _from_dict(FinetuneConfig, meta["finetune"], prefix="finetune.")
    model = SequenceClassifier(_from_dict(ModelConfig, meta["model"], prefix="model."),
                               meta["num_labels"], dropout=cfg.head_dropout)
    model.load_state_dict(load_file(path / WEIGHTS))
    return Finetuned(model.to(device).eval(), WordPieceTokenizer.load(path), task, cfg)
