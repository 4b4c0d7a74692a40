"""Standalone HTML pages of the views, what ``minielectra viz`` writes: :func:`viz_text` (the
token strip of one text, or its records as JSON) and :func:`viz_run` (a run's report, checkpoint
slider and held-out calibration). A page opens offline: plotly's JavaScript is embedded once."""

from __future__ import annotations

import html
from pathlib import Path

import plotly.graph_objects as go

from ..training.checkpoints import list_checkpoints
from ..safeio import write_file
from .heldout import heldout_dataset, heldout_figure, heldout_scores, heldout_text
from .report import read_metrics, training_report
from .scoring import load_checkpoint, score_text
from .strip import hidden_pieces, learning_slider, outcome, token_strip
from .timeline import score_checkpoints

HOW_TO_READ = {
    "strip": "Each cell is a word piece the discriminator saw, coloured by its P(replaced) "
             "(blue: original, red: replaced). Replaced tokens are outlined, their original in "
             "brackets. Markers: \u25cf caught, \u2715 missed, \u25b2 false alarm. Hover for "
             "the generator's top alternatives.",
    "report": "Training (lines) and held-out (dots) curves from metrics.jsonl; the buttons "
              "switch the x axis between steps and minutes.",
    "slider": "The same corrupted sentence scored by each kept checkpoint: drag the slider to "
              "watch the discriminator learn.",
    "heldout": "Left: held-out tokens binned by P(replaced) against the fraction actually "
               "replaced (the diagonal is perfect calibration). Right: precision against recall "
               "as the threshold moves.",
}


def write_page(sections: list[tuple[str, str, go.Figure]], out: str | Path, *,
               title: str) -> Path:
    """One HTML file of ``(heading, explanation, figure)`` sections; opens offline."""
    parts = []
    for i, (heading, text, fig) in enumerate(sections):
        parts.append(f"<h2>{html.escape(heading)}</h2>\n<p>{html.escape(text)}</p>\n"
                     + fig.to_html(full_html=False, include_plotlyjs=i == 0))
    page = ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title><style>body{{font-family:sans-serif;"
            "margin:1em 2em}} p{max-width:60em}</style></head>\n<body>\n"
            f"<h1>{html.escape(title)}</h1>\n" + "\n".join(parts) + "\n</body></html>\n")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    return write_file(out, page)  # at once, and a link at ``out`` is replaced, not followed


def summary(records: list[dict]) -> dict[str, int]:
    """Counts of the strip's outcomes (threshold 0.5)."""
    kinds = [outcome(r) for r in records]
    return {"tokens": len(records), "replaced": sum(r["replaced"] for r in records),
            "caught": kinds.count("caught"), "missed": kinds.count("missed"),
            "false_alarms": kinds.count("false_alarm")}


def viz_text(checkpoint: str | Path = "bundled", text: str = "", *,
             replace: dict[int, str] | None = None, seed: int = 0, top_k: int = 5,
             words: bool = False, out: str | Path | None = None, as_json: bool = False,
             precision: str = "fp32"):
    """The token strip of ``text`` as a page at ``out`` (returns a summary), or with
    ``as_json=True`` the records themselves; scored in ``precision`` (fp32, or bf16)."""
    if not text.strip():
        raise ValueError("the text is empty: give a sentence to score (--text)")
    if out is None and not as_json:
        raise ValueError("give --out FILE.html (a page) or --json (the records)")
    if top_k < 0:
        raise ValueError(f"--top-k (top_k) must be 0 or more, got {top_k}")
    ckpt = load_checkpoint(checkpoint, precision=precision)
    records = score_text(ckpt, text, replace=replace, seed=seed, top_k=top_k)
    if as_json:
        return records
    if words:
        hidden_pieces(records, replace, name="--replace")
    how = "replaced by hand" if replace else f"generator sample, seed {seed}"
    fig = token_strip(records, words=words, title=f"{ckpt.name}: {how}")
    path = write_page([("What the discriminator thinks of each token", HOW_TO_READ["strip"],
                        fig)], out, title=f"minielectra viz: {ckpt.name}")
    return {"out": str(path), "checkpoint": str(ckpt.path), **summary(records)}


def viz_run(run_dir: str | Path, *, out: str | Path, text: str | None = None,
            replace: dict[int, str] | None = None, seed: int = 0, words: bool = False,
            heldout_examples: int | None = None, progress: bool = False,
            precision: str = "fp32") -> dict:
    """A run's page: training report, checkpoint slider (on ``text`` or the first held-out
    example), and the last checkpoint's held-out calibration and precision-recall: on all its
    held-out examples, as ``minielectra evaluate`` scores them, or ``heldout_examples`` (0: off).
    ``progress``: a bar while they are scored. ``precision``: fp32, or bf16 autocast."""
    if text is not None and not text.strip():
        raise ValueError("the text is empty: give a sentence to score (--text), or leave it out")
    if heldout_examples is not None and heldout_examples < 0:
        raise ValueError(f"--heldout-examples must be >= 0 (0 skips them), got {heldout_examples}")
    metrics = read_metrics(run_dir)
    name = Path(run_dir).name
    sections = [("Training report", HOW_TO_READ["report"],
                 training_report(metrics, title=f"{name}: metrics.jsonl"))]
    found = list_checkpoints(run_dir)
    result = {"out": str(out), "records": len(metrics), "checkpoints": [s for s, _ in found]}
    if found:
        last = load_checkpoint(found[-1][1], precision=precision)
        dataset = heldout_dataset(last) if text is None or heldout_examples != 0 else None
        text = text if text is not None else heldout_text(last, dataset=dataset)
        result["text"] = text
        frames = score_checkpoints(found, text, replace=replace, seed=seed, last=last)
        if words:
            hidden_pieces(frames[-1][1], replace, name="--replace")
        if len(frames) > 1:
            sections.append(("Learning over time", HOW_TO_READ["slider"], learning_slider(
                frames, words=words, title=f"{name}: one sentence, {len(frames)} checkpoints")))
        else:
            sections.append(("The last checkpoint on one sentence", HOW_TO_READ["strip"],
                             token_strip(frames[-1][1], words=words)))
        if heldout_examples != 0:
            s = heldout_scores(last, max_examples=heldout_examples, dataset=dataset,
                               progress=progress)
            result["heldout_auc"], result["heldout_examples"] = s["auc"], s["examples"]
            of = "" if s["examples"] == len(dataset) else f" of {len(dataset)}"
            sections.append(("Held-out calibration and precision-recall", HOW_TO_READ["heldout"],
                             heldout_figure(s["p_replaced"], s["replaced"], title=(
                                 f"step {found[-1][0]}, {s['examples']}{of} held-out examples, "
                                 f"AUC {s['auc']:.3f}"))))
    write_page(sections, out, title=f"minielectra viz: run {name}")
    return result
