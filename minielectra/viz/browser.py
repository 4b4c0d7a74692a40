"""Headless Chromium: plotly.js draws a figure's static PNG (:func:`figure_png`), the copy a
notebook keeps where no JavaScript runs. ``MINIELECTRA_CHROMIUM`` names a binary other than
Debian's ``chromium``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path


def find_chromium() -> str | None:
    """The Chromium binary: ``$MINIELECTRA_CHROMIUM``, else the first on PATH, else None."""
    found = (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome", "chrome"))
    return os.environ.get("MINIELECTRA_CHROMIUM") or next(filter(None, found), None)


def chromium_binary() -> str:
    """:func:`find_chromium`'s binary, or one line saying how to get one."""
    chromium = find_chromium()
    if chromium is None:
        raise FileNotFoundError("no Chromium found (apt-get install chromium, or set "
                                "MINIELECTRA_CHROMIUM)")
    return chromium


def run_chromium(chromium: str, args: list[str], page: Path, budget_ms: int, timeout: float):
    """Chromium headless on ``page`` with ``args``, given ``budget_ms`` of virtual time."""
    profile = tempfile.mkdtemp(prefix="minielectra-chromium-")
    try:  # a fresh profile: no state from an earlier run, no lock shared with another
        cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               "--no-first-run", f"--user-data-dir={profile}", "--enable-logging=stderr",
               "--v=0", f"--virtual-time-budget={budget_ms}", *args, page.resolve().as_uri()]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


_DATA_URL = re.compile(r'<pre id="png">data:image/png;base64,([A-Za-z0-9+/=]+)</pre>')


def figure_png(figure_json: str, *, width: int, height: int, timeout: float = 120.0) -> bytes:
    """A PNG of a plotly figure (``fig.to_json()``), drawn by plotly.js in headless Chromium
    (``Plotly.toImage``, the library's own renderer): the static copy of a notebook figure."""
    import base64

    import plotly
    chromium = chromium_binary()
    plotly_js = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    with tempfile.TemporaryDirectory(prefix="minielectra-png-") as tmp:
        page = Path(tmp) / "figure.html"
        page.write_text(
            f'<html><body><script src="{plotly_js.as_uri()}"></script><script>\n'
            f"Plotly.toImage({figure_json}, {{format: 'png', width: {width}, height: {height}}})"
            ".then(url => { document.body.innerHTML = '<pre id=\"png\">' + url + '</pre>'; })"
            ".catch(e => { document.body.innerHTML = '<pre id=\"error\">' + e + '</pre>'; });"
            "\n</script></body></html>")
        run = run_chromium(chromium, ["--dump-dom"], page, 10000, timeout)
    found = _DATA_URL.search(run.stdout)
    if found is None:
        raise RuntimeError(f"plotly.js drew no PNG: {run.stdout[-300:]} {run.stderr[-300:]}")
    return base64.b64decode(found.group(1))
