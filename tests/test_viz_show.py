"""``show(fig)``: one notebook output that JupyterLab draws interactively and that GitHub and
nbconvert's HTML (which run no plotly.js) show as a picture.

References: plotly's own JSON of the figure (``fig.to_json()``), the PNG format's header, and
plotly.js drawing the same figure in headless Chromium (skipped without Chromium; CI has it).
"""

import base64
import json
import struct
from xml.etree import ElementTree

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


def test_by_default_the_figure_carries_an_svg_drawn_in_python(monkeypatch):
    """No Chromium, no network and no environment variable: a student's own run of a lesson
    keeps a picture of every figure for nbconvert's HTML."""
    monkeypatch.delenv("MINIELECTRA_STATIC_FIGURES", raising=False)
    monkeypatch.setenv("MINIELECTRA_CHROMIUM", "/nonexistent/chromium")
    monkeypatch.setenv("PATH", "/nonexistent")
    assert not static_figures_on()
    fig = _fig()
    bundle = figure_bundle(fig)
    assert set(bundle) == {PLOTLY_MIME, "image/svg+xml", "text/plain"}
    assert bundle[PLOTLY_MIME] == json.loads(fig.to_json())  # what plotly's renderer sends
    svg = ElementTree.fromstring(bundle["image/svg+xml"])
    texts = {"".join(t.itertext()) for t in svg.iter("{http://www.w3.org/2000/svg}text")}
    assert {"two cells", "cat", "dog"} <= texts
    assert "two cells" in bundle["text/plain"] and "interactive:" not in bundle["text/plain"]


def test_a_widget_s_own_figure_carries_no_picture():
    """FigureView redraws its figure in the kernel: the widget is the picture."""
    assert set(figure_bundle(_fig(), static=False)) == {PLOTLY_MIME, "text/plain"}


@pytest.mark.parametrize("value, on", [("1", True), ("true", True), ("0", False), ("", False)])
def test_the_environment_turns_static_copies_on(monkeypatch, value, on):
    monkeypatch.setenv("MINIELECTRA_STATIC_FIGURES", value)
    assert static_figures_on() is on


def test_without_chromium_a_png_asked_for_is_an_svg_and_says_why(monkeypatch):
    monkeypatch.setenv("MINIELECTRA_CHROMIUM", "/nonexistent/chromium")
    bundle = figure_bundle(_fig(), static=True)
    assert set(bundle) == {PLOTLY_MIME, "image/svg+xml", "text/plain"}
    assert "drawn without plotly.js" in bundle["text/plain"]


@needs_chromium
def test_static_copy_is_a_png_of_the_figure_s_size_in_the_same_output():
    bundle = figure_bundle(_fig(height=300), static=True)
    assert set(bundle) == {PLOTLY_MIME, "image/png", "text/plain"}
    assert png_size(base64.b64decode(bundle["image/png"])) == (FIGURE_WIDTH, 300)
    bundle = figure_bundle(_fig(width=500, height=200), static=True, interactive=False)
    assert set(bundle) == {"image/png", "text/plain"}  # a widget's picture: the widget is live
    assert png_size(base64.b64decode(bundle["image/png"])) == (500, 200)


def test_a_widget_leaves_a_picture_of_its_figure_as_an_output_of_its_own(monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda *a, **k: shown.append(a))
    static_copy(_fig(), static=False)
    (bundle,), = shown
    assert set(bundle) == {"image/svg+xml", "text/plain"}
