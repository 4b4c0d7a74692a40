"""Fine-tuned models on disk: what ``minielectra finetune --out DIR`` writes and ``predict`` reads.

The directory scores new text with neither the pre-trained checkpoint nor the training data:
``model.safetensors``, ``finetune.json`` (the task, the model and fine-tuning configs, the dev
result), ``vocab.txt`` and ``checksums.json`` (sha256 of the weights and vocabulary, checked on
load). A SQuAD model (:mod:`.squad.model`) is written and read by the same two functions.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from safetensors import SafetensorError
from safetensors.torch import load_file, save
from torch import nn

from ..config import ModelConfig
from ..overrides import from_dict
from ..data.files import file_sha256
from ..data.tokenizer import WordPieceTokenizer
from ..model.storage import CHECKSUMS, VOCAB, canonical_safetensors, verify_checksums
from ..safeio import write_file
from .classifier import FinetuneConfig, SequenceClassifier
from .task import Task

WEIGHTS, META = "model.safetensors", "finetune.json"


def write_model(path: str | Path, model: nn.Module, tokenizer, meta: dict[str, Any]) -> Path:
    """Weights, ``meta`` as ``finetune.json``, the tokenizer and checksums (classifier or SQuAD)."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    weights = canonical_safetensors(save(state))
    tokenizer.save(path)
    sums = {WEIGHTS: hashlib.sha256(weights).hexdigest(), VOCAB: file_sha256(path / VOCAB)}
    # bytes, then one write each: a full disk is an OSError naming the file, and the permissions
    # are its siblings' (safetensors' own save_file makes a private file)
    write_file(path / WEIGHTS, weights)
    write_file(path / META, json.dumps(meta, indent=2) + "\n")
    write_file(path / CHECKSUMS, json.dumps({"sha256": sums}, indent=2) + "\n")
    return path


def load_weights(path: Path, model_class: type[nn.Module], *args, **kwargs) -> nn.Module:
    """``model_class(*args, **kwargs)`` holding the weights :func:`write_model` wrote there."""
    verify_checksums(path, [WEIGHTS, VOCAB])
    model = model_class(*args, **kwargs)
    try:
        model.load_state_dict(load_file(path / WEIGHTS))
    except SafetensorError as e:
        raise ValueError(f"{path / WEIGHTS}: damaged or truncated ({e})") from None
    return model


def save_finetuned(model: SequenceClassifier, tokenizer, task: Task, cfg: FinetuneConfig,
                   path: str | Path, *, result: dict | None = None) -> Path:
    """Write weights, the model and fine-tuning configs, the tokenizer and the dev result."""
    return write_model(path, model, tokenizer, {
        "task": task.name, "num_labels": task.num_labels, "label_names": task.label_names,
        "task_spec": task_spec(task), "model": dataclasses.asdict(model.config),
        "finetune": dataclasses.asdict(cfg), "result": result})


def task_spec(task: Task) -> dict[str, Any]:
    """What ``predict`` needs of a task: its inputs, labels, metrics and regression scale."""
    return {"name": task.name, "display": task.display, "inputs": list(task.hub_fields),
            "label_names": task.label_names, "metrics": list(task.metrics),
            "label_shift": task.label_shift, "label_scale": task.label_scale}


def task_from_spec(meta: dict[str, Any]) -> Task:
    """The task the saved spec describes, a GLUE task or a user's: what ``predict`` needs of it
    (no task family is looked up, so the saved model reads the same whichever wrote it)."""
    t = meta["task_spec"]
    names = None if t["label_names"] is None else tuple(t["label_names"])
    return Task(t["name"], t["display"], "", (), 0, tuple(t["inputs"]), names, names,
                tuple(t["metrics"]), label_shift=t["label_shift"], label_scale=t["label_scale"])


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
    try:
        meta = json.loads((path / META).read_text())
        task = task_from_spec(meta)
        cfg = from_dict(FinetuneConfig, meta["finetune"], prefix="finetune.")
        mcfg = from_dict(ModelConfig, meta["model"], prefix="model.")
        num_labels = meta["num_labels"]
    except (ValueError, KeyError, TypeError, AttributeError) as e:  # JSON errors are ValueErrors
        raise ValueError(f"{path / META}: damaged, not a fine-tuned model's description "
                         f"({type(e).__name__}: {e})") from None
    model = load_weights(path, SequenceClassifier, mcfg, num_labels, dropout=cfg.head_dropout)
    return Finetuned(model.to(device).eval(), WordPieceTokenizer.load(path), task, cfg)
