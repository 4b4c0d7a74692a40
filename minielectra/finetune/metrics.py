"""GLUE metrics as the ELECTRA paper reports them (section 3.1), in plain numpy.

Matthews correlation for CoLA, Spearman correlation for STS-B, accuracy for everything else (MRPC
and QQP also F1, STS-B Pearson). No scipy or scikit-learn at run time; the tests compare with them.
"""

from __future__ import annotations

import numpy as np

from .task import Task

def accuracy(preds, labels) -> float:
    preds, labels = np.asarray(preds), np.asarray(labels)
    return float(np.mean(preds == labels))


def f1_score(preds, labels, *, positive: int = 1) -> float:
    """Binary F1 of class ``positive``; 0 when there is no true or predicted positive."""
    preds, labels = np.asarray(preds) == positive, np.asarray(labels) == positive
    tp = np.sum(preds & labels)
    denom = 2 * tp + np.sum(preds & ~labels) + np.sum(~preds & labels)
    return float(2 * tp / denom) if denom else 0.0


def matthews_corr(preds, labels) -> float:
    """Matthews correlation (the multi-class form of Gorodkin 2004, equal to the binary phi
    coefficient for two classes); 0 when either side is constant, as scikit-learn does."""
    preds, labels = np.asarray(preds), np.asarray(labels)
    classes, idx = np.unique(np.concatenate([labels, preds]), return_inverse=True)
    k, n = len(classes), len(labels)
    confusion = np.zeros((k, k), dtype=np.float64)
    np.add.at(confusion, (idx[:n], idx[n:]), 1)
    t, p = confusion.sum(1), confusion.sum(0)  # true and predicted count per class
    c, s = np.trace(confusion), float(n)
    cov_tp, cov_pp, cov_tt = c * s - t @ p, s * s - p @ p, s * s - t @ t
    return float(cov_tp / np.sqrt(cov_tt * cov_pp)) if cov_tt * cov_pp > 0 else 0.0


def pearson(x, y) -> float:
    """Pearson correlation; 0 when either side is constant (e.g. a collapsed regressor)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    x, y = x - x.mean(), y - y.mean()
    denom = np.sqrt((x @ x) * (y @ y))
    return float(x @ y / denom) if denom > 0 else 0.0


def rankdata(x) -> np.ndarray:
    """Ranks from 1, ties sharing their average rank (scipy's ``rankdata(method='average')``)."""
    x = np.asarray(x)
    order = np.argsort(x, kind="mergesort")
    sorted_x = x[order]
    # Each run of equal values gets the mean of the ranks it spans: (first + last) / 2.
    starts = np.flatnonzero(np.r_[True, sorted_x[1:] != sorted_x[:-1]])
    ends = np.r_[starts[1:], len(x)]
    ranks = np.empty(len(x), dtype=np.float64)
    for s, e in zip(starts, ends):
        ranks[order[s:e]] = (s + 1 + e) / 2
    return ranks


def spearman(x, y) -> float:
    return pearson(rankdata(x), rankdata(y))


METRICS = {"accuracy": accuracy, "f1": f1_score, "matthews_corr": matthews_corr,
           "pearson": pearson, "spearman": spearman}

# The paper's words for the metrics (section 3.1: "Spearman correlation for STS, Matthews
# correlation for CoLA, and accuracy for the other GLUE tasks"): the ``metric`` of the JSON.
METRIC_NAMES = {"matthews_corr": "Matthews correlation", "spearman": "Spearman correlation",
                "accuracy": "accuracy", "f1": "F1", "pearson": "Pearson correlation"}


def compute_metrics(task: Task, predictions, labels) -> dict[str, float]:
    """Every metric of ``task``, in percent (GLUE's convention: 100 x the value)."""
    return {m: 100.0 * METRICS[m](predictions, labels) for m in task.metrics}
