"""Where a question-answering model thinks the answer is: P(start) and P(end) over the passage,
from the ``view`` that :func:`minielectra.finetune.squad.predict.answer` returns."""

from __future__ import annotations

import plotly.graph_objects as go

from .strip import plotly_text

START, END, SPAN = "#2166ac", "#b2182b", "rgba(255, 200, 0, 0.35)"  # blue, red, amber band


def span_figure(view: dict, *, title: str = "") -> go.Figure:
    """P(start) and P(end) as bars over the passage tokens, the chosen span shaded; P(no
    answer) at ``[CLS]`` in the legend (a 2.0 model puts its mass there when it abstains)."""
    tokens = view["tokens"]
    x = list(range(len(tokens)))
    labels = [plotly_text(t) for t in tokens]
    fig = go.Figure()
    fig.add_bar(x=x, y=view["p_start"], name=f"P(start)  ([CLS]: {view['p_start_null']:.2f})",
                marker_color=START, hovertext=labels, hoverinfo="text+y")
    fig.add_bar(x=x, y=view["p_end"], name=f"P(end)  ([CLS]: {view['p_end_null']:.2f})",
                marker_color=END, hovertext=labels, hoverinfo="text+y")
    if view.get("answer_tokens") is not None:
        first, last = view["answer_tokens"]
        fig.add_vrect(x0=first - 0.5, x1=last + 0.5, fillcolor=SPAN, line_width=0,
                      layer="below", annotation_text="answer", annotation_position="top left")
    # The legend above the plot, under the title, and head room above 1 for the span's label:
    # inside the plot either would cover bars at probability 1.
    fig.update_layout(
        title=dict(text=title, y=0.97, yanchor="top"), barmode="group", bargap=0.15, height=360,
        width=max(600, 22 * len(tokens)),
        yaxis=dict(title="probability", range=[0, 1.18], tickvals=[0, 0.5, 1]),
        xaxis=dict(tickmode="array", tickvals=x, ticktext=labels, tickangle=-60),
        legend=dict(orientation="h", x=0, y=1.02, yanchor="bottom"),
        margin=dict(l=50, r=20, t=100, b=90))
    return fig


def span_text(view: dict, *, width: int = 3) -> str:
    """The same view as plain text, one token a line, the answer's tokens marked ``>``."""
    span = view.get("answer_tokens") or (-1, -2)
    lines = [f"  {'token':<14} {'P(start)':>8} {'P(end)':>8}"]
    for i, (t, s, e) in enumerate(zip(view["tokens"], view["p_start"], view["p_end"])):
        mark = ">" if span[0] <= i <= span[1] else " "
        lines.append(f"{mark} {t:<14} {s:>8.{width}f} {e:>8.{width}f}")
    return "\n".join(lines)
