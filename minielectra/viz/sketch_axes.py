"""The pieces of :mod:`.sketch`'s SVG: plotly's HTML subset as SVG text, colours and colour
scales, a trace's arrays as lists, and an axis that places values (numbers, categories, logs)
on pixels and picks its ticks.
"""

from __future__ import annotations

import math
import re
from html import escape, unescape

from plotly.colors import get_colorscale

# ------------------------------------------------------------------------------- text and colour
def plain(text) -> str:
    """Plotly's HTML subset as plain text: tags dropped, ``<br>`` a newline, entities decoded."""
    text = re.sub(r"<br\s*/?>", "\n", str(text or ""))
    return unescape(re.sub(r"<[^>]+>", "", text))


def text_svg(x: float, y: float, text, *, size: float = 12, anchor: str = "middle",
             color: str = "#2a3f5f", extra: str = "") -> str:
    """``text`` (plotly HTML allowed) as an SVG ``<text>``, one ``<tspan>`` a line, centred on
    ``y``."""
    lines = plain(text).split("\n")
    top = y - (len(lines) - 1) * size * 0.6 + size * 0.35
    spans = "".join(f'<tspan x="{x:.1f}" y="{top + i * size * 1.2:.1f}">{escape(line)}</tspan>'
                    for i, line in enumerate(lines))
    return (f'<text text-anchor="{anchor}" font-size="{size:g}" fill="{color}" {extra}>'
            f"{spans}</text>")


NAMED = {"white": "#ffffff", "black": "#000000", "grey": "#808080", "gray": "#808080",
         "lightgrey": "#d3d3d3", "lightgray": "#d3d3d3", "darkgrey": "#a9a9a9",
         "darkgray": "#a9a9a9", "red": "#ff0000", "green": "#008000", "blue": "#0000ff",
         "orange": "#ffa500", "yellow": "#ffff00", "purple": "#800080"}


def _rgb(color: str) -> tuple[float, float, float]:
    """A CSS colour as (r, g, b); one this module does not know reads as mid grey."""
    color = NAMED.get(color.strip().lower(), color.strip())
    if not color.startswith(("#", "rgb")):
        return (128.0, 128.0, 128.0)
    if color.startswith("#"):
        h = color[1:] if len(color) == 7 else "".join(c * 2 for c in color[1:4])
        return tuple(int(h[i:i + 2], 16) for i in (0, 2, 4))
    return tuple(float(v) for v in re.findall(r"[\d.]+", color)[:3])


def colour_at(scale, frac: float) -> str:
    """The colour of a plotly colorscale (its stops, or a name) at ``frac`` in [0, 1]."""
    scale = scale or "Plasma"  # plotly's default for a trace that names none
    stops = [(float(p), _rgb(c)) for p, c in (get_colorscale(scale) if isinstance(scale, str)
                                              else scale)]
    frac = min(max(frac, 0.0), 1.0)
    for (p0, c0), (p1, c1) in zip(stops, stops[1:]):
        if frac <= p1:
            w = (frac - p0) / ((p1 - p0) or 1)
            return "rgb({},{},{})".format(*(round(a + w * (b - a)) for a, b in zip(c0, c1)))
    return "rgb({},{},{})".format(*(round(v) for v in stops[-1][1]))


def ink_on(fill: str) -> str:
    """Black or white text, whichever reads on ``fill``."""
    r, g, b = _rgb(fill)
    return "#000" if 0.299 * r + 0.587 * g + 0.114 * b > 140 else "#fff"


def seq(values) -> list:
    """A trace's array as a list: None, a list, a numpy array, or plotly's typed-array JSON
    (``{"bdata": base64, "dtype": ...}``, as a saved notebook holds it)."""
    if values is None:
        return []
    if isinstance(values, dict) and "bdata" in values:
        import base64

        import numpy as np
        array = np.frombuffer(base64.b64decode(values["bdata"]), dtype=values["dtype"])
        return array.reshape(values["shape"]).tolist() if "shape" in values else array.tolist()
    if hasattr(values, "tolist"):
        return values.tolist()
    return [seq(v) if isinstance(v, dict) else v for v in values]


# ------------------------------------------------------------------------------------ axes
class Axis:
    """One axis: its pixel span, and where a value (a number or a category) lands on it."""

    def __init__(self, spec, lo_px: float, hi_px: float, values: list, *, vertical: bool):
        self.spec, self.vertical = spec, vertical
        self.lo_px, self.hi_px = lo_px, hi_px
        self.log = spec.type == "log"
        self.categories = list(dict.fromkeys(v for v in values if isinstance(v, str)))
        nums = [self._num(v) for v in values if v is not None]
        nums = [v for v in nums if v is not None and math.isfinite(v)] or [0.0, 1.0]
        lo, hi = min(nums), max(nums)
        if spec.range is not None and None not in spec.range:
            lo, hi = spec.range
        else:  # a category's cell spans half a unit either side; numbers get plotly's 5%
            pad = 0.5 if self.categories else (hi - lo) * 0.05 or 0.5
            lo, hi = lo - pad, hi + pad
        self.lo, self.hi = lo, hi
        self.reversed = spec.autorange == "reversed"

    def _num(self, v):
        if isinstance(v, str):
            return float(self.categories.index(v)) if v in self.categories else None
        if self.log:
            return math.log10(v) if v and v > 0 else None
        return float(v)

    def px(self, v) -> float | None:
        """The pixel of a value (None where it cannot be drawn: a log of 0, an unknown name)."""
        n = self._num(v)
        return None if n is None else self.px_of(n)

    def span(self, v, half: float) -> tuple[float, float]:
        """The pixels of a cell or bar ``half`` units either side of ``v``."""
        n = self._num(v)
        a, b = self.px_of(n - half), self.px_of(n + half)
        return min(a, b), max(a, b)

    def px_of(self, n: float) -> float:
        """The pixel of a position in the axis's own units (a category's index, a log10)."""
        frac = (n - self.lo) / ((self.hi - self.lo) or 1.0)
        if self.reversed:  # lo_px is already the bottom of a y axis
            frac = 1 - frac
        return self.lo_px + frac * (self.hi_px - self.lo_px)

    def ticks(self) -> list[tuple[float, str]]:
        """(pixel, label) of each tick."""
        spec = self.spec
        if spec.tickvals is not None:
            labels = spec.ticktext or [fmt(v) for v in spec.tickvals]
            return [(p, str(t)) for v, t in zip(spec.tickvals, labels)
                    if (p := self.px(v if isinstance(v, str) else float(v))) is not None]
        if self.categories:
            step = max(1, math.ceil(len(self.categories) / 40))
            return [(self.px_of(i), c) for i, c in enumerate(self.categories) if i % step == 0]
        if self.log:
            lo, hi = sorted((self.lo, self.hi))
            return [(self.px_of(e), fmt(10.0 ** e)) for e in range(math.ceil(lo), int(hi) + 1)]
        return [(self.px_of(v), fmt(v)) for v in nice_ticks(self.lo, self.hi)]


def nice_ticks(lo: float, hi: float, n: int = 6) -> list[float]:
    lo, hi = sorted((lo, hi))
    step = 10 ** math.floor(math.log10(max((hi - lo) / n, 1e-12)))
    step *= next(m for m in (1, 2, 5, 10) if (hi - lo) / (m * step) <= n)
    first = math.ceil(lo / step) * step
    return [round(first + i * step, 12) for i in range(int((hi - first) / step + 1e-9) + 1)]


def fmt(v: float) -> str:
    if v and (abs(v) >= 1e5 or abs(v) < 1e-3):
        return f"{v:.0e}".replace("e+0", "e").replace("e-0", "e-")
    return f"{v:g}"
