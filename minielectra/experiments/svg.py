"""Static SVG charts for the README (plotly's static export needs kaleido and a browser; these
are a few lines of SVG, the same on every machine). Lines with error bars, and grouped bars."""

from __future__ import annotations

import math
from html import escape

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#7f7f7f")
W, H, LEFT, RIGHT, TOP, BOTTOM = 640, 380, 64, 170, 40, 56


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    step = 10 ** math.floor(math.log10(max((hi - lo) / n, 1e-12)))
    for m in (1, 2, 5, 10):
        if (hi - lo) / (m * step) <= n:
            step *= m
            break
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step + 1e-9) + 1)]


def _fmt(v: float) -> str:
    if v and (abs(v) >= 1e5 or abs(v) < 1e-2):
        return f"{v:.1e}".replace("e+0", "e").replace("e+", "e")
    return f"{v:g}"


def _frame(title: str, xlabel: str, ylabel: str, ylo: float, yhi: float) -> list[str]:
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
             f'font-family="sans-serif" font-size="12"><rect width="{W}" height="{H}" '
             'fill="white"/>',
             f'<text x="{LEFT}" y="22" font-size="14">{escape(title)}</text>',
             f'<text x="{(LEFT + W - RIGHT) / 2}" y="{H - 12}" text-anchor="middle">'
             f'{escape(xlabel)}</text>',
             f'<text transform="translate(16,{(TOP + H - BOTTOM) / 2}) rotate(-90)" '
             f'text-anchor="middle">{escape(ylabel)}</text>']
    for t in _ticks(ylo, yhi):
        y = _y(t, ylo, yhi)
        parts.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" '
                     'stroke="#ddd"/>')
        parts.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{_fmt(t)}</text>')
    parts.append(f'<rect x="{LEFT}" y="{TOP}" width="{W - LEFT - RIGHT}" '
                 f'height="{H - TOP - BOTTOM}" fill="none" stroke="#333"/>')
    return parts


def _y(v: float, lo: float, hi: float) -> float:
    return H - BOTTOM - (v - lo) / (hi - lo) * (H - TOP - BOTTOM)


def _range(values: list[float]) -> tuple[float, float]:
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 0.1 or 1.0
    return lo - pad, hi + pad


def _legend(names: list[str]) -> list[str]:
    """A swatch and the name, wrapped to the right margin (about 6.5 px a character)."""
    parts, row = [], 0
    for i, name in enumerate(names):
        y = round(TOP + 18 * row)
        lines = _wrap(name, int((RIGHT - 40) / 6.5))
        parts.append(f'<rect x="{W - RIGHT + 12}" y="{y}" width="12" height="12" '
                     f'fill="{COLORS[i % len(COLORS)]}"/><text x="{W - RIGHT + 30}" y="{y + 10}">'
                     + "".join(f'<tspan x="{W - RIGHT + 30}" dy="{0 if k == 0 else 14}">'
                               f'{escape(t)}</tspan>' for k, t in enumerate(lines)) + "</text>")
        row += len(lines) + 0.3 * (len(lines) > 1)
    return parts


def line_chart(series: list[dict], *, title: str, xlabel: str, ylabel: str,
               logx: bool = False, hline: tuple[str, float] | None = None) -> str:
    """``series``: ``{"name", "x", "y", "err"}`` each; error bars are +-err. On a log axis the
    ticks are the measured x values. ``hline``: a labelled dashed reference line."""
    fx = (lambda v: math.log10(v)) if logx else (lambda v: v)
    xs = [fx(x) for s in series for x in s["x"]]
    ys = [y + e * k for s in series for y, e in zip(s["y"], s["err"]) for k in (-1, 1)]
    xlo, xhi = _range(xs)
    ylo, yhi = _range(ys + ([hline[1]] if hline else []))
    parts = _frame(title, xlabel, ylabel, ylo, yhi)
    for t in sorted(set(xs)) if logx else _ticks(xlo, xhi):
        x = LEFT + (t - xlo) / (xhi - xlo) * (W - LEFT - RIGHT)
        label = _fmt(10 ** t) if logx else _fmt(t)
        parts.append(f'<text x="{x:.1f}" y="{H - BOTTOM + 16}" text-anchor="middle">{label}</text>')
    if hline:
        y = _y(hline[1], ylo, yhi)
        parts.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" '
                     'stroke="#555" stroke-dasharray="6,4"/>')
        parts.append(f'<text x="{W - RIGHT - 4}" y="{y - 5:.1f}" text-anchor="end" '
                     f'fill="#555">{escape(hline[0])}</text>')
    for i, s in enumerate(series):
        color = COLORS[i % len(COLORS)]
        pts = [(LEFT + (fx(x) - xlo) / (xhi - xlo) * (W - LEFT - RIGHT), _y(y, ylo, yhi),
                _y(y - e, ylo, yhi), _y(y + e, ylo, yhi))
               for x, y, e in sorted(zip(s["x"], s["y"], s["err"]))]
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="'
                     + " ".join(f"{x:.1f},{y:.1f}" for x, y, _, _ in pts) + '"/>')
        for x, y, y0, y1 in pts:
            parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y0:.1f}" y2="{y1:.1f}" '
                         f'stroke="{color}"/><circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" '
                         f'fill="{color}"/>')
    return "\n".join(parts + _legend([s["name"] for s in series]) + ["</svg>"]) + "\n"


def _wrap(text: str, width: int) -> list[str]:
    lines = [""]
    for word in text.split():
        if lines[-1] and len(lines[-1]) + 1 + len(word) > width:
            lines.append(word)
        else:
            lines[-1] = f"{lines[-1]} {word}".strip()
    return lines


def bar_chart(groups: list[str], series: list[dict], *, title: str, ylabel: str) -> str:
    """Grouped bars: ``groups`` along x, one bar per ``series`` (``{"name", "y", "err"}``)."""
    ys = [y + e * k for s in series for y, e in zip(s["y"], s["err"]) for k in (-1, 1)]
    ylo, yhi = 0.0, _range(ys)[1]  # bars start at zero: a cut axis would magnify differences
    parts = _frame(title, "", ylabel, ylo, yhi)
    slot = (W - LEFT - RIGHT) / len(groups)
    bar = slot * 0.8 / len(series)
    for g, label in enumerate(groups):
        x = LEFT + slot * (g + 0.5)
        lines = _wrap(label, max(6, int(slot / 6.5)))
        parts.append(f'<text x="{x:.1f}" y="{H - BOTTOM + 14}" text-anchor="middle" '
                     'font-size="10">' + "".join(
                         f'<tspan x="{x:.1f}" dy="{0 if i == 0 else 12}">{escape(t)}</tspan>'
                         for i, t in enumerate(lines)) + "</text>")
    for i, s in enumerate(series):
        color = COLORS[i % len(COLORS)]
        for g, (y, e) in enumerate(zip(s["y"], s["err"])):
            x = LEFT + slot * g + slot * 0.1 + bar * i
            top, base = _y(y, ylo, yhi), _y(ylo, ylo, yhi)
            parts.append(f'<rect x="{x:.1f}" y="{top:.1f}" width="{bar * 0.9:.1f}" '
                         f'height="{base - top:.1f}" fill="{color}"/>')
            xc = x + bar * 0.45
            parts.append(f'<line x1="{xc:.1f}" x2="{xc:.1f}" y1="{_y(y - e, ylo, yhi):.1f}" '
                         f'y2="{_y(y + e, ylo, yhi):.1f}" stroke="#000"/>')
    return "\n".join(parts + _legend([s["name"] for s in series]) + ["</svg>"]) + "\n"
