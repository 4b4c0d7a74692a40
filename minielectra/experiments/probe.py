"""Linear probes: how much of a GLUE task a frozen pre-trained encoder already separates.

Fine-tuning at CPU scale is noisy; a probe asks a steadier question. Each sentence (pair) becomes
the mean of its final hidden states concatenated with the ``[CLS]`` state (a pre-trained-only
``[CLS]`` was never trained for anything), and a ridge map is fitted in closed form on
standardised features, ``lambda`` picked on a fifth of the training subset. No scikit-learn.
Axis letters: N examples, b batch, n sequence, d width, c classes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ..data.corpus import find_data_dir
from ..finetune import metrics
from ..finetune.glue import data as glue
from ..finetune.task import subset
from ..finetune.classifier import collate, encode

LAMBDAS = (0.1, 1.0, 10.0, 100.0, 1000.0)


def tasks_present(data_dir=None, *, names=glue.GLUE_TASKS) -> list[str]:
    """The GLUE tasks with both a train and a dev file in the data dir (none without one)."""
    root = find_data_dir(data_dir)
    if root is None:
        return []
    found = []
    for name in names:
        task = glue.get_task(name)
        folder = Path(root) / "glue" / task.folder
        if all(any((folder / f"{stem}.tsv{gz}").is_file() for gz in ("", ".gz"))
               for stem in ("train", task.dev_file)):
            found.append(name)
    return found


@torch.no_grad()
def features(encoder, encoded: list[tuple[list, list]], *, pad_id: int,
             batch_size: int = 256) -> torch.Tensor:
    """``(N, 2d)``: mean of the final hidden states over real tokens, then the [CLS] state."""
    encoder.eval()
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i][0]))  # little padding
    parts = []
    for start in range(0, len(order), batch_size):
        batch = collate([encoded[i] for i in order[start:start + batch_size]], pad_id)
        h = encoder(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]).float()
        m = batch["attention_mask"][..., None].float()  # (b, n, 1)
        parts.append(torch.cat([(h * m).sum(1) / m.sum(1), h[:, 0]], dim=-1))  # (b, 2d)
    out = torch.empty(len(encoded), parts[0].shape[-1])
    out[torch.tensor(order)] = torch.cat(parts)
    return out


def ridge_fit(x: torch.Tensor, y: torch.Tensor, lam: float) -> torch.Tensor:
    """``W`` of ``[x, 1] W ~ y`` minimising ``|[x, 1] W - y|^2 + lam |W_x|^2`` (bias not
    penalised), in float64 by a linear solve."""
    x1 = torch.cat([x, torch.ones(len(x), 1, dtype=x.dtype)], dim=1).double()
    reg = lam * torch.eye(x1.shape[1], dtype=torch.float64)
    reg[-1, -1] = 0.0
    return torch.linalg.solve(x1.T @ x1 + reg, x1.T @ y.double())


def ridge_predict(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.cat([x, torch.ones(len(x), 1, dtype=x.dtype)], dim=1).double() @ w


def _targets(task, labels) -> torch.Tensor:
    labels = torch.as_tensor(labels)
    if task.is_regression:
        return labels.double()[:, None]
    return torch.nn.functional.one_hot(labels.long(), task.num_labels).double()


def _outputs(task, scores: torch.Tensor) -> np.ndarray:
    return scores[:, 0].numpy() if task.is_regression else scores.argmax(-1).numpy()


def fit_probe(task, x_train, y_train, x_dev, y_dev, *, seed: int = 0) -> dict:
    """Standardise, pick ``lambda`` on a held-out fifth of the training set, refit, score dev."""
    mean, std = x_train.mean(0), x_train.std(0).clamp_min(1e-6)
    x_train, x_dev = (x_train - mean) / std, (x_dev - mean) / std
    perm = torch.randperm(len(x_train), generator=torch.Generator().manual_seed(seed))
    cut = len(perm) // 5
    val, fit = perm[:cut], perm[cut:]
    t_train = _targets(task, y_train)
    labels = np.asarray(y_train)

    def score(w, x, y) -> float:
        return metrics.compute_metrics(task, _outputs(task, ridge_predict(x, w)), y)[task.metric]

    picked = max(LAMBDAS, key=lambda lam: score(ridge_fit(x_train[fit], t_train[fit], lam),
                                                x_train[val], labels[val.numpy()]))
    w = ridge_fit(x_train, t_train, picked)
    return {"score": score(w, x_dev, np.asarray(y_dev)), "lambda": picked,
            "train_examples": len(x_train), "dev_examples": len(x_dev)}


def probe(encoder, tokenizer, tasks: list[str], *, max_train_examples: int = 4000,
          max_seq_len: int = 128, data_dir=None, seed: int = 0) -> dict[str, dict]:
    """A probe per task on a fixed subset of its training set (the same subset for every
    encoder: ``glue.subset`` with seed 0), scored on its full dev set."""
    results = {}
    for name in tasks:
        task = glue.get_task(name)
        train = subset(glue.load_split(task, "train", data_dir=data_dir), max_train_examples)
        dev = glue.load_split(task, "dev", data_dir=data_dir)
        feats = [features(encoder, encode(tokenizer, split, max_seq_len), pad_id=tokenizer.pad_id)
                 for split in (train, dev)]
        results[name] = fit_probe(task, feats[0], [e.label for e in train], feats[1],
                                  [e.label for e in dev], seed=seed)
    return results
