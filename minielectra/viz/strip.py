"""Records in, figures out: the token strip, the batch heatmap and the checkpoint slider.

Pure functions of :mod:`.scoring`'s records, so a test can hand them any records. In the strip a
replaced token is outlined, its original under it, and a marker says how the discriminator did so
that no reader depends on colour alone: ``●`` caught, ``✕`` missed, ``▲`` false alarm.
"""

from __future__ import annotations

import html

import plotly.graph_objects as go

from .show import FIGURE_WIDTH

THRESHOLD = 0.5  # P(replaced) above this counts as "replaced", as in `minielectra evaluate`
# Blue = original, red = replaced, white = unsure: the scale's midpoint is the threshold.
COLORSCALE = "RdBu_r"
MARKER_OFFSET = (-0.36, -0.3)  # (x, y) of an outcome marker from its cell's centre: top left
OUTCOMES = {  # outcome -> (marker symbol, legend name)
    "caught": ("circle", "caught: replaced, P > 0.5"),
    "missed": ("x", "missed: replaced, P \u2264 0.5"),
    "false_alarm": ("triangle-up", "false alarm: original, P > 0.5"),
}
# A marker sits on cells from dark blue to dark red: black on either vanishes, white on white
# does too. Yellow with a black rim shows on all of them, and the legend draws it the same way.
MARKER_FILL, MARKER_LINE = "#ffd92f", "#000000"
FONT_SIZE, MIN_FONT_SIZE = 14, 10  # px: a strip's cell text, and the smallest before cutting
BATCH_FONT_SIZE = 12  # px: a batch heatmap's cells (32 px rows: two lines of 12 px and a gap)
PUNCT_SCALE = 1.7  # a lone punctuation mark, this many times the cell's font size
CHAR_EM = 0.62  # a character's width in em, generous for plotly's sans-serif fonts
STRIP_PLOT_WIDTH = FIGURE_WIDTH - 110  # px: the figure less its margins and the colour bar


def outcome(record: dict, threshold: float = THRESHOLD) -> str | None:
    """``"caught"``, ``"missed"``, ``"false_alarm"``, or None for a correctly kept original."""
    flagged = record["p_replaced"] > threshold
    if record["replaced"]:
        return "caught" if flagged else "missed"
    return "false_alarm" if flagged else None


def join_words(records: list[dict]) -> list[dict]:
    """One record per word (P: its most suspicious piece's); ``pieces`` keeps the pieces."""
    words: list[dict] = []
    for r in records:
        if words and words[-1]["word"] == r["word"]:
            words[-1]["pieces"].append(r)
        else:
            words.append({"word": r["word"], "position": r["position"], "pieces": [r]})
    for w in words:
        ps = w["pieces"]
        w.update(token="".join(p["token"].removeprefix("##") for p in ps),
                 original="".join(p["original"].removeprefix("##") for p in ps),
                 p_replaced=max(p["p_replaced"] for p in ps),
                 replaced=any(p["replaced"] for p in ps), masked=any(p["masked"] for p in ps),
                 hand=any(p["hand"] for p in ps), top_k=[])
    return words


def hidden_pieces(records: list[dict], replace: dict[int, str] | None, *,
                  name: str = "--replace") -> None:
    """Refuse a replacement by hand that joined word pieces would hide: one inside a word of
    several pieces (``8=river`` in "bo ##ring" would show as "boriver")."""
    for pos, new in sorted((replace or {}).items()):
        piece = records[pos - 1]
        pieces = [r for r in records if r["word"] == piece["word"]]
        if len(pieces) > 1:
            word = "".join(r["original"].removeprefix("##") for r in pieces)
            raise ValueError(
                f"{name} {pos}={new}: position {pos} is the piece {piece['original']!r} of the "
                f"word {word!r} (positions {pieces[0]['position']}-{pieces[-1]['position']}), "
                "which joined word pieces show as one cell; show the word pieces to replace one "
                "of them, or replace a word of one piece")


def plotly_text(text: str) -> str:
    """``text`` escaped for plotly's HTML subset; quotes kept (it shows ``&quot;`` literally)."""
    return html.escape(text, quote=False)


def fit_label(text: str, *, cell_px: float, font_size: int = FONT_SIZE,
              italic: bool = False, large_marks: bool = True) -> str:
    """``text`` sized for a cell ``cell_px`` wide: a long word smaller, then cut with "…"; a lone
    punctuation mark bold, and large (a ``.`` at 14 px is a speck) unless ``large_marks`` is
    off."""
    room = 0.9 * cell_px / CHAR_EM  # characters x font size (px) that fit
    size = font_size
    if len(text) * size > room:
        size = max(min(MIN_FONT_SIZE, font_size), int(room / len(text)))
        if len(text) * size > room:
            text = text[:max(1, int(room / size) - 1)] + "\u2026"
    label = plotly_text(text)
    if italic:
        label = f"<i>{label}</i>"
    elif len(text) <= 2 and not any(ch.isalnum() for ch in text):
        size = round(PUNCT_SCALE * font_size) if large_marks else font_size
        label = f"<b>{label}</b>"
    return label if size == font_size else f"<span style=\"font-size:{size}px\">{label}</span>"


def hover_text(record: dict) -> str:
    """What hovering over a cell shows (plotly's HTML subset), for a piece or a joined word."""
    esc = plotly_text
    pieces = record.get("pieces", [record])
    where = (f"positions {pieces[0]['position']}-{pieces[-1]['position']}" if len(pieces) > 1
             else f"position {record['position']}")
    lines = [f"<b>{esc(record['token'])}</b>  ({where})",
             f"P(replaced) = {record['p_replaced']:.3f}"]
    lines.append(f"replaced by {'hand' if record['hand'] else 'the generator'}, original: "
                 f"<b>{esc(record['original'])}</b>" if record["replaced"] else "original token")
    for p in record.get("pieces", [record]):
        if p["top_k"]:
            alts = ", ".join(f"{esc(a['token'])} {a['p']:.2f}" for a in p["top_k"])
            lines.append(f"generator at {esc(p['original'])}: {alts}")
    return "<br>".join(lines)


def cell_text(record: dict, *, cell_px: float = STRIP_PLOT_WIDTH / 12,
              font_size: int = FONT_SIZE) -> str:
    """The cell's label: the token, and under it the original when it was replaced."""
    if not record["replaced"]:
        return fit_label(record["token"], cell_px=cell_px, font_size=font_size)
    # Two lines fill the row: a mark drawn large would push the line box up past the cell's top,
    # where a high mark (a quote) is lost under the cell's outline.
    token = fit_label(record["token"], cell_px=cell_px, font_size=font_size, large_marks=False)
    original = fit_label(f"({record['original']})", cell_px=cell_px, font_size=font_size,
                         italic=True)
    return f"{token}<br>{original}"


def wrap(records: list[dict], per_row: int) -> list[tuple[int, int]]:
    """(row, column) of each record, ``per_row`` a row, a word broken only if longer than a row."""
    cells, row, col = [], 0, 0
    for i, r in enumerate(records):
        starts_word = i == 0 or records[i - 1]["word"] != r["word"]
        length = sum(1 for x in records[i:] if x["word"] == r["word"]) if starts_word else 1
        if col and (col + (length if length <= per_row else 1) > per_row):
            row, col = row + 1, 0
        cells.append((row, col))
        col += 1
    return cells


def strip_traces(records: list[dict], cells: list[tuple[int, int]], *,
                 threshold: float = THRESHOLD, per_row: int = 12) -> list[go.BaseTraceType]:
    """The heatmap of cells plus one marker trace per outcome (always all three, maybe empty, so
    that slider frames line up trace by trace)."""
    rows, cols = max(r for r, _ in cells) + 1, max(c for _, c in cells) + 1
    z = [[None] * cols for _ in range(rows)]
    text = [[""] * cols for _ in range(rows)]
    hover = [[""] * cols for _ in range(rows)]
    cell_px = STRIP_PLOT_WIDTH / per_row
    for rec, (r, c) in zip(records, cells):
        z[r][c], hover[r][c] = rec["p_replaced"], hover_text(rec)
        text[r][c] = cell_text(rec, cell_px=cell_px)
    traces = [go.Heatmap(z=z, text=text, texttemplate="%{text}", hovertext=hover,
                         hovertemplate="%{hovertext}<extra></extra>", zmin=0, zmax=1,
                         colorscale=COLORSCALE, xgap=3, ygap=3, name="P(replaced)",
                         textfont=dict(size=FONT_SIZE),
                         colorbar=dict(title=dict(text="P(replaced)"), thickness=14))]
    dx, dy = MARKER_OFFSET
    for name, (symbol, label) in OUTCOMES.items():
        hits = [(c + dx, r + dy, hover_text(rec)) for rec, (r, c) in zip(records, cells)
                if outcome(rec, threshold) == name]
        hits = hits or [(None, None, "")]  # an empty trace would drop out of the legend
        traces.append(go.Scatter(
            x=[h[0] for h in hits], y=[h[1] for h in hits], mode="markers", name=label,
            hovertext=[h[2] for h in hits], hovertemplate="%{hovertext}<extra></extra>",
            marker=dict(symbol=symbol, size=11, color=MARKER_FILL,
                        line=dict(width=1.5, color=MARKER_LINE))))
    return traces


def replaced_outlines(records: list[dict], cells: list[tuple[int, int]]) -> list[dict]:
    """A black rectangle around every replaced cell (layout shapes)."""
    return [dict(type="rect", x0=c - 0.47, x1=c + 0.47, y0=r - 0.47, y1=r + 0.47,
                 line=dict(color="black", width=3), layer="above")
            for rec, (r, c) in zip(records, cells) if rec["replaced"]]


def _strip_layout(fig: go.Figure, rows: int, cols: int, title: str | None) -> go.Figure:
    fig.update_xaxes(visible=False, range=[-0.5, cols - 0.5])
    fig.update_yaxes(visible=False, range=[rows - 0.5, -0.62])  # row 0 on top
    # A fixed width: the labels are sized for cells of STRIP_PLOT_WIDTH / cols.
    fig.update_layout(title=title, width=FIGURE_WIDTH, height=150 + 64 * rows,
                      plot_bgcolor="white", showlegend=True,
                      margin=dict(l=10, r=10, t=60 if title else 20, b=10),
                      legend=dict(orientation="h", yanchor="top", y=-0.02, x=0))
    return fig


def token_strip(records: list[dict], *, words: bool = False, per_row: int = 12,
                threshold: float = THRESHOLD, title: str | None = None) -> go.Figure:
    """The per-token view of one corrupted text; ``words=True`` joins pieces into words."""
    items = join_words(records) if words else records
    cells = wrap(items, per_row)
    fig = go.Figure(strip_traces(items, cells, threshold=threshold, per_row=per_row))
    for shape in replaced_outlines(items, cells):
        fig.add_shape(**shape)
    return _strip_layout(fig, max(r for r, _ in cells) + 1, per_row, title)


def batch_heatmap(batch: list[list[dict]], *, labels: list[str] | None = None,
                  show_tokens: bool | None = None, title: str | None = None) -> go.Figure:
    """P(replaced) of several texts (:func:`.scoring.score_texts`): a column per text (wide
    enough for a word), a row per position; the replaced pieces outlined. Tokens are written in
    the cells up to 60 positions (``show_tokens`` overrides)."""
    n = max(len(recs) for recs in batch)
    labels = labels or [f"text {i + 1}" for i in range(len(batch))]
    cols = range(len(batch))
    pad = lambda rows, fill: [r + [fill] * (n - len(r)) for r in rows]  # noqa: E731
    z = pad([[r["p_replaced"] for r in recs] for recs in batch], None)
    cell_px = (FIGURE_WIDTH - 180) / len(batch)  # less the margins and the colour bar
    text = pad([[cell_text(r, cell_px=cell_px, font_size=BATCH_FONT_SIZE) for r in recs]
                for recs in batch], "")
    hover = pad([[hover_text(r) for r in recs] for recs in batch], "")
    show = n <= 60 if show_tokens is None else show_tokens
    t = lambda rows: [list(row) for row in zip(*rows)]  # noqa: E731  (texts -> columns)
    fig = go.Figure(go.Heatmap(
        z=t(z), x=list(cols), y=list(range(1, n + 1)), text=t(text),
        texttemplate="%{text}" if show else None, textfont=dict(size=BATCH_FONT_SIZE),
        hovertext=t(hover),
        hovertemplate="%{hovertext}<extra></extra>", zmin=0, zmax=1, colorscale=COLORSCALE,
        xgap=2, ygap=2, colorbar=dict(title=dict(text="P(replaced)"), thickness=14)))
    for col, recs in zip(cols, batch):  # outlines drawn around the cell: its text stays visible
        for r in recs:
            if r["replaced"]:
                fig.add_shape(type="rect", x0=col - 0.48, x1=col + 0.48, y0=r["position"] - 0.46,
                              y1=r["position"] + 0.46, line=dict(color="black", width=2.5))
    fig.add_trace(go.Scatter(  # a legend entry for the outlines (shapes have none)
        x=[None], y=[None], mode="markers", name="replaced (ground truth): black outline",
        marker=dict(symbol="square-open", size=14, color="black", line=dict(width=2.5))))
    fig.update_xaxes(tickvals=list(cols), ticktext=labels, side="top", tickfont=dict(size=13))
    fig.update_yaxes(autorange="reversed", title="position (word piece)", dtick=1 if n <= 60
                     else None, tickfont=dict(size=11))
    fig.update_layout(title=title, width=FIGURE_WIDTH, height=200 + 32 * n, plot_bgcolor="white",
                      margin=dict(t=110, l=70, r=20, b=20), showlegend=True,
                      legend=dict(orientation="h", yanchor="bottom", y=1.06, x=1,
                                  xanchor="right"))  # the title is on the left
    return fig


def replaced_cells(fig: go.Figure) -> set[tuple[int, int]]:
    """(column, position) of the cells a :func:`batch_heatmap` outlines."""
    return {(round((s.x0 + s.x1) / 2), round((s.y0 + s.y1) / 2)) for s in fig.layout.shapes}


def restyle_args(traces: list[go.BaseTraceType]) -> dict:
    """A ``Plotly.restyle`` update that turns the strip's traces into ``traces`` (same layout)."""
    heat, *marks = traces
    return {"z": [heat.z] + [None] * len(marks), "text": [heat.text] + [None] * len(marks),
            "hovertext": [heat.hovertext] + [m.hovertext for m in marks],
            "x": [None] + [m.x for m in marks], "y": [None] + [m.y for m in marks]}


def learning_slider(frames: list[tuple[int, list[dict]]], *, words: bool = False,
                    per_row: int = 12, title: str | None = None) -> go.Figure:
    """One corrupted text as successive checkpoints saw it (``frames``: ``[(step, records)]``).

    The slider's steps restyle rather than animate plotly frames: a page or notebook that
    auto-plays frames draws heatmaps blank, and a restyle looks the same in every renderer.
    """
    if not frames:
        raise ValueError("learning_slider needs at least one checkpoint")
    items = [(step, join_words(recs) if words else recs) for step, recs in frames]
    cells = wrap(items[0][1], per_row)
    states = [strip_traces(recs, cells, per_row=per_row) for _, recs in items]
    fig = go.Figure(states[0])
    for shape in replaced_outlines(items[0][1], cells):  # the corruption is the same throughout
        fig.add_shape(**shape)
    steps = [dict(method="restyle", label=str(step), args=[restyle_args(traces)])
             for (step, _), traces in zip(items, states)]
    _strip_layout(fig, max(r for r, _ in cells) + 1, per_row, title)
    fig.update_layout(height=fig.layout.height + 90, sliders=[dict(
        active=0, steps=steps, currentvalue=dict(prefix="checkpoint at step "),
        pad=dict(t=50))])
    return fig
