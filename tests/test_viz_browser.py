"""The pages of ``minielectra viz`` in a real browser: headless Chromium opens the page offline,
takes a screenshot, and the rendered DOM must hold a sized plotly figure with no script error.

This is the code path of the README's screenshot (``tools/make_readme_figures.py``). The
run page (report, slider, calibration) is checked the same way in ``test_viz_run.py``. Skipped
when Chromium is absent; CI installs Debian's ``chromium`` package (``.ci/run``).
"""

import struct
import sys
from pathlib import Path

import pytest

from minielectra.cli import main
from minielectra.viz.browser import find_chromium

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from browser import render  # noqa: E402  (tools/browser.py)

needs_chromium = pytest.mark.skipif(find_chromium() is None, reason="no Chromium on this "
                                    "machine (Debian, Ubuntu: apt-get install chromium)")


def png_size(path) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk."""
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", head[16:24])


def assert_rendered(shot, figures: int, *, width: int, height: int) -> None:
    """The page drew ``figures`` plotly figures, each sized, and no script failed."""
    assert shot.errors == [], shot.errors
    assert len(shot.plots) == figures, shot.plots
    assert all(w > 0.5 * width and h > 100 for w, h in shot.plots), shot.plots
    assert png_size(shot.png) == (width, height)


@needs_chromium
def test_token_strip_page_renders_offline(tmp_path, capsys):
    page = tmp_path / "strip.html"
    assert main(["viz", "--text", "The cat sat on the mat because it was tired.", "--seed", "2",
                 "--out", str(page)]) == 0
    capsys.readouterr()
    shot = render(page, tmp_path / "strip.png", width=1000, height=600)
    assert_rendered(shot, 1, width=1000, height=600)
    assert "heatmaplayer" in shot.dom  # the cells were drawn, not only the axes
    assert shot.png.stat().st_size > 10_000  # a blank page compresses to a few hundred bytes


@needs_chromium
def test_a_broken_script_is_reported(tmp_path):
    page = tmp_path / "broken.html"
    page.write_text("<html><body><script>notDefinedAnywhere();</script></body></html>")
    shot = render(page, tmp_path / "broken.png", width=400, height=300)
    assert shot.plots == [] and any("notDefinedAnywhere" in e for e in shot.errors)


# What a strip page draws, read in the browser: each cell's text with its box, the plot's box, the
# outcome markers' fill on the cells and in the legend.
STRIP_DRAWN = """() => {
  const plot = document.querySelector('.js-plotly-plot');
  const area = plot.querySelector('.nsewdrag').getBoundingClientRect();
  const texts = [...plot.querySelectorAll('.heatmaplayer text')].flatMap(t => {
    const lines = t.querySelectorAll('tspan.line');
    return [...(lines.length ? lines : [t])].map(l => { const r = l.getBoundingClientRect();
      return {text: l.textContent, width: r.width, height: r.height}; }); });
  const fills = sel => [...plot.querySelectorAll(sel)].map(p => getComputedStyle(p).fill);
  return {width: area.width, texts, cells: fills('.scatterlayer .point'),
          legend: fills('.legend .scatterpts')};
}"""


@needs_chromium
def test_strip_page_writes_quotes_fits_long_words_and_marks_as_its_legend(tmp_path, capsys):
    """A generated quote is written as `"` (not `&quot;`), a long joined word stays inside its
    cell, a lone `.` is written large, and the markers on the cells look as in the legend."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    page_path = tmp_path / "strip.html"
    text = "she said the station was electroencephalographically crowded ."
    assert main(["viz", "--text", text, "--replace", '2="', "--replace", "3=of", "--words",
                 "--out", str(page_path)]) == 0
    capsys.readouterr()
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=find_chromium(), headless=True,
                                    args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1000, "height": 700})
            page.goto(page_path.as_uri())
            page.wait_for_selector(".heatmaplayer text", timeout=60_000)
            drawn = page.evaluate(STRIP_DRAWN)
        finally:
            browser.close()
    shown = [t["text"] for t in drawn["texts"]]
    assert '"' in shown and not [s for s in shown if "&quot;" in s or "&amp;" in s], shown
    cell = drawn["width"] / 12  # token_strip's twelve cells a row
    wide = [t for t in drawn["texts"] if t["width"] > cell]
    assert not wide, (cell, wide)
    assert any(s.startswith("electro") for s in shown), shown  # the long word, cut or smaller
    dot = next(t for t in drawn["texts"] if t["text"] == ".")
    assert dot["height"] >= 20, dot  # written at 24 px, not 14
    assert drawn["cells"] and set(drawn["cells"]) <= set(drawn["legend"]), drawn
