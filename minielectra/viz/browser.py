"""Open a page in headless Chromium: a screenshot, the rendered DOM and the console's errors.

The tests check through it that a page of :mod:`.page` draws its figures offline, and the README's
screenshot is made by it (``python -m minielectra.viz.browser PAGE.html OUT.png``): one code path.
``MINIELECTRA_CHROMIUM`` names a binary other than Debian's ``chromium``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

# A plotly figure that rendered: its div, then its first <svg class="main-svg"> with a pixel size.
_PLOT_DIV = re.compile(r'<div[^>]*class="[^"]*js-plotly-plot')
_MAIN_SVG = re.compile(r'<svg[^>]*class="main-svg"[^>]*>')
_SIZE = re.compile(r'\b(width|height)="([\d.]+)"')
# Chromium logs every console message as "...:CONSOLE(line)] "text"", whatever its level; an
# uncaught exception's text starts with "Uncaught" (ReferenceError, TypeError...).
_ERROR = re.compile(r"Uncaught|Error\b")


def find_chromium() -> str | None:
    """The Chromium binary: ``$MINIELECTRA_CHROMIUM``, else the first on PATH, else None."""
    found = (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome", "chrome"))
    return os.environ.get("MINIELECTRA_CHROMIUM") or next(filter(None, found), None)


def _chromium() -> str:
    chromium = find_chromium()
    if chromium is None:
        raise FileNotFoundError("no Chromium found (apt-get install chromium, or set "
                                "MINIELECTRA_CHROMIUM)")
    return chromium


@dataclass
class Rendered:
    png: Path
    dom: str  # the page after its scripts ran
    plots: list[tuple[float, float]]  # (width, height) of each figure's main SVG
    errors: list[str]  # console lines that report a script error
    log: str  # Chromium's whole stderr, for diagnosing


def _run(chromium: str, args: list[str], page: Path, budget_ms: int, timeout: float):
    profile = tempfile.mkdtemp(prefix="minielectra-chromium-")
    try:  # a fresh profile: no state from an earlier run, no lock shared with another
        cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               "--no-first-run", f"--user-data-dir={profile}", "--enable-logging=stderr",
               "--v=0", f"--virtual-time-budget={budget_ms}", *args, page.resolve().as_uri()]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def render(page: str | Path, png: str | Path, *, width: int = 1200, height: int = 500,
           budget_ms: int = 3000, timeout: float = 120.0) -> Rendered:
    """Screenshot ``page`` into ``png`` and read its DOM after the scripts ran (one launch)."""
    chromium = _chromium()
    page, png = Path(page), Path(png)
    if not page.is_file():
        raise FileNotFoundError(f"no page at {page}")
    run = _run(chromium, [f"--screenshot={png.resolve()}", "--dump-dom",
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


_DATA_URL = re.compile(r'<pre id="png">data:image/png;base64,([A-Za-z0-9+/=]+)</pre>')


def figure_png(figure_json: str, *, width: int, height: int, timeout: float = 120.0) -> bytes:
    """A PNG of a plotly figure (``fig.to_json()``), drawn by plotly.js in headless Chromium
    (``Plotly.toImage``, the library's own renderer): the static copy of a notebook figure."""
    import base64

    import plotly
    chromium = _chromium()
    plotly_js = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    with tempfile.TemporaryDirectory(prefix="minielectra-png-") as tmp:
        page = Path(tmp) / "figure.html"
        page.write_text(
            f'<html><body><script src="{plotly_js.as_uri()}"></script><script>\n'
            f"Plotly.toImage({figure_json}, {{format: 'png', width: {width}, height: {height}}})"
            ".then(url => { document.body.innerHTML = '<pre id=\"png\">' + url + '</pre>'; })"
            ".catch(e => { document.body.innerHTML = '<pre id=\"error\">' + e + '</pre>'; });"
            "\n</script></body></html>")
        run = _run(chromium, ["--dump-dom"], page, 10000, timeout)
    found = _DATA_URL.search(run.stdout)
    if found is None:
        raise RuntimeError(f"plotly.js drew no PNG: {run.stdout[-300:]} {run.stderr[-300:]}")
    return base64.b64decode(found.group(1))


def main(argv: list[str] | None = None) -> int:
    """``python -m minielectra.viz.browser PAGE.html OUT.png [WIDTH HEIGHT]``."""
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
