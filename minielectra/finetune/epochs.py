"""The dev set after every epoch of fine-tuning, and which epoch's model a run keeps.

:class:`EpochScores` is the ``on_epoch`` hook of :func:`.train.train_classifier`. Scoring runs in
eval mode under ``no_grad`` (no dropout, no random numbers drawn), so the run is the same with or
without it. The epoch is never chosen on the dev set that is reported: ``keep="best"`` chooses it
on training examples held out for that (``choose``); ``"last"`` is the paper's protocol.
"""

from __future__ import annotations

import time
from typing import Any, Callable


class EpochScores:
    """Score the model after each epoch; keep the best epoch's weights when asked."""

    def __init__(self, model, score: Callable[[], dict[str, float]], metric: str, *,
                 keep: str = "last", choose: Callable[[], dict[str, float]] | None = None):
        if keep == "best" and choose is None:
            raise ValueError("keep='best' needs choose: the held-out training examples that "
                             "choose the epoch (never the dev set that is reported)")
        self.model, self.score, self.metric, self.keep = model, score, metric, keep
        self.choose = choose
        self.epochs: list[dict[str, float]] = []  # each epoch's dev metrics
        self.chosen_on: list[dict[str, float]] = []  # each epoch's held-out training metrics
        self.best_state: dict | None = None
        self.seconds = 0.0  # spent scoring

    def __call__(self, epoch: int) -> None:
        t0 = time.perf_counter()
        self.epochs.append(self.score())
        if self.choose is not None:
            self.chosen_on.append(self.choose())
        self.seconds += time.perf_counter() - t0
        self.model.train()  # scoring switched to eval mode; training goes on
        if self.keep == "best" and _best(self.chosen_on, self.metric) == epoch:
            self.best_state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}

    @property
    def best_epoch(self) -> int:
        """1-based epoch with the highest dev score (the first of equals): reported, never
        used to choose the kept model."""
        return _best(self.epochs, self.metric)

    def finish(self) -> tuple[dict[str, float], dict[str, Any]]:
        """The kept epoch's dev metrics (its weights loaded back), and what the JSON says."""
        kept = _best(self.chosen_on, self.metric) if self.keep == "best" else len(self.epochs)
        if self.keep == "best" and self.best_state is not None:
            self.model.load_state_dict(self.best_state)
        self.model.eval()
        return self.epochs[kept - 1], {
            "epoch_scores": [m[self.metric] for m in self.epochs], "best_epoch": self.best_epoch,
            "kept_epoch": kept, "keep_epoch": self.keep,
            "choice_scores": [m[self.metric] for m in self.chosen_on] or None}


def _best(epochs: list[dict[str, float]], metric: str) -> int:
    """1-based epoch with the highest ``metric`` (the first of equals)."""
    scores = [m[metric] if m[metric] == m[metric] else float("-inf")
              for m in epochs]  # a NaN score (a constant prediction) is the worst
    return 1 + max(range(len(scores)), key=lambda i: (scores[i], -i))
