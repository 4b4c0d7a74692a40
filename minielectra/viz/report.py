"""A run's training report from its ``metrics.jsonl``, after the run or live while it trains.

The records are ``"kind": "train"`` every ``train.log_every`` steps and ``"kind": "eval"`` at each
held-out evaluation (:mod:`minielectra.training.step`). :func:`training_report` draws six panels
against steps or minutes; :class:`LiveReport` redraws them while ``pretrain`` runs.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .show import FIGURE_WIDTH, FigureView, figure_bundle, widget_bundle

PANELS = ("losses (train: lines, held-out: dots)", "accuracy (train: lines, held-out: dots)",
          "held-out ROC-AUC", "held-out precision and recall (P > 0.5)", "learning rate",
          "tokens / s")
COLS = 2  # panels side by side: two keep every title clear of its neighbour at FIGURE_WIDTH
TITLE_SIZE = 14  # px, the panels' titles
# What an empty panel says before its first record arrives (a live run starts with none).
EMPTY = {"train": "no training record yet (one every train.log_every steps)",
         "eval": "no held-out evaluation yet (one every train.eval_every steps)"}
# (panel, record kind, key, legend name): always all of them, in this order, even when empty, so
# a live figure can be updated trace by trace.
SERIES = (
    (0, "train", "gen_loss", "generator MLM loss"),
    (0, "train", "disc_loss", "discriminator loss"),
    (0, "eval", "gen_loss", "generator MLM loss (held-out)"),
    (0, "eval", "disc_loss", "discriminator loss (held-out)"),
    (1, "train", "gen_accuracy", "generator accuracy"),
    (1, "train", "disc_accuracy", "discriminator accuracy"),
    (1, "eval", "gen_accuracy", "generator accuracy (held-out)"),
    (1, "eval", "disc_accuracy", "discriminator accuracy (held-out)"),
    (2, "eval", "disc_auc", "AUC, all tokens"),
    (2, "eval", "disc_auc_text", "AUC without [CLS]/[SEP]"),
    (3, "eval", "disc_precision", "precision"),
    (3, "eval", "disc_recall", "recall"),
    (4, "train", "lr", "learning rate"),
    (5, "train", "tokens_per_s", "tokens / s"),
)
X_AXES = {"steps": ("step", "step"), "minutes": ("elapsed_s", "minutes")}  # key, axis title


def read_metrics(run_dir: str | Path) -> list[dict]:
    """The records of ``run_dir/metrics.jsonl`` (a ``minielectra pretrain --out`` directory)."""
    run = Path(run_dir)
    path = run / "metrics.jsonl"
    if not run.is_dir():
        raise FileNotFoundError(f"run {run_dir}: no such directory")
    if not path.is_file():
        raise FileNotFoundError(f"run {run_dir}: no metrics.jsonl (is it a `minielectra "
                                "pretrain --out` directory?)")
    records = []
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise ValueError(f"{path} line {i}: not JSON ({e})") from None
    if not records:
        raise ValueError(f"run {run_dir}: metrics.jsonl has no records yet")
    return records


def bundled_auc_curve(card: str | Path | None = None) -> dict[int, float]:
    """The held-out AUC by step of the bundled model's run, from its ``MODEL_CARD.md`` (the
    ``| step |`` and ``| AUC |`` rows): a reference for where a longer run goes."""
    from ..model.storage import resolve_bundled
    path = Path(card) if card is not None else resolve_bundled("bundled") / "MODEL_CARD.md"
    rows = {}
    for line in path.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] in ("step", "AUC"):
            rows[cells[0]] = cells[1:]
    if set(rows) != {"step", "AUC"} or len(rows["step"]) != len(rows["AUC"]):
        raise ValueError(f"{path}: no '| step |' and '| AUC |' rows of equal length")
    return {int(st.replace(",", "")): float(a) for st, a in zip(rows["step"], rows["AUC"])}


def series(records: list[dict], kind: str, key: str, x: str = "steps"
           ) -> tuple[list[float], list[float]]:
    """(x, y) of one key over the records of one kind; x in steps or minutes."""
    x_key = X_AXES[x][0]
    points = [(r[x_key], r[key]) for r in records
              if r.get("kind") == kind and key in r and x_key in r]
    scale = 1 / 60 if x == "minutes" else 1
    return [p[0] * scale for p in points], [p[1] for p in points]


def _traces(records: list[dict], x: str) -> list[go.Scatter]:
    out = []
    for panel, kind, key, name in SERIES:
        xs, ys = series(records, kind, key, x)
        held_out = kind == "eval"
        out.append(go.Scatter(x=xs, y=ys, name=name, mode="lines+markers" if held_out else "lines",
                              line=dict(dash="dot" if held_out and panel < 2 else None),
                              legendgroup=str(panel), legendgrouptitle=dict(text=PANELS[panel]),
                              hovertemplate=f"{name}<br>%{{x}}: %{{y:.4g}}<extra></extra>"))
    return out


def _x_buttons(records: list[dict]) -> list[dict]:
    """Buttons that switch every panel's x between steps and minutes."""
    buttons = []
    for x, (_, title) in X_AXES.items():
        xs = [series(records, kind, key, x)[0] for _, kind, key, _ in SERIES]
        titles = {f"xaxis{i + 1 if i else ''}.title.text": title for i in range(len(PANELS))}
        buttons.append(dict(label=f"x: {x}", method="update", args=[{"x": xs}, titles]))
    return [dict(type="buttons", direction="right", x=1, xanchor="right", y=1.12,
                 yanchor="bottom", showactive=True, buttons=buttons)]


def empty_panels(records: list[dict]) -> list[bool]:
    """For each panel, whether none of its series has a point yet."""
    filled = [False] * len(PANELS)
    for panel, kind, key, _ in SERIES:
        filled[panel] |= bool(series(records, kind, key)[0])
    return [not f for f in filled]


def _empty_notes(records: list[dict]) -> list[dict]:
    """One annotation a panel, in its middle, shown while the panel is empty."""
    notes = []
    for panel, empty in enumerate(empty_panels(records)):
        axis = panel + 1 if panel else ""
        kind = "train" if any(p == panel and k == "train" for p, k, *_ in SERIES) else "eval"
        notes.append(dict(text=EMPTY[kind], name=f"empty {panel}", visible=empty,
                          xref=f"x{axis} domain", yref=f"y{axis} domain", x=0.5, y=0.5,
                          showarrow=False, font=dict(color="#777", size=12)))
    return notes


def training_report(records: list[dict], *, x: str = "steps",
                    title: str | None = None) -> go.Figure:
    """Six panels of a run's records (:func:`read_metrics`); ``x`` is "steps" or "minutes"."""
    if x not in X_AXES:
        raise ValueError(f"x must be one of {sorted(X_AXES)}, got {x!r}")
    rows = -(-len(PANELS) // COLS)
    fig = make_subplots(rows=rows, cols=COLS, subplot_titles=PANELS, horizontal_spacing=0.1,
                        vertical_spacing=0.12)
    fig.update_annotations(font_size=TITLE_SIZE)  # the subplot titles
    for (panel, *_), trace in zip(SERIES, _traces(records, x)):
        fig.add_trace(trace, row=panel // COLS + 1, col=panel % COLS + 1)
    for note in _empty_notes(records):
        fig.add_annotation(note)
    fig.update_xaxes(title_text=X_AXES[x][1])
    # The MLM loss (~1-8 nats) and the discriminator's (~0.1-0.5) share a log axis.
    fig.update_yaxes(type="log", dtick=1, row=1, col=1)
    fig.update_layout(title=title, width=FIGURE_WIDTH, height=300 + 230 * rows,
                      updatemenus=_x_buttons(records), margin=dict(t=110, l=60, r=30),
                      legend=dict(groupclick="toggleitem", orientation="h", x=0, y=-0.08,
                                  yanchor="top"))
    fig.layout.updatemenus[0].active = list(X_AXES).index(x)
    return fig


class LiveReport:
    """A :func:`training_report` in a notebook that redraws as records arrive
    (``pretrain(cfg, on_record=live)``): at most once every ``every_s`` seconds, so that a fast
    run does not spend its time drawing, and at every held-out evaluation (the run's last record
    is one)."""

    def __init__(self, records: list[dict] | None = None, *, title: str | None = None,
                 every_s: float = 1.0):
        self.records, self.title = list(records or []), title
        self.every_s, self.last_draw = every_s, float("-inf")
        self.view = FigureView(training_report(self.records, title=title))
        self.widget = self.view.widget
        self.picture = None  # the display handle of its picture, once shown

    @property
    def figure(self) -> go.Figure:
        return self.view.figure

    def __call__(self, record: dict) -> None:
        self.records.append(record)
        if record.get("kind") == "eval" or time.monotonic() - self.last_draw >= self.every_s:
            self.refresh()
        if record.get("kind") == "eval" and self.picture is not None:
            self.picture.update(figure_bundle(self.figure, interactive=False), raw=True)

    def refresh(self) -> None:
        self.view.draw(training_report(self.records, title=self.title))
        self.last_draw = time.monotonic()

    def _ipython_display_(self):  # `live` as the last line of a cell shows the figure
        from IPython.display import display
        display(widget_bundle(self.widget, "<LiveReport: the run's curves, drawn while the "
                              "notebook runs>"), raw=True)
        # Below it, a picture of the curves as of the last held-out evaluation (a run's last
        # record is one), for readers where the widget cannot be drawn: nbconvert's HTML, GitHub,
        # the notebook reopened without its kernel. Empty until the first evaluation.
        self.picture = display({"text/plain": ""}, raw=True, display_id=True)
