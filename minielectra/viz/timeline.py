"""Learning over time: one corrupted sentence scored by every kept checkpoint of a run.

The sentence is corrupted once (by hand, or by the *last* checkpoint's generator) and every
checkpoint scores that same text, so only the model changes from frame to frame; each frame's
``top_k`` is that checkpoint's own generator (the generator learns too).
"""

from __future__ import annotations

from pathlib import Path

import plotly.graph_objects as go

from ..training.checkpoints import list_checkpoints
from .scoring import Checkpoint, corrupt_text, load_checkpoint, records, score
from .strip import learning_slider


def run_checkpoints(run_dir: str | Path) -> list[tuple[int, Path]]:
    """A run's complete checkpoints as ``(step, path)``, oldest first; refused when none."""
    found = list_checkpoints(run_dir)
    if not found:
        raise FileNotFoundError(f"run {run_dir}: no checkpoints/step_* in it")
    return found


def score_checkpoints(checkpoints: list[tuple[int, Path]], text: str, *,
                      replace: dict[int, str] | None = None, seed: int = 0,
                      top_k: int = 5, last: Checkpoint | None = None
                      ) -> list[tuple[int, list[dict]]]:
    """``[(step, records)]``: the text, corrupted once, scored by each checkpoint in turn.
    ``last``: the last checkpoint, when the caller has it loaded already."""
    if not checkpoints:
        raise ValueError("score_checkpoints needs at least one checkpoint")
    last = load_checkpoint(checkpoints[-1][1]) if last is None else last
    enc, corruption = corrupt_text(last, text, replace=replace, seed=seed)
    frames = []
    for step, path in checkpoints:
        ckpt = last if path == checkpoints[-1][1] else load_checkpoint(
            path, precision=last.precision)
        if ckpt.tokenizer.tokens != last.tokenizer.tokens:
            raise ValueError(f"{path} has another vocabulary than {checkpoints[-1][1]}")
        with ckpt.autocast():
            scores = score(ckpt.model, enc, corruption, top_k=top_k)
        frames.append((step, records(ckpt.tokenizer, enc, corruption, scores)[0]))
    return frames


def learning_over_time(run_dir: str | Path, text: str, *, replace: dict[int, str] | None = None,
                       seed: int = 0, words: bool = False, top_k: int = 5) -> go.Figure:
    """The token strip with a slider over the run's checkpoints (:func:`.strip.learning_slider`)."""
    frames = score_checkpoints(run_checkpoints(run_dir), text, replace=replace, seed=seed,
                               top_k=top_k)
    how = "by hand" if replace else f"by the last checkpoint's generator, seed {seed}"
    return learning_slider(frames, words=words,
                           title=f"one sentence through {len(frames)} checkpoints (corrupted "
                                 f"{how})")
