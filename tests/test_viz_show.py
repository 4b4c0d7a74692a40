"""``show(fig)``: one notebook output that JupyterLab draws interactively and that GitHub and
nbconvert's HTML (which run no plotly.js) show as a picture.

References: plotly's own JSON of the figure (``fig.to_json()``), the PNG format's header, and
plotly.js drawing the same figure in headless Chromium (skipped without Chromium; CI has it).
"""

import base64
import json
import struct

import plotly.graph_objects as go
import pytest

from minielectra.viz.browser import find_chromium
from minielectra.viz.show import (FIGURE_WIDTH, PLOTLY_MIME, figure_bundle, static_copy,
                                  static_figures_on)

needs_chromium = pytest.mark.skipif(find_chromium() is None, reason="no Chromium on this "
                                    "machine (Debian, Ubuntu: apt-get install chromium)")


def _fig(**layout) -> go.Figure:
    return go.Figure(go.Heatmap(z=[[0.1, 0.9]], text=[["cat", "dog"]], texttemplate="%{text}"),
                     layout=dict(title="two cells", **layout))


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


def test_without_static_copies_the_bundle_is_the_interactive_figure_and_a_line(monkeypatch):
    monkeypatch.delenv("MINIELECTRA_STATIC_FIGURES", raising=False)
    assert not static_figures_on()
    fig = _fig()
    bundle = figure_bundle(fig)
    assert set(bundle) == {PLOTLY_MIME, "text/plain"}
    assert bundle[PLOTLY_MIME] == json.loads(fig.to_json())  # what plotly's renderer sends
    assert "two cells" in bundle["text/plain"] and "run the notebook" in bundle["text/plain"]


@pytest.mark.parametrize("value, on", [("1", True), ("true", True), ("0", False), ("", False)])
def test_the_environment_turns_static_copies_on(monkeypatch, value, on):
    monkeypatch.setenv("MINIELECTRA_STATIC_FIGURES", value)
    assert static_figures_on() is on


def test_without_chromium_the_output_says_why_there_is_no_picture(monkeypatch):
    monkeypatch.setenv("MINIELECTRA_CHROMIUM", "/nonexistent/chromium")
    bundle = figure_bundle(_fig(), static=True)
    assert set(bundle) == {PLOTLY_MIME, "text/plain"}
    assert "no static copy" in bundle["text/plain"]


@needs_chromium
def test_static_copy_is_a_png_of_the_figure_s_size_in_the_same_output():
    bundle = figure_bundle(_fig(height=300), static=True)
    assert set(bundle) == {PLOTLY_MIME, "image/png", "text/plain"}
    assert png_size(base64.b64decode(bundle["image/png"])) == (FIGURE_WIDTH, 300)
    bundle = figure_bundle(_fig(width=500, height=200), static=True, interactive=False)
    assert set(bundle) == {"image/png", "text/plain"}  # a widget's picture: the widget is live
    assert png_size(base64.b64decode(bundle["image/png"])) == (500, 200)


def test_static_copy_of_a_widget_shows_nothing_when_off(monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda *a, **k: shown.append(a))
    static_copy(_fig(), static=False)
    assert shown == []
