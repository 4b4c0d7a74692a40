"""Texts longer than the model reads: how many are cut, and sliding windows that read them whole.

:func:`encode_texts` encodes a set of examples and counts the texts over ``max_seq_len`` tokens,
so that fine-tuning and ``predict`` can say what share was cut (docs/guides/own-data.md):

- ``long_text="truncate"``: one row per text, cut to ``max_seq_len`` (the paper).
- ``long_text="windows"``: a single text longer than that becomes several rows
  ``[CLS] w [SEP]``, windows of ``max_seq_len - 2`` word pieces overlapping by half (the last
  ends at the text's end). Each trains with its text's label; in evaluation and ``predict`` a
  text's logits are the mean of its windows' (:func:`pool`). Pairs keep ``truncate``: a window
  over a pair would lose the pairing.

A checkpoint's positions beyond its pre-training length (``run_config.json``'s
``data.max_seq_len``; the bundled one saw 32 tokens) are untrained:
:func:`warn_untrained_positions` says so.

Axis letters: w windows (rows), t texts, c classes.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from ..progress import counted, progress_bar
from ..training.device import autocast
from .classifier import collate
from .task import Example, Task

log = logging.getLogger(__name__)

LONG_TEXT = ("truncate", "windows")
UNCUT = 1 << 30  # a max_len no text reaches: encode_pair then cuts nothing


@dataclass
class Encoded:
    """Model rows of a set of texts: ``(ids, segment ids)`` each, unpadded."""

    rows: list[tuple[list, list]]
    owner: list[int] | None  # with windows: the text of each row; None: row i is text i
    texts: int  # how many texts
    long: int  # texts longer than max_len (cut, or read in several windows)
    max_len: int


def windows_of(ids: list[int], max_len: int) -> list[list[int]]:
    """``[CLS] w [SEP]`` rows over ``[CLS] text [SEP]`` (``ids``), half-overlapping windows."""
    cls, body, sep = ids[0], ids[1:-1], ids[-1]
    size = max_len - 2
    if size < 1:
        raise ValueError(f"max_seq_len {max_len} leaves no room for text between [CLS] and [SEP]")
    if len(body) <= size:
        return [ids]
    stride = max(1, size // 2)
    starts = list(range(0, len(body) - size + 1, stride))
    if starts[-1] + size < len(body):  # the last window ends at the text's end
        starts.append(len(body) - size)
    return [[cls] + body[s:s + size] + [sep] for s in starts]


def encode_texts(tokenizer, examples: Sequence[Example], max_len: int, *,
                 long_text: str = "truncate") -> Encoded:
    """Encode ``examples`` for a classifier reading ``max_len`` tokens (see the module doc)."""
    if long_text not in LONG_TEXT:
        raise ValueError(f"long_text must be one of {list(LONG_TEXT)}, got {long_text!r}")
    rows, owner, long = [], [], 0
    for t, e in enumerate(examples):
        full = tokenizer.encode_pair(e.text_a, e.text_b, max_len=UNCUT)
        if len(full[0]) <= max_len:
            rows.append(full)  # what encode_pair(max_len=max_len) gives: nothing to cut
            owner.append(t)
            continue
        long += 1
        if long_text == "windows" and e.text_b is None:
            pieces = windows_of(full[0], max_len)
            rows += [(w, [0] * len(w)) for w in pieces]
            owner += [t] * len(pieces)
        else:
            rows.append(tokenizer.encode_pair(e.text_a, e.text_b, max_len=max_len))
            owner.append(t)
    plain = len(rows) == len(examples)
    return Encoded(rows, None if plain else owner, len(examples), long, max_len)


def warn_long(enc: Encoded, what: str, long_text: str, *, pairs: bool = False) -> None:
    """One warning line when some texts do not fit: how many, and what happened to them."""
    if not enc.long:
        return
    share = f"{enc.long} of {enc.texts} ({100 * enc.long / enc.texts:.0f}%)"
    if long_text == "windows" and not pairs:
        log.warning("%s: %s texts are longer than %d tokens; each is read in half-overlapping "
                    "windows (%d rows in all), its logits averaged", what, share, enc.max_len,
                    len(enc.rows))
    else:
        hint = ("" if pairs else "; --long-text windows reads them whole in overlapping windows")
        log.warning("%s: %s texts are longer than %d tokens and are cut there "
                    "(finetune.max_seq_len)%s", what, share, enc.max_len, hint)


def pool(logits: np.ndarray, owner: list[int] | None, texts: int) -> np.ndarray:
    """``(w, c)`` row logits -> ``(t, c)``: the mean over each text's rows."""
    if owner is None:
        return logits
    idx = torch.as_tensor(owner)
    sums = torch.zeros(texts, logits.shape[1]).index_add_(0, idx, torch.from_numpy(logits))
    counts = torch.bincount(idx, minlength=texts).clamp_min(1).unsqueeze(1)
    return (sums / counts).numpy()


@torch.no_grad()
def predict_texts(model, task: Task, enc: Encoded, *, pad_id: int, batch_size: int = 128,
                  progress: bool = False, precision: str = "fp32"
                  ) -> tuple[np.ndarray, np.ndarray]:
    """``(outputs, logits)`` per text: class ids, or regression outputs on the labels' scale
    (STS-B: 0-5), and the pooled logits. Rows are batched by length: little padding.
    ``progress``: a bar, when there are enough rows to wait for (8 batches or more).
    ``precision``: fp32, or bf16 autocast (the logits are read back in fp32)."""
    model.eval()
    device = next(model.parameters()).device
    order = sorted(range(len(enc.rows)), key=lambda i: len(enc.rows[i][0]))
    logits = torch.empty(len(enc.rows), model.head.out_features)  # (w, c)
    starts = range(0, len(order), batch_size)
    with progress_bar(total=len(starts), desc="predict", unit="batch",
                      disable=not progress or len(starts) < 8) as bar:
        for start in counted(starts, bar):
            idx = order[start:start + batch_size]
            batch = {k: v.to(device)
                     for k, v in collate([enc.rows[i] for i in idx], pad_id).items()}
            with autocast(device, precision):
                logits[idx] = model(**batch).float().cpu()
    pooled = torch.from_numpy(pool(logits.numpy(), enc.owner, enc.texts))  # (t, c)
    outputs = (pooled.squeeze(-1) * task.label_scale + task.label_shift if task.is_regression
               else pooled.argmax(-1))
    return outputs.numpy(), pooled.numpy()


def pretrained_length(checkpoint_dir: str | Path | None) -> int | None:
    """The sequence length a minielectra checkpoint was pre-trained at (its run_config.json),
    or None when it does not say (a transformers directory, a model in memory)."""
    if checkpoint_dir is None:
        return None
    run_file = Path(checkpoint_dir) / "run_config.json"
    try:
        return int(json.loads(run_file.read_text())["data"]["max_seq_len"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def warn_untrained_positions(checkpoint_dir: str | Path | None,
                             rows: Sequence[tuple[list, list]], what: str) -> int:
    """Warn when rows are longer than the checkpoint's pre-training length; returns how many."""
    trained = pretrained_length(checkpoint_dir)
    if trained is None or not rows:
        return 0
    beyond = sum(len(ids) > trained for ids, _ in rows)
    if beyond:
        log.warning("%s: %d of %d inputs (%.0f%%) are longer than the %d tokens the checkpoint "
                    "was pre-trained on (%s): their positions %d and beyond were never trained "
                    "(--set finetune.max_seq_len=%d keeps to what it saw; add --long-text "
                    "windows to read longer texts whole)", what, beyond,
                    len(rows), 100 * beyond / len(rows), trained, checkpoint_dir,
                    trained, trained)
    return beyond
