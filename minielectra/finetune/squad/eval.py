"""Scoring SQuAD predictions exactly as the official evaluation scripts do.

SQuAD 1.1 (``evaluate-v1.1.py``) and 2.0 (``evaluate-v2.0.py``; google-research/electra ships
both in ``finetune/qa/``); the version is taken from the data file. Answers are normalised (lower
case, no punctuation or articles, single spaces); exact match compares them, F1 their bags of
tokens, each question scoring its best gold answer. 1.1 averages over *all* questions (a missing
prediction scores 0). 2.0: an unanswerable question's gold answer is ``""``; with a no-answer
file a question above ``na_prob_thresh`` counts as "no answer", and ``best_exact``/``best_f1``
are the scores at the best threshold. A missing 2.0 prediction is left out (the official script
stops with a KeyError in ``HasAns``). Scores are percentages, as the scripts print them.
"""

from __future__ import annotations

import collections
import re
import string
import sys
from typing import Mapping

from .data import is_v2, load_file, read_json_object

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = set(string.punctuation)


def normalize_answer(s: str) -> str:
    """Lower case, no punctuation, no articles, single spaces (the official order)."""
    s = "".join(ch for ch in s.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", s).split())


def exact_match(gold: str, pred: str) -> int:
    return int(normalize_answer(gold) == normalize_answer(pred))


def f1(gold: str, pred: str, *, empty_agrees: bool = True) -> float:
    """Token F1 of the normalised answers. Two empty answers agree in 2.0 (its no-answer);
    the 1.1 script has no such rule (``empty_agrees=False``: no shared token, F1 0)."""
    g, p = normalize_answer(gold).split(), normalize_answer(pred).split()
    if empty_agrees and (not g or not p):
        return float(g == p)
    same = sum((collections.Counter(g) & collections.Counter(p)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(g)
    return 2 * precision * recall / (precision + recall)


def _questions(dataset: dict):
    for article in dataset["data"]:
        for par in article["paragraphs"]:
            yield from par["qas"]


def evaluate_v1(dataset: dict, predictions: Mapping[str, str]) -> dict[str, float]:
    """``{"exact_match", "f1"}`` in percent over all questions of ``dataset``."""
    em = total_f1 = 0.0
    total = missing = 0
    for qa in _questions(dataset):
        total += 1
        if qa["id"] not in predictions:
            missing += 1
            continue
        golds, pred = [a["text"] for a in qa["answers"]], predictions[qa["id"]]
        em += max(exact_match(g, pred) for g in golds)
        total_f1 += max(f1(g, pred, empty_agrees=False) for g in golds)
    if missing:
        print(f"{missing} unanswered question(s) receive score 0", file=sys.stderr)
    return {"exact_match": 100.0 * em / total, "f1": 100.0 * total_f1 / total}


def _raw_scores(dataset, predictions):
    exact, f1s, has_ans, missing = {}, {}, {}, 0
    for qa in _questions(dataset):
        has_ans[qa["id"]] = bool(qa["answers"])
        golds = [a["text"] for a in qa["answers"] if normalize_answer(a["text"])] or [""]
        if qa["id"] not in predictions:
            missing += 1
            continue
        pred = predictions[qa["id"]]
        exact[qa["id"]] = max(exact_match(g, pred) for g in golds)
        f1s[qa["id"]] = max(f1(g, pred) for g in golds)
    if missing:
        print(f"{missing} question(s) with no prediction, left out", file=sys.stderr)
    return exact, f1s, has_ans


def _thresholded(scores, na_probs, has_ans, thresh):
    """A question whose P(no answer) exceeds ``thresh`` scores 1 iff it has no answer."""
    return {q: float(not has_ans[q]) if na_probs[q] > thresh else s for q, s in scores.items()}


def _averages(exact, f1s, qids) -> dict[str, float]:
    return {"exact": 100.0 * sum(exact[q] for q in qids) / len(qids),
            "f1": 100.0 * sum(f1s[q] for q in qids) / len(qids), "total": len(qids)}


def best_threshold(predictions, scores, na_probs, has_ans) -> tuple[float, float]:
    """The official sweep: predict "no answer" for every question above a threshold; start with
    all abstaining (the unanswerable ones right), walk up the sorted probabilities, keep the best.
    Returns ``(score in percent, threshold)``."""
    current = best = sum(1 for q in scores if not has_ans[q])
    thresh = 0.0
    for q in sorted(na_probs, key=lambda k: na_probs[k]):
        if q not in scores:
            continue
        current += scores[q] if has_ans[q] else (-1 if predictions[q] else 0)
        if current > best:
            best, thresh = current, na_probs[q]
    return 100.0 * best / len(scores), thresh


def evaluate_v2(dataset: dict, predictions: Mapping[str, str], *,
                na_probs: Mapping[str, float] | None = None,
                na_prob_thresh: float = 1.0) -> dict[str, float]:
    """The official 2.0 keys, in percent (see the module docstring)."""
    exact_raw, f1_raw, has_ans = _raw_scores(dataset, predictions)
    if not exact_raw:
        raise ValueError("no prediction for any question of the data file")
    probs = {q: 0.0 for q in predictions} if na_probs is None else na_probs
    missing = [q for q in exact_raw if q not in probs]
    if missing:
        raise ValueError(f"the no-answer file has no probability for question {missing[0]!r} "
                         f"(and {len(missing) - 1} more)")
    exact = _thresholded(exact_raw, probs, has_ans, na_prob_thresh)
    f1s = _thresholded(f1_raw, probs, has_ans, na_prob_thresh)
    out = _averages(exact, f1s, list(exact))
    for prefix, want in (("HasAns", True), ("NoAns", False)):
        qids = [q for q in exact if has_ans[q] == want]
        if qids:
            out.update({f"{prefix}_{k}": v for k, v in _averages(exact, f1s, qids).items()})
    if na_probs is not None:
        out["best_exact"], out["best_exact_thresh"] = best_threshold(predictions, exact_raw,
                                                                     probs, has_ans)
        out["best_f1"], out["best_f1_thresh"] = best_threshold(predictions, f1_raw, probs,
                                                               has_ans)
    return out


def evaluate(dataset: dict, predictions: Mapping[str, str], *,
             na_probs: Mapping[str, float] | None = None,
             na_prob_thresh: float = 1.0) -> dict[str, float]:
    """Score ``predictions`` (``{id: answer text}``) with the script the data's version names."""
    bad = [q for q, a in predictions.items() if not isinstance(a, str)]
    if bad:
        raise ValueError(f"predictions: the answer to {bad[0]!r} is not a string")
    if is_v2(dataset):
        return evaluate_v2(dataset, predictions, na_probs=na_probs,
                           na_prob_thresh=na_prob_thresh)
    if na_probs is not None:
        raise ValueError("--na-prob-file is for SQuAD 2.0; this data file is version "
                         f"{dataset.get('version')!r}")
    return evaluate_v1(dataset, predictions)


def run_squad_eval(data_file, predictions_file, *, na_prob_file=None,
                   na_prob_thresh: float = 1.0) -> dict[str, float]:
    """``minielectra squad-eval``: the files (``.json`` or ``.json.gz``) in, the scores out."""
    squad = load_file(data_file)
    preds = read_json_object(predictions_file, "predictions ({id: answer})")
    probs = None if na_prob_file is None else read_json_object(na_prob_file,
                                                                "no-answer probabilities")
    return evaluate(squad.dataset, preds, na_probs=probs, na_prob_thresh=na_prob_thresh)
