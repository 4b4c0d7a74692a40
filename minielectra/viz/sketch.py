"""A static SVG of a plotly figure, drawn in Python: the picture a notebook keeps beside an
interactive figure for readers where no JavaScript runs (``jupyter nbconvert --to html``, GitHub),
on any machine, offline, in milliseconds.

It draws what the course's figures use, in the figure's own layout: heatmaps with their cell text
and colour bar, lines and markers, bars, subplots and a second y axis, log and reversed axes, the
title, a legend, annotations and rectangles. Not plotly's exact look: where a Chromium is at hand,
:func:`.browser.figure_png` draws the figure with plotly.js itself.
"""

from __future__ import annotations

import plotly.graph_objects as go

from .sketch_axes import Axis, colour_at, fmt, ink_on, nice_ticks, plain, seq, text_svg

COLORWAY = ("#636efa", "#EF553B", "#00cc96", "#ab63fa", "#FFA15A", "#19d3f3", "#FF6692")
MARGIN = {"l": 80, "r": 80, "t": 100, "b": 80}  # plotly's defaults
COLORBAR_PX, LEGEND_ROW_PX = 70, 18  # a colour bar's room (right margin), a legend row (below)
FONT = 'font-family="Open Sans, Arial, sans-serif"'


def _trace_values(trace, letter: str) -> list:
    """The values a trace puts on its ``letter`` ("x" or "y") axis, for the axis's range."""
    values = seq(getattr(trace, letter))
    if trace.type == "heatmap":
        z = seq(trace.z) or [[]]
        count = len(z[0]) if letter == "x" else len(z)
        values = values or list(range(count))
        nums = [v for v in values if not isinstance(v, str)]
        return [v + d for v in nums for d in (-0.5, 0.5)] + [v for v in values
                                                             if isinstance(v, str)]
    if not values:
        values = list(range(len(seq(getattr(trace, "y" if letter == "x" else "x")))))
    value_axis = "x" if trace.type == "bar" and trace.orientation == "h" else "y"
    if trace.type == "bar" and letter == value_axis:
        values.append(0)
    return values


# ------------------------------------------------------------------------------- the frame
class Canvas:
    """The figure's size and margins, and the pixel box of a domain in paper coordinates."""

    def __init__(self, fig: go.Figure, size: tuple[int, int]):
        layout = fig.layout
        self.width = int(layout.width or size[0])
        self.height = int(layout.height or size[1])
        m = layout.margin
        self.m = {k: (getattr(m, k) if getattr(m, k) is not None else v)
                  for k, v in MARGIN.items()}

    def px_x(self, x: float) -> float:
        return self.m["l"] + x * (self.width - self.m["l"] - self.m["r"])

    def px_y(self, y: float) -> float:
        return self.m["t"] + (1 - y) * (self.height - self.m["t"] - self.m["b"])


def axes_of(fig: go.Figure, canvas: Canvas) -> dict[str, Axis]:
    """Every axis a trace uses, ``"x"``, ``"y2"``..., each over its domain."""
    used: dict[str, list] = {}
    for t in fig.data:
        for letter in ("x", "y"):
            ref = getattr(t, f"{letter}axis", None) or letter
            used.setdefault(ref, []).extend(_trace_values(t, letter))
    axes = {}
    for ref, values in used.items():
        spec = fig.layout[ref[0] + "axis" + ref[1:]]
        main = fig.layout[spec.overlaying[0] + "axis" + spec.overlaying[1:]] \
            if spec.overlaying else spec
        lo, hi = main.domain or (0, 1)
        if ref[0] == "x":
            axes[ref] = Axis(spec, canvas.px_x(lo), canvas.px_x(hi), values, vertical=False)
        else:
            axes[ref] = Axis(spec, canvas.px_y(lo), canvas.px_y(hi), values, vertical=True)
    return axes


def draw_axes(fig: go.Figure, axes: dict[str, Axis]) -> list[str]:
    """Grid lines, tick labels and titles; a y axis on the right where it says so."""
    parts = []
    for ref, ax in axes.items():
        if ax.spec.visible is False:
            continue
        other = axes.get(ax.spec.anchor if ax.spec.anchor not in (None, "free") else
                         ("y" if ref[0] == "x" else "x"))
        if ax.spec.overlaying:
            other = axes.get(fig.layout[ax.spec.overlaying[0] + "axis"
                                        + ax.spec.overlaying[1:]].anchor or "x") or other
        if other is None:
            continue
        parts += _axis_svg(ax, other)
    return parts


def _axis_svg(ax: Axis, other: Axis) -> list[str]:
    """An axis along the edge of the plot area that ``other`` spans (the far edge: right, top)."""
    parts, size = [], (ax.spec.tickfont.size or 12)
    far = ax.spec.side in ("right", "top")
    lo, hi = sorted((other.lo_px, other.hi_px))
    edge = (hi if far else lo) if ax.vertical else (lo if far else hi)
    title = plain(ax.spec.title.text) if ax.spec.title and ax.spec.title.text else ""
    for p, label in ax.ticks():
        if ax.vertical:
            if not ax.spec.overlaying and ax.spec.showgrid is not False:
                parts.append(f'<line x1="{other.lo_px:.1f}" x2="{other.hi_px:.1f}" '
                             f'y1="{p:.1f}" y2="{p:.1f}" stroke="#e5ecf6"/>')
            x = edge + 6 if far else edge - 6
            parts.append(text_svg(x, p, label, size=size, anchor="start" if far else "end"))
        else:
            parts.append(f'<line x1="{p:.1f}" x2="{p:.1f}" y1="{other.lo_px:.1f}" '
                         f'y2="{other.hi_px:.1f}" stroke="#e5ecf6"/>')
            parts.append(text_svg(p, edge - 10 if far else edge + 12, label, size=size))
    if title and ax.vertical:
        x = edge + 50 if far else max(edge - 50, 14)  # a narrow margin: at the figure's edge
        mid = (ax.lo_px + ax.hi_px) / 2
        parts.append(text_svg(0, 0, title, size=13, extra=f'transform="translate({x:.1f},'
                                                            f'{mid:.1f}) rotate(-90)"'))
    elif title:
        parts.append(text_svg((ax.lo_px + ax.hi_px) / 2, edge - 30 if far else edge + 34,
                              title, size=13))
    return parts


# ------------------------------------------------------------------------------- the traces
def heatmap_svg(t, ax: Axis, ay: Axis) -> list[str]:
    z = seq(t.z)
    xs = seq(t.x) or list(range(len(z[0]) if z else 0))
    ys = seq(t.y) or list(range(len(z)))
    text = seq(t.text) if t.text is not None and not isinstance(t.text, str) else None
    flat = [v for row in z for v in row if v is not None]
    lo = t.zmin if t.zmin is not None else min(flat, default=0)
    hi = t.zmax if t.zmax is not None else max(flat, default=1)
    show_text = text is not None and "%{text}" in (t.texttemplate or "")
    size = (t.textfont.size if t.textfont and t.textfont.size else 12)
    parts = []
    for i, row in enumerate(z):
        y0, y1 = ay.span(ys[i], 0.5)
        for j, v in enumerate(row):
            if v is None:
                continue
            x0, x1 = ax.span(xs[j], 0.5)
            fill = colour_at(t.colorscale, (v - lo) / ((hi - lo) or 1))
            gx, gy = (t.xgap or 0) / 2, (t.ygap or 0) / 2
            parts.append(f'<rect x="{x0 + gx:.1f}" y="{y0 + gy:.1f}" '
                         f'width="{max(x1 - x0 - 2 * gx, 0):.1f}" '
                         f'height="{max(y1 - y0 - 2 * gy, 0):.1f}" fill="{fill}"/>')
            if show_text and text[i][j]:
                parts.append(text_svg((x0 + x1) / 2, (y0 + y1) / 2, text[i][j], size=size,
                                      color=ink_on(fill)))
    return parts


MARKS = {"x": "M-4,-4L4,4M-4,4L4,-4", "triangle-up": "M0,-5L5,4H-5Z", "square": "M-4,-4H4V4H-4Z"}


def scatter_svg(t, ax: Axis, ay: Axis, color: str) -> list[str]:
    ys = seq(t.y)
    xs = seq(t.x) or list(range(len(ys)))
    pts = [(ax.px(x), ay.px(y)) if x is not None and y is not None else None
           for x, y in zip(xs, ys)]
    mode, parts = t.mode or ("lines+markers" if len(ys) < 20 else "lines"), []
    line_color = (t.line.color if t.line and t.line.color else color)
    if "lines" in mode:
        dash = {"dot": "2,3", "dash": "6,4", "dashdot": "6,3,2,3"}.get(t.line.dash or "", "")
        runs, run = [], []
        for p in pts + [None]:
            if p is None or None in p:
                runs, run = runs + [run] * (len(run) > 1), []
            else:
                run.append(p)
        for run in runs:
            parts.append(f'<polyline fill="none" stroke="{line_color}" stroke-width='
                         f'"{t.line.width or 2}" stroke-dasharray="{dash}" points="'
                         + " ".join(f"{x:.1f},{y:.1f}" for x, y in run) + '"/>')
    if "markers" in mode:
        parts += _markers(t, pts, color)
    if "text" in mode and t.text is not None:
        texts = [t.text] * len(pts) if isinstance(t.text, str) else seq(t.text)
        parts += [text_svg(p[0], p[1] - 12, s, size=11) for p, s in zip(pts, texts)
                  if p and None not in p and s]
    return parts


def _markers(t, pts, color: str) -> list[str]:
    m = t.marker
    fills = seq(m.color) if m and m.color is not None and not isinstance(m.color, str) else \
        [m.color if m and m.color else color] * len(pts)
    symbol = (m.symbol if m and isinstance(m.symbol, str) else "circle").replace("-open", "")
    stroke = m.line.color if m and m.line and isinstance(m.line.color, str) else "none"
    size = (m.size if m and isinstance(m.size, (int, float)) else 6) / 2
    parts = []
    for p, fill in zip(pts, fills):
        if p is None or None in p or not isinstance(fill, str):
            continue
        if symbol in MARKS:
            parts.append(f'<path transform="translate({p[0]:.1f},{p[1]:.1f}) scale('
                         f'{size / 4:.2f})" d="{MARKS[symbol]}" fill="{fill}" stroke='
                         f'"{stroke if stroke != "none" else fill}" stroke-width="1.5"/>')
        else:
            parts.append(f'<circle cx="{p[0]:.1f}" cy="{p[1]:.1f}" r="{size:.1f}" '
                         f'fill="{fill}" stroke="{stroke}"/>')
    return parts


def bar_svg(t, ax: Axis, ay: Axis, color: str, slot: tuple[int, int]) -> list[str]:
    """One bar trace; ``slot``: its place among the traces grouped side by side, and how many."""
    horizontal = t.orientation == "h"
    cats, vals = (seq(t.y), seq(t.x)) if horizontal else (seq(t.x), seq(t.y))
    if not cats:
        cats = list(range(len(vals)))
    cat_ax, val_ax = (ay, ax) if horizontal else (ax, ay)
    i, n = slot
    colors = t.marker.color if t.marker and t.marker.color is not None else color
    colors = colors if isinstance(colors, str) else seq(colors)
    nums = sorted({float(c) for c in cats if not isinstance(c, str)})
    gap = min((b - a for a, b in zip(nums, nums[1:])), default=1.0)
    half = t.width / 2 if t.width else 0.4 * (1.0 if cat_ax.categories else gap)
    base = val_ax.px_of(min(val_ax.lo, val_ax.hi)) if val_ax.log else val_ax.px(0.0)
    parts = []
    for k, (c, v) in enumerate(zip(cats, vals)):
        if v is None or val_ax.px(v) is None:
            continue
        lo, hi = cat_ax.span(c, half)
        width = (hi - lo) / n
        a, b = sorted((base, val_ax.px(v)))
        fill = colors if isinstance(colors, str) else colors[k]
        if horizontal:
            parts.append(f'<rect x="{a:.1f}" y="{lo + i * width:.1f}" width="{b - a:.1f}" '
                         f'height="{width * 0.95:.1f}" fill="{fill}"/>')
        else:
            parts.append(f'<rect x="{lo + i * width:.1f}" y="{a:.1f}" width="{width * 0.95:.1f}" '
                         f'height="{b - a:.1f}" fill="{fill}"/>')
    return parts


def trace_color(t, index: int) -> str:
    for c in (getattr(getattr(t, "line", None), "color", None),
              getattr(getattr(t, "marker", None), "color", None)):
        if isinstance(c, str):
            return c
    return COLORWAY[index % len(COLORWAY)]


def draw_traces(fig: go.Figure, axes: dict[str, Axis]) -> list[str]:
    parts, bars = [], [t for t in fig.data if t.type == "bar"]
    grouped = (fig.layout.barmode or "group") == "group"
    for index, t in enumerate(fig.data):
        ax, ay = axes[t.xaxis or "x"], axes[t.yaxis or "y"]
        color = trace_color(t, index)
        if t.type == "heatmap":
            parts += heatmap_svg(t, ax, ay)
        elif t.type == "bar":
            parts += bar_svg(t, ax, ay, color, (bars.index(t), len(bars)) if grouped else (0, 1))
        elif t.type == "scatter":
            parts += scatter_svg(t, ax, ay, color)
    return parts


# ------------------------------------------------------------------- annotations and legend
def draw_shapes(fig: go.Figure, axes: dict[str, Axis], canvas: Canvas, *,
                below: bool) -> list[str]:
    """The rectangles drawn under the traces (``below``) or over them (plotly's default)."""
    parts = []
    for s in fig.layout.shapes:
        if s.type != "rect" or (s.layer == "below") != below:
            continue
        x0, x1 = (_place(s.xref or "x", v, axes, canvas, "x") for v in (s.x0, s.x1))
        y0, y1 = (_place(s.yref or "y", v, axes, canvas, "y") for v in (s.y0, s.y1))
        line = s.line.color if s.line and s.line.color else "#444"
        parts.append(f'<rect x="{min(x0, x1):.1f}" y="{min(y0, y1):.1f}" '
                     f'width="{abs(x1 - x0):.1f}" height="{abs(y1 - y0):.1f}" '
                     f'fill="{s.fillcolor or "none"}" fill-opacity="{s.opacity or 1}" '
                     f'stroke="{line}" stroke-width='
                     f'"{s.line.width if s.line and s.line.width is not None else 2}"/>')
    return parts


def _place(ref, v, axes, canvas: Canvas, letter: str) -> float:
    if ref in (None, "paper") or str(ref).endswith("domain") or ref not in axes:
        return canvas.px_x(v) if letter == "x" else canvas.px_y(v)
    return axes[ref].px(v if isinstance(v, str) else float(v))


def draw_annotations(fig: go.Figure, axes: dict[str, Axis], canvas: Canvas) -> list[str]:
    parts = []
    for a in fig.layout.annotations:
        if a.text is None or a.x is None or a.y is None or a.visible is False:
            continue
        x = _place(a.xref or "x", a.x, axes, canvas, "x")
        y = _place(a.yref or "y", a.y, axes, canvas, "y")
        if a.showarrow is not False and (a.xref or "x") != "paper":
            ax_, ay_ = x + (a.ax if a.ax is not None else -10), y + (a.ay if a.ay is not None
                                                                     else -30)
            parts.append(f'<line x1="{x:.1f}" y1="{y:.1f}" x2="{ax_:.1f}" y2="{ay_:.1f}" '
                         'stroke="#444"/>')
            x, y = ax_, ay_
        anchor = {"left": "start", "right": "end"}.get(a.xanchor, "middle")
        shift = {"bottom": -8, "top": 8}.get(a.yanchor, 0)
        font = a.font.size if a.font and a.font.size else 12
        color = a.font.color if a.font and a.font.color else "#2a3f5f"
        parts.append(text_svg(x, y + shift, a.text, size=font, anchor=anchor, color=color))
    return parts


def legend_entries(fig: go.Figure) -> list[tuple[str, str]]:
    named = [(i, t) for i, t in enumerate(fig.data) if t.name and t.showlegend is not False
             and t.type != "heatmap"]
    if fig.layout.showlegend is False or (len(named) < 2 and fig.layout.showlegend is not True):
        return []
    return [(plain(t.name), trace_color(t, i)) for i, t in named]


def draw_legend(entries, canvas: Canvas, width: int) -> tuple[list[str], int]:
    """The legend in rows under the figure; and the height it adds."""
    parts, x, row = [], 10.0, 0
    for name, color in entries:
        w = 28 + 6.5 * len(name)
        if x + w > width - 10 and x > 10:
            x, row = 10.0, row + 1
        y = canvas.height + 8 + row * LEGEND_ROW_PX
        parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="14" height="10" fill="{color}"/>')
        parts.append(text_svg(x + 20, y + 5, name, size=12, anchor="start"))
        x += w + 14
    return parts, (row + 1) * LEGEND_ROW_PX + 10 if entries else 0


def draw_colorbar(fig: go.Figure, canvas: Canvas) -> list[str]:
    t = next((t for t in fig.data if t.type == "heatmap" and t.showscale is not False), None)
    if t is None:
        return []
    x, top, bottom = round(canvas.px_x(1)) + 12, canvas.px_y(1), canvas.px_y(0)
    stops = "".join(f'<stop offset="{k / 10:.1f}" stop-color="'
                    f'{colour_at(t.colorscale, 1 - k / 10)}"/>' for k in range(11))
    lo = t.zmin if t.zmin is not None else 0
    hi = t.zmax if t.zmax is not None else 1
    parts = [f'<defs><linearGradient id="cb" x1="0" y1="0" x2="0" y2="1">{stops}'
             '</linearGradient></defs>',
             f'<rect x="{x}" y="{top:.1f}" width="14" height="{bottom - top:.1f}" '
             'fill="url(#cb)"/>']
    for v in nice_ticks(lo, hi, 5):
        y = bottom - (v - lo) / ((hi - lo) or 1) * (bottom - top)
        parts.append(text_svg(x + 18, y, fmt(v), size=11, anchor="start"))
    return parts


# -------------------------------------------------------------------------------- the figure
def figure_svg(fig: go.Figure, *, size: tuple[int, int] = (900, 450)) -> str:
    """The figure as a standalone SVG document (as it stands: a slider's first frame); ``size``:
    (width, height) in px where its layout sets none."""
    canvas = Canvas(fig, size)
    if any(t.type == "heatmap" and t.showscale is not False for t in fig.data):
        canvas.m["r"] = max(canvas.m["r"], COLORBAR_PX)  # as plotly's automargin makes room
    axes = axes_of(fig, canvas)
    body = draw_axes(fig, axes) + draw_shapes(fig, axes, canvas, below=True)
    body += draw_traces(fig, axes) + draw_shapes(fig, axes, canvas, below=False)
    body += draw_annotations(fig, axes, canvas)
    bar = draw_colorbar(fig, canvas)
    width = canvas.width
    legend, extra = draw_legend(legend_entries(fig), canvas, width)
    height = canvas.height + extra
    title = fig.layout.title.text if fig.layout.title else None
    head = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" {FONT}>',
            f'<rect width="{width}" height="{height}" fill="white"/>']
    if title:
        head.append(text_svg(20, 28, title, size=16, anchor="start"))
    return "\n".join(head + body + bar + legend + ["</svg>"]) + "\n"
