"""Open a page in headless Chromium: a screenshot, the rendered DOM and the console's errors.

    python tools/browser.py PAGE.html OUT.png [WIDTH HEIGHT]

The tests check through it that a page of ``minielectra viz`` draws its figures offline
(``tests/test_viz_browser.py``), and the README's screenshot is made by it
(``make_readme_figures.py``): one code path. Chromium is found and started as the package starts
it for a notebook figure's static copy (:mod:`minielectra.viz.browser`).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from minielectra.viz.browser import chromium_binary, run_chromium

# A plotly figure that rendered: its div, then its first <svg class="main-svg"> with a pixel size.
_PLOT_DIV = re.compile(r'<div[^>]*class="[^"]*js-plotly-plot')
_MAIN_SVG = re.compile(r'<svg[^>]*class="main-svg"[^>]*>')
_SIZE = re.compile(r'\b(width|height)="([\d.]+)"')
# Chromium logs every console message as "...:CONSOLE(line)] "text"", whatever its level; an
# uncaught exception's text starts with "Uncaught" (ReferenceError, TypeError...).
_ERROR = re.compile(r"Uncaught|Error\b")


@dataclass
class Rendered:
    png: Path
    dom: str  # the page after its scripts ran
    plots: list[tuple[float, float]]  # (width, height) of each figure's main SVG
    errors: list[str]  # console lines that report a script error
    log: str  # Chromium's whole stderr, for diagnosing


def render(page: str | Path, png: str | Path, *, width: int = 1200, height: int = 500,
           budget_ms: int = 3000, timeout: float = 120.0) -> Rendered:
    """Screenshot ``page`` into ``png`` and read its DOM after the scripts ran (one launch)."""
    chromium = chromium_binary()
    page, png = Path(page), Path(png)
    if not page.is_file():
        raise FileNotFoundError(f"no page at {page}")
    run = run_chromium(chromium, [f"--screenshot={png.resolve()}", "--dump-dom",
                                  f"--window-size={width},{height}"], page, budget_ms, timeout)
    if not png.is_file():
        raise RuntimeError(f"Chromium wrote no screenshot of {page}: {run.stderr[-500:]}")
    plots = []
    for part in _PLOT_DIV.split(run.stdout)[1:]:  # the DOM after each figure's div
        svg = _MAIN_SVG.search(part)
        size = dict(_SIZE.findall(svg.group(0))) if svg else {}
        plots.append((float(size.get("width", 0)), float(size.get("height", 0))))
    console = [line for line in run.stderr.splitlines() if ":CONSOLE" in line]
    errors = [line for line in console if _ERROR.search(line)]
    return Rendered(png, run.stdout, plots, errors, run.stderr)


def main(argv: list[str] | None = None) -> int:
    """``python tools/browser.py PAGE.html OUT.png [WIDTH HEIGHT]``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (2, 4):
        print(main.__doc__, file=sys.stderr)
        return 2
    size = dict(width=int(args[2]), height=int(args[3])) if len(args) == 4 else {}
    shot = render(args[0], args[1], **size)
    print(f"{shot.png}: {len(shot.plots)} figure(s) {shot.plots}, {len(shot.errors)} error(s)")
    for line in shot.errors:
        print(line, file=sys.stderr)
    return 1 if shot.errors or not shot.plots else 0


if __name__ == "__main__":
    sys.exit(main())
