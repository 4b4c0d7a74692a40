"""Questions and passages as model inputs: ``[CLS] question [SEP] window [SEP]``.

The official recipe (google-research/electra ``finetune/qa/qa_tasks.py``, after BERT's
``run_squad.py``): the question (at most ``max_query_len`` tokens), then a window of the passage;
windows start ``doc_stride`` tokens apart, and a token is *scored* only in the window where it has
the most context (``is_max_context``). Training labels: the first and last token of the first
answer; a window without the whole answer, or an unanswerable question, points at ``[CLS]``.

We differ from the official code, which maps tokens to characters through whitespace-split words:
each token's character span comes from the tokenizer (``encode_offsets``), so an answer is cut
from the passage exactly, accents, case and whitespace runs included.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from .data import QAExample


@dataclass
class Window:
    """One model input for one question; positions index ``input_ids``."""

    example: int  # index of the question in its list
    input_ids: list[int]
    token_type_ids: list[int]
    # (start, end) characters of the passage for each passage token; None for [CLS], the
    # question and [SEP]s, which can never be (part of) an answer
    offsets: list[tuple[int, int] | None]
    max_context: list[bool]
    start: int = 0  # the answer's first and last token (0, 0: no answer in this window)
    end: int = 0


def window_spans(n: int, room: int, stride: int) -> list[tuple[int, int]]:
    """``(first token, length)`` of each window over ``n`` passage tokens (BERT's doc_spans)."""
    if room <= 0:
        raise ValueError(f"no room for the passage: finetune.max_seq_len is too small for "
                         f"the question (room {room})")
    spans, start = [], 0
    while True:
        length = min(room, n - start)
        spans.append((start, length))
        if start + length >= n:
            return spans
        start += min(length, stride)


def max_context_windows(spans: list[tuple[int, int]], n: int) -> list[int]:
    """For each of ``n`` passage tokens, the window that gives it the most context: the largest
    ``min(tokens left, tokens right) + 0.01 * window length`` (BERT's ``_check_is_max_context``;
    ties go to the earlier window)."""
    best, best_score = [0] * n, [-1.0] * n
    for w, (start, length) in enumerate(spans):
        end = start + length - 1
        for p in range(start, end + 1):
            score = min(p - start, end - p) + 0.01 * length
            if score > best_score[p]:
                best[p], best_score[p] = w, score
    return best


def answer_tokens(offsets: list[tuple[int, int]], start: int, text: str) -> tuple[int, int]:
    """First and last passage token overlapping characters ``[start, start + len(text))``."""
    end = start + len(text)
    covering = [i for i, (a, b) in enumerate(offsets) if a < end and b > start]
    if not covering:
        raise ValueError(f"answer {text!r} at {start} covers no token of the passage")
    return covering[0], covering[-1]


@functools.lru_cache(maxsize=64)
def _encode_context(tokenizer, context: str):
    """A passage's ids and offsets (shared, not to be changed): a passage has several
    questions, which come one after another, so each passage is encoded once."""
    return tokenizer.encode_offsets(context)


def make_windows(tokenizer, example: QAExample, index: int, *, max_len: int, stride: int,
                 max_query_len: int = 64, training: bool = False) -> list[Window]:
    """Every window of one question (with labels when ``training``)."""
    q_ids = tokenizer.encode(example.question)[:max_query_len]
    ids, offsets = _encode_context(tokenizer, example.context)
    if not ids:
        raise ValueError(f"question {example.qid}: the context has no tokens")
    spans = window_spans(len(ids), max_len - len(q_ids) - 3, stride)
    owner = max_context_windows(spans, len(ids))
    answer = None
    if training and not example.is_impossible:
        try:
            answer = answer_tokens(offsets, example.answers[0][1], example.answers[0][0])
        except ValueError as e:
            raise ValueError(f"question {example.qid}: {e}") from None
    head = [tokenizer.cls_id] + q_ids + [tokenizer.sep_id]
    windows = []
    for w, (first, length) in enumerate(spans):
        part = range(first, first + length)
        win = Window(index, head + [ids[i] for i in part] + [tokenizer.sep_id],
                     [0] * len(head) + [1] * (length + 1),
                     [None] * len(head) + [offsets[i] for i in part] + [None],
                     [False] * len(head) + [owner[i] == w for i in part]
                     + [False])
        if answer is not None and first <= answer[0] and answer[1] < first + length:
            win.start, win.end = (p - first + len(head) for p in answer)
        windows.append(win)
    return windows


def make_all_windows(tokenizer, examples: list[QAExample], *, max_len: int, stride: int,
                     max_query_len: int = 64, training: bool = False) -> list[Window]:
    return [w for i, e in enumerate(examples)
            for w in make_windows(tokenizer, e, i, max_len=max_len, stride=stride,
                                  max_query_len=max_query_len, training=training)]
