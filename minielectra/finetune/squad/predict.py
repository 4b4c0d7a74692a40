"""Answering a question about a passage with a fine-tuned SQuAD model.

``minielectra predict --model DIR QUESTION PASSAGE`` is :func:`run_answer`: windows and answer
exactly as in scoring (:mod:`.post`). :func:`answer` also returns the start and end probabilities
over the answer's window (what :mod:`minielectra.viz.squad` draws).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .data import QAExample
from .features import make_windows
from .train import window_logits
from .model import FinetunedQA, is_qa_model, load_qa  # noqa: F401 (is_qa_model: the CLI's)
from .post import na_probability, question_spans, softmax


def _token_view(qa: FinetunedQA, window, logits, span) -> dict[str, Any]:
    """Passage tokens of one window with P(start) and P(end) (softmax over the window)."""
    e_start, e_end = (np.exp(x - x.max()) for x in logits)  # (n,) each
    p_start, p_end = e_start / e_start.sum(), e_end / e_end.sum()
    keep = [i for i, o in enumerate(window.offsets) if o is not None]
    tokens = qa.tokenizer.convert_ids_to_tokens([window.input_ids[i] for i in keep])
    return {"tokens": tokens, "offsets": [list(window.offsets[i]) for i in keep],
            "p_start": [float(p_start[i]) for i in keep],
            "p_end": [float(p_end[i]) for i in keep],
            "p_start_null": float(p_start[0]), "p_end_null": float(p_end[0]),
            "answer_tokens": None if span is None else [keep.index(span.start),
                                                        keep.index(span.end)]}


def answer(finetuned: FinetunedQA | str | Path, question: str, context: str, *,
           top_k: int = 5) -> dict[str, Any]:
    """The answer, its character span, P(no answer), the ``top_k`` best spans and the token
    view of the window it came from."""
    qa = finetuned if isinstance(finetuned, FinetunedQA) else load_qa(finetuned)
    if not context.strip():
        raise ValueError("the passage is empty")
    ex = QAExample("q", question, context, ())
    windows = make_windows(qa.tokenizer, ex, 0, max_len=qa.config.max_seq_len,
                           stride=qa.squad.doc_stride, max_query_len=qa.squad.max_query_len)
    logits = window_logits(qa.model, windows, pad_id=qa.tokenizer.pad_id)
    spans, null = question_spans(ex, list(enumerate(windows)), logits, n_best=qa.squad.n_best,
                                 max_answer_len=qa.squad.max_answer_len)
    best = spans[0] if spans else None
    p_null = na_probability(null, best) if qa.task == "squad_v2" else 0.0
    text = "" if best is None or p_null > qa.na_prob_threshold else best.text
    probs = softmax([s.score for s in spans[:top_k]])
    shown = best.window if best is not None else 0
    return {"question": question, "answer": text,
            "start": None if not text else best.char_start,
            "end": None if not text else best.char_start + len(best.text),
            "no_answer_probability": p_null,
            "n_best": [{"text": s.text, "start": s.char_start, "score": s.score,
                        "probability": p} for s, p in zip(spans, probs)],
            "window": shown, "windows": len(windows),
            "view": _token_view(qa, windows[shown], logits[shown], best)}


def run_answer(model: str | Path, inputs: list[str], *, file=None) -> dict[str, Any]:
    """``minielectra predict`` for a SQuAD model (``inputs``: QUESTION PASSAGE): the answer as
    JSON, without the token view."""
    if file or len(inputs) != 2:
        raise ValueError(f"{model} answers a question about a passage: give QUESTION PASSAGE")
    result = answer(load_qa(model), *inputs)
    result.pop("view")
    return {"model": str(model), **result}
