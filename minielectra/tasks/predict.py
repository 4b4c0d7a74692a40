"""Fine-tuned models on disk, and scoring new sentences (or sentence pairs) with them.

A ``minielectra finetune --out DIR`` directory (:mod:`.saved`) holds everything needed to score
new text. ``minielectra predict --model DIR SENTENCE [SENTENCE_B]`` is
:func:`run_predict`; text is encoded exactly as in fine-tuning (``[CLS] A [SEP] B [SEP]``,
longest-first truncation to the run's ``max_seq_len``).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any, Sequence

import torch

from .classifier import encode, predict_batches
from .glue import Example, Task, read_text
from .saved import Finetuned, load_finetuned

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
            *, batch_size: int = 128) -> list[dict[str, Any]]:
    """Score new sentences (single-sentence tasks) or ``(a, b)`` pairs with a fine-tuned model.

    Classification: ``{"label", "label_id", "probabilities": {name: p}}``; regression:
    ``{"score"}`` on the labels' scale (STS-B: 0-5).
    """
    ft = finetuned if isinstance(finetuned, Finetuned) else load_finetuned(finetuned)
    encoded = encode(ft.tokenizer, _examples(ft.task, pairs), ft.config.max_seq_len)
    outputs, logits = predict_batches(ft.model, ft.task, encoded, pad_id=ft.tokenizer.pad_id,
                                      batch_size=batch_size)
    if ft.task.is_regression:
        return [{"score": float(s)} for s in outputs]
    probs = torch.from_numpy(logits).softmax(-1).numpy()
    names = ft.task.label_names
    return [{"label": names[c], "label_id": int(c),
             "probabilities": {n: float(p) for n, p in zip(names, row)}}
            for c, row in zip(outputs, probs)]


def read_pairs(path: str | Path) -> list[Pair]:
    """A file of inputs, one a line: sentence A, or A, a tab, and B. Read with ``QUOTE_NONE``,
    as the GLUE files are (a stray quote is text, not a field delimiter); blank lines skipped.
    A file with no input, or a line with more than two fields, is refused naming the file (and
    the 1-based line numbers)."""
    reader = csv.reader(io.StringIO(read_text(path), newline=""), delimiter="\t",
                        quoting=csv.QUOTE_NONE)  # read_text refuses binary and non-UTF-8 files
    rows = [(reader.line_num, r) for r in reader if any(r)]
    bad = [line for line, r in rows if len(r) > 2]
    if bad:
        raise ValueError(f"{path}: line(s) {bad[:5]} have more than two tab-separated fields")
    if not rows:
        raise ValueError(f"{path}: no input in the file (one sentence, or A<TAB>B, a line)")
    return [(r[0], r[1] if len(r) == 2 else None) for _, r in rows]


def run_predict(model: str | Path, pairs: Sequence[str | Pair]) -> dict[str, Any]:
    """``minielectra predict``: each input with its prediction, as JSON-ready dicts."""
    ft = load_finetuned(model)
    pairs = [(p, None) if isinstance(p, str) else (p[0], p[1]) for p in pairs]
    rows = [{"text_a": a, "text_b": b, **p} for (a, b), p in zip(pairs, predict(ft, pairs))]
    return {"model": str(model), "task": ft.task.name, "predictions": rows}
