"""Scoring new sentences (or sentence pairs) with a fine-tuned model (:mod:`.saved`).

``minielectra predict --model DIR TEXT ...`` (pairs two at a time; ``-``: standard input; or
``--file F``, :mod:`minielectra.finetune.inputs`) is :func:`run_predict`; text is encoded
exactly as in fine-tuning (longest-first truncation to the run's ``max_seq_len``, or
:mod:`.windows`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Sequence

import torch

from .task import Example, Task
from .saved import Finetuned, load_finetuned
from .inputs import parse_lines, read_inputs
from .windows import encode_texts, predict_texts, warn_long

Pair = tuple[str, "str | None"]


def _examples(task: Task, pairs: Sequence[str | Pair]) -> list[Example]:
    """Sentences as :class:`Example`; a pair task needs two segments, the others one (a model
    only ever saw one shape of input in fine-tuning)."""
    examples = [Example(p, None, 0) if isinstance(p, str) else Example(p[0], p[1], 0)
                for p in pairs]
    for i, e in enumerate(examples):
        if task.is_pair and e.text_b is None:
            raise ValueError(f"{task.display} scores sentence pairs; input {i} has only one "
                             "sentence")
        if not task.is_pair and e.text_b is not None:
            raise ValueError(f"{task.display} scores single sentences; input {i} is a pair")
    return examples


def predict(finetuned: str | Path | Finetuned, pairs: Sequence[str | Pair],
            *, batch_size: int = 128, long_text: str | None = None,
            progress: bool = False) -> list[dict[str, Any]]:
    """Score new sentences (single-sentence tasks) or ``(a, b)`` pairs with a fine-tuned model:
    ``{"label", "label_id", "probabilities": {name: p}}``, or for regression ``{"score"}`` on the
    labels' scale (STS-B: 0-5). ``long_text``: :mod:`.windows`; default: as fine-tuned.
    ``progress``: a bar for a long list (:func:`.windows.predict_texts`)."""
    ft = finetuned if isinstance(finetuned, Finetuned) else load_finetuned(finetuned)
    mode = long_text or ft.config.long_text
    enc = encode_texts(ft.tokenizer, _examples(ft.task, pairs), ft.config.max_seq_len,
                       long_text=mode)
    warn_long(enc, "predict", mode, pairs=ft.task.is_pair)
    outputs, logits = predict_texts(ft.model, ft.task, enc, pad_id=ft.tokenizer.pad_id,
                                    batch_size=batch_size, progress=progress)
    if ft.task.is_regression:
        return [{"score": float(s)} for s in outputs]
    probs = torch.from_numpy(logits).softmax(-1).numpy()
    names = ft.task.label_names
    return [{"label": names[c], "label_id": int(c),
             "probabilities": {n: float(p) for n, p in zip(names, row)}}
            for c, row in zip(outputs, probs)]


def group_texts(texts: Sequence[str], task: Task) -> list[Pair]:
    """Command-line texts as inputs: one text each, or for a task of pairs two at a time
    (``A1 B1 A2 B2 ...``); ``["-"]``: standard input, one input a line (``A`` or ``A<TAB>B``)."""
    if list(texts) == ["-"]:
        return parse_lines(sys.stdin.read(), "standard input")
    if "-" in texts:
        raise ValueError("'-' (standard input) stands alone: give texts or -, not both")
    if not task.is_pair:
        return [(t, None) for t in texts]
    if len(texts) % 2:
        raise ValueError(f"{task.display} scores sentence pairs: give A B for each input "
                         f"({len(texts)} texts given, an odd number)")
    return [(texts[i], texts[i + 1]) for i in range(0, len(texts), 2)]


def run_predict(model: str | Path, pairs: Sequence[str | Pair] = (), *,
                texts: Sequence[str] = (), file: str | Path | None = None,
                text_column: str | None = None, text_pair_column: str | None = None,
                long_text: str | None = None, progress: bool = False) -> dict[str, Any]:
    """``minielectra predict``: each input (``pairs``, ``texts`` as the command line gives them,
    or those of ``file``: :func:`.inputs.read_inputs`) with its prediction, as JSON."""
    ft = load_finetuned(model)
    if texts:
        pairs = group_texts(texts, ft.task)
    if file is not None:
        pairs = read_inputs(file, inputs=ft.task.hub_fields, pair=ft.task.is_pair,
                            text_column=text_column, text_pair_column=text_pair_column)
    pairs = [(p, None) if isinstance(p, str) else (p[0], p[1]) for p in pairs]
    rows = [{"text_a": a, "text_b": b, **p}
            for (a, b), p in zip(pairs, predict(ft, pairs, long_text=long_text,
                                                progress=progress))]
    return {"model": str(model), "task": ft.task.name, "predictions": rows}
