"""The pages of ``minielectra viz`` in a real browser: headless Chromium opens the page offline,
takes a screenshot, and the rendered DOM must hold a sized plotly figure with no script error.

This is the code path of the README's screenshot (``tools/make_readme_figures.py``). The
run page (report, slider, calibration) is checked the same way in ``test_viz_run.py``. Skipped
when Chromium is absent; CI installs Debian's ``chromium`` package (``.ci/run``).
"""

import struct

import pytest

from minielectra.cli import main
from minielectra.viz.browser import find_chromium, render

needs_chromium = pytest.mark.skipif(find_chromium() is None, reason="no Chromium on this "
                                    "machine (apt-get install chromium; .ci/run installs it)")


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
