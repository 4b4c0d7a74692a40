"""Calibration and precision-recall of the discriminator on held-out data.

:func:`heldout_scores` corrupts a checkpoint's held-out examples as ``minielectra evaluate`` does
(same documents, batch size and seed: its ``roc_auc`` is ``evaluate``'s ``disc_auc``). Replaced
tokens are rare (about 1 in 8), so the precision-recall curve shows what ROC-AUC hides: how many
alarms are false at a given recall.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from ..training.evaluate import (evaluate_model, examples_for, heldout_batches, roc_auc,
                                  run_config_for)
from .scoring import Checkpoint


def heldout_dataset(ckpt: Checkpoint, *, corpus: str | None = None):
    """The held-out split the checkpoint's run never trained on (or ``corpus``'s), as
    ``minielectra evaluate`` reads it."""
    return examples_for(run_config_for(ckpt.path, ckpt.model), ckpt.tokenizer, corpus)[1]


def heldout_text(ckpt: Checkpoint, *, index: int = 0, corpus: str | None = None,
                 dataset=None) -> str:
    """Held-out example ``index`` as text (its two segments joined): a sentence the run never
    trained on."""
    dataset = heldout_dataset(ckpt, corpus=corpus) if dataset is None else dataset
    if not 0 <= index < len(dataset):
        raise ValueError(f"held-out example {index} does not exist ({len(dataset)} examples)")
    ids = np.asarray(dataset.input_ids[index][:int(dataset.lengths[index])])
    return ckpt.tokenizer.decode(ids, skip_special_tokens=True)


def heldout_scores(ckpt: Checkpoint, *, max_examples: int | None = 512,
                   corpus: str | None = None, seed: int | None = None, dataset=None,
                   progress: bool = False) -> dict:
    """Every real token of the held-out examples: ``p_replaced``, ``replaced`` (labels),
    ``text`` (False for [CLS]/[SEP]) as arrays, plus ``auc``, ``examples`` and ``seed``."""
    cfg = run_config_for(ckpt.path, ckpt.model)
    seed = cfg.train.seed if seed is None else seed
    dataset = heldout_dataset(ckpt, corpus=corpus) if dataset is None else dataset
    if not len(dataset):
        raise ValueError(f"checkpoint {ckpt.name}: the held-out split is empty")
    batches = heldout_batches(dataset, batch_size=cfg.train.batch_size,
                              max_examples=max_examples, progress=progress, desc="held-out")
    r = evaluate_model(ckpt.model, batches, seed=seed, keep_tokens=True,
                       precision=ckpt.precision)
    p = torch.sigmoid(torch.from_numpy(r["token_logits"]).float()).numpy()
    return {"p_replaced": p, "replaced": r["token_replaced"], "text": r["token_text"],
            "auc": roc_auc(p, r["token_replaced"]), "examples": r["examples"], "seed": seed}


def calibration_bins(p, labels, *, bins: int = 10) -> dict[str, np.ndarray]:
    """Equal-width bins of P on [0, 1]: ``edges``, ``count``, ``mean_p`` and
    ``frac_replaced`` per bin (NaN in an empty bin)."""
    p, labels = np.asarray(p, np.float64), np.asarray(labels, bool)
    which = np.minimum((p * bins).astype(np.int64), bins - 1)
    count = np.bincount(which, minlength=bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_p = np.bincount(which, weights=p, minlength=bins) / count
        frac = np.bincount(which, weights=labels, minlength=bins) / count
    return {"edges": np.linspace(0, 1, bins + 1), "count": count, "mean_p": mean_p,
            "frac_replaced": frac}


def precision_recall(p, labels) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(precision, recall, thresholds)`` as ``sklearn.metrics.precision_recall_curve``: one
    point per distinct score (``p >= t`` flags), then (recall 0, precision 1)."""
    p, labels = np.asarray(p, np.float64), np.asarray(labels, bool)
    order = np.argsort(-p, kind="mergesort")
    p, labels = p[order], labels[order]
    last = np.r_[np.flatnonzero(np.diff(p)), p.size - 1]  # last index of each distinct score
    tp = np.cumsum(labels)[last]
    fp = last + 1 - tp
    precision = np.divide(tp, tp + fp, out=np.zeros(tp.shape), where=(tp + fp) > 0)
    recall = tp / tp[-1] if tp[-1] else np.ones(tp.shape)
    return np.r_[precision[::-1], 1.0], np.r_[recall[::-1], 0.0], p[last][::-1]


def average_precision(precision: np.ndarray, recall: np.ndarray) -> float:
    """Area under the step curve: sum over thresholds of (recall gained) x precision."""
    return float(-np.sum(np.diff(recall) * precision[:-1]))


def _thin(n: int, keep: int = 400) -> np.ndarray:
    """At most ``keep`` evenly spaced indices of ``n`` points, both ends included."""
    return np.unique(np.linspace(0, n - 1, min(n, keep)).round().astype(np.int64))


def heldout_figure(p, labels, *, bins: int = 10, title: str | None = None) -> go.Figure:
    """The reliability diagram (with the count per bin) and the precision-recall curve."""
    cal = calibration_bins(p, labels, bins=bins)
    precision, recall, _ = precision_recall(p, labels)
    ap, base = average_precision(precision, recall), float(np.mean(labels))
    fig = make_subplots(rows=1, cols=2, specs=[[{"secondary_y": True}, {}]],
                        subplot_titles=("calibration: replaced fraction per P(replaced) bin",
                                        f"precision-recall (average precision {ap:.3f})"))
    mids = (cal["edges"][:-1] + cal["edges"][1:]) / 2
    fig.add_trace(go.Bar(x=mids, y=cal["count"], width=0.8 / bins, name="tokens per bin",
                         marker_color="lightgrey", opacity=0.5), row=1, col=1, secondary_y=True)
    fig.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", name="perfectly calibrated",
                             line=dict(dash="dash", color="grey")), row=1, col=1)
    fig.add_trace(go.Scatter(x=cal["mean_p"], y=cal["frac_replaced"], mode="lines+markers",
                             name="discriminator", customdata=cal["count"],
                             hovertemplate="mean P %{x:.3f}<br>replaced %{y:.3f}<br>"
                                           "%{customdata} tokens<extra></extra>"), row=1, col=1)
    keep = _thin(len(recall))
    fig.add_trace(go.Scatter(x=recall[keep], y=precision[keep], mode="lines",
                             name="precision-recall", line=dict(shape="hv")), row=1, col=2)
    fig.add_trace(go.Scatter(x=[0, 1], y=[base, base], mode="lines", line=dict(dash="dot"),
                             name=f"chance (replaced fraction {base:.3f})"), row=1, col=2)
    fig.update_xaxes(title_text="mean P(replaced) in the bin", range=[0, 1], row=1, col=1)
    fig.update_yaxes(title_text="fraction replaced", range=[0, 1], row=1, col=1,
                     secondary_y=False)
    fig.update_yaxes(title_text="tokens", type="log", dtick=1, secondary_y=True, row=1, col=1,
                     showgrid=False)
    fig.update_xaxes(title_text="recall", range=[0, 1], row=1, col=2)
    fig.update_yaxes(title_text="precision", range=[0, 1.02], row=1, col=2)
    fig.update_layout(title=title, height=460, legend=dict(orientation="h", y=-0.2))
    return fig
