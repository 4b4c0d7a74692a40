"""From start and end logits to answers: n-best spans, best over windows, no-answer odds.

Official code: google-research/electra ``finetune/qa/qa_metrics.py`` (``write_predictions``),
after BERT. A span is a candidate when start and end are passage tokens among a window's
``n_best``, the start is scored in that window (``is_max_context``), ``start <= end`` and it is at
most ``max_answer_len`` tokens; the best over all windows is the answer, cut from the passage by
character offsets. SQuAD 2.0: ``sigmoid(null - best span)``, the null score being the smallest
``start[0] + end[0]``, is P(no answer) (``na_probs.json``); above a threshold chosen on the dev
set the answer is ``""``.

Axis letters: n sequence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .data import QAExample
from .features import Window


@dataclass
class Span:
    """One candidate answer of one question."""

    score: float  # start logit + end logit
    window: int  # index into the windows list
    start: int  # token positions in that window
    end: int
    text: str
    char_start: int


def window_candidates(start_logits: np.ndarray, end_logits: np.ndarray, window: Window, *,
                      n_best: int, max_answer_len: int) -> list[tuple[float, int, int]]:
    """``(score, start, end)`` of the valid spans among one window's n-best positions."""
    starts = np.argsort(-start_logits, kind="stable")[:n_best]  # (n_best,)
    ends = np.argsort(-end_logits, kind="stable")[:n_best]
    out = []
    for s in starts.tolist():
        if window.offsets[s] is None or not window.max_context[s]:
            continue
        for e in ends.tolist():
            if window.offsets[e] is None or e < s or e - s + 1 > max_answer_len:
                continue
            out.append((float(start_logits[s] + end_logits[e]), s, e))
    return out


def question_spans(example: QAExample, windows: list[tuple[int, Window]], logits, *,
                   n_best: int = 20, max_answer_len: int = 30) -> tuple[list[Span], float]:
    """The n-best distinct answers of one question, best first, and its null score.
    ``windows``: its ``(index, window)`` pairs; ``logits[index]``: ``(start (n,), end (n,))``."""
    spans, null = [], math.inf
    for index, win in windows:
        start, end = logits[index]
        null = min(null, float(start[0] + end[0]))
        for score, s, e in window_candidates(start, end, win, n_best=n_best,
                                             max_answer_len=max_answer_len):
            a, b = win.offsets[s][0], win.offsets[e][1]
            spans.append(Span(score, index, s, e, example.context[a:b], a))
    spans.sort(key=lambda sp: -sp.score)
    seen, best = set(), []
    for sp in spans:  # the same text from two windows (or two spans) counts once
        if sp.text not in seen:
            seen.add(sp.text)
            best.append(sp)
        if len(best) == n_best:
            break
    return best, null


def na_probability(null: float, best: Span | None) -> float:
    """``sigmoid(null - best span score)``; 1.0 when no span is valid at all."""
    if best is None:
        return 1.0
    diff = null - best.score
    return 1.0 / (1.0 + math.exp(-diff)) if diff > -700 else 0.0


def predict_answers(examples: list[QAExample], windows: list[Window], logits, *,
                    n_best: int = 20, max_answer_len: int = 30, v2: bool = False,
                    na_prob_threshold: float = 1.0) -> tuple[dict[str, str], dict[str, float]]:
    """``({id: answer}, {id: P(no answer)})`` for every question; 1.1 never abstains."""
    by_example: dict[int, list[tuple[int, Window]]] = {}
    for i, w in enumerate(windows):
        by_example.setdefault(w.example, []).append((i, w))
    answers, na_probs = {}, {}
    for k, ex in enumerate(examples):
        spans, null = question_spans(ex, by_example.get(k, []), logits, n_best=n_best,
                                     max_answer_len=max_answer_len)
        best = spans[0] if spans else None
        p = na_probability(null, best) if v2 else 0.0
        na_probs[ex.qid] = p
        answers[ex.qid] = "" if best is None or (v2 and p > na_prob_threshold) else best.text
    return answers, na_probs


def softmax(scores: list[float]) -> list[float]:
    """Probabilities of the n-best answers relative to each other (as officially reported)."""
    if not scores:
        return []
    x = np.exp(np.asarray(scores) - max(scores))
    return (x / x.sum()).tolist()
