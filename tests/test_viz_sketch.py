"""The SVG sketch of a plotly figure (:mod:`minielectra.viz.sketch`): the picture a learner's own
notebook keeps beside each figure, with no Chromium and no network.

References: where a value must land (the plot area's edges from the figure's margins, the order
of rows on a reversed axis, a log axis's decades), counted from the figure's data; and a
notebook executed by nbclient and exported by nbconvert, as a learner does.
"""

import base64
import re
from xml.etree import ElementTree

import plotly.graph_objects as go
import pytest
from plotly.subplots import make_subplots

from minielectra.viz.report import training_report
from minielectra.viz.sketch import figure_svg
from minielectra.viz.strip import batch_heatmap, token_strip

SVG = "{http://www.w3.org/2000/svg}"


def parse(fig: go.Figure) -> ElementTree.Element:
    return ElementTree.fromstring(figure_svg(fig))  # well-formed XML, or this raises


def texts(svg) -> list[str]:
    return ["".join(t.itertext()) for t in svg.iter(SVG + "text")]


def _rec(token, p, position, replaced=False, original=None):
    return {"position": position, "word": position, "token": token,
            "original": original or token, "replaced": replaced, "masked": False,
            "hand": False, "p_replaced": p, "top_k": []}


def test_a_line_spans_the_plot_area_and_rises_upwards():
    fig = go.Figure(go.Scatter(x=[0, 1, 2], y=[0.0, 0.5, 1.0], mode="lines"),
                    layout=dict(width=500, height=300, margin=dict(l=50, r=50, t=50, b=50),
                                xaxis=dict(range=[0, 2]), yaxis=dict(range=[0, 1]),
                                title="rising"))
    svg = parse(fig)
    (line,) = svg.iter(SVG + "polyline")
    pts = [tuple(map(float, p.split(","))) for p in line.get("points").split()]
    assert pts[0] == (50.0, 250.0) and pts[-1] == (450.0, 50.0)  # the margins' corners
    assert "rising" in texts(svg)


def test_heatmap_cells_their_text_and_a_reversed_axis():
    z = [[0.1, 0.9, None], [0.5, 0.2, 0.7]]
    fig = go.Figure(go.Heatmap(z=z, text=[["a", "b", ""], ["c", "d", "e"]],
                               texttemplate="%{text}", zmin=0, zmax=1, colorscale="RdBu_r"),
                    layout=dict(yaxis=dict(autorange="reversed")))
    svg = parse(fig)
    cells = [r for r in svg.iter(SVG + "rect") if r.get("fill", "").startswith("rgb")]
    assert len(cells) == 5  # None draws nothing
    shown = texts(svg)
    assert {"a", "b", "c", "d", "e"} <= set(shown)
    y_of = {"".join(t.itertext()): float(t.find(SVG + "tspan").get("y"))
            for t in svg.iter(SVG + "text")}
    assert y_of["a"] < y_of["c"]  # reversed: the first row on top


def test_bars_grouped_horizontal_and_on_a_log_axis():
    fig = go.Figure([go.Bar(x=["x", "y"], y=[1, 3], name="one"),
                     go.Bar(x=["x", "y"], y=[2, 1], name="two")])
    svg = parse(fig)
    bars = [r for r in svg.iter(SVG + "rect") if r.get("width") and r.get("height")
            and float(r.get("height")) > 0 and r.get("fill") in ("#636efa", "#EF553B")]
    heights = sorted(float(r.get("height")) for r in bars if float(r.get("width")) > 20)
    assert len(heights) == 4 and heights[-1] == pytest.approx(3 * heights[0], rel=0.02)
    assert {"one", "two"} <= set(texts(svg))  # the legend
    h = parse(go.Figure(go.Bar(y=["a", "b"], x=[1, 2], orientation="h")))
    assert any(float(r.get("width", 0)) > 50 for r in h.iter(SVG + "rect"))
    log = parse(go.Figure(go.Bar(x=[0.1, 0.3], y=[10, 1000], width=0.08),
                          layout=dict(yaxis=dict(type="log"))))
    assert {"10", "100", "1000"} <= set(texts(log))


def test_subplots_a_second_y_axis_and_subplot_titles():
    fig = make_subplots(rows=1, cols=2, subplot_titles=("left panel", "right panel"),
                        specs=[[{"secondary_y": True}, {}]])
    fig.add_scatter(y=[1, 2, 3], name="a", row=1, col=1)
    fig.add_bar(y=[10, 100], name="b", row=1, col=1, secondary_y=True)
    fig.add_scatter(y=[3, 2, 1], name="c", row=1, col=2)
    svg = parse(fig)
    shown = texts(svg)
    assert {"left panel", "right panel", "a", "b", "c"} <= set(shown)
    assert len(list(svg.iter(SVG + "polyline"))) == 2


@pytest.mark.parametrize("make", ["strip", "batch", "report"])
def test_the_library_s_own_figures(make):
    records = [_rec("the", 0.1, 1), _rec("dog", 0.9, 2, True, "cat"), _rec('"', 0.3, 3, True,
                                                                          "the")]
    fig = {"strip": lambda: token_strip(records, title="a strip"),
           "batch": lambda: batch_heatmap([records, records[:2]], title="a batch"),
           "report": lambda: training_report([
               {"kind": "train", "step": s, "elapsed_s": s, "loss": 5.0 - s / 10,
                "gen_loss": 4.0, "disc_loss": 0.5, "gen_accuracy": 0.1, "disc_accuracy": 0.8,
                "lr": 1e-3, "tokens_per_s": 1000.0} for s in (10, 20)], title="a report")}[make]()
    shown = texts(parse(fig))
    assert f"a {make}" in shown
    if make != "report":
        assert {"dog(cat)", '"(the)'} <= set(shown)  # a replaced quote, above its original


def test_a_learners_nbconvert_html_shows_every_figure_and_the_explorer(tmp_path):
    """As a learner: execute a notebook (no MINIELECTRA_STATIC_FIGURES, no Chromium), export it
    with ``jupyter nbconvert --to html``: each figure, the explorer's strip and the live report's
    final curves are pictures."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    from nbconvert import HTMLExporter
    cells = ["import os\nos.environ.pop('MINIELECTRA_STATIC_FIGURES', None)\n"
             "os.environ['MINIELECTRA_CHROMIUM'] = '/nonexistent/chromium'",
             "import plotly.graph_objects as go\nfrom minielectra.viz.show import show\n"
             "show(go.Figure(go.Bar(y=[1, 3, 2]), layout=dict(title='three bars')))",
             "from minielectra.viz.widget import Explorer\n"
             "Explorer('bundled', 'the cat sat on the mat .')",
             "from minielectra.viz.report import LiveReport\nlive = LiveReport(title='live run')\n"
             "live",
             "for s in (10, 20):\n"
             "    live({'kind': 'train', 'step': s, 'elapsed_s': s, 'loss': 5.0, 'gen_loss': 4.0,\n"
             "          'disc_loss': 0.5, 'gen_accuracy': 0.1, 'disc_accuracy': 0.8, 'lr': 1e-3,\n"
             "          'tokens_per_s': 1000.0})\n"
             "live({'kind': 'eval', 'step': 20, 'elapsed_s': 21, 'disc_auc': 0.7})"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    html, _ = HTMLExporter().from_notebook_node(nb)
    pictures = [base64.b64decode(p).decode() for p in
                re.findall(r'src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)"', html)]
    pictures += re.findall(r"<svg.*?</svg>", html, re.S)  # inline, as other templates write it
    assert any("three bars" in p for p in pictures) and "(interactive:" not in html
    assert any("bundled: sampled with seed 0" in p for p in pictures)  # the explorer's strip
    # the live report's cell keeps a picture of the curves as of the run's last evaluation
    live = [o for o in nb.cells[3].outputs if "image/svg+xml" in o.get("data", {})]
    assert len(live) == 1 and "live run" in live[0]["data"]["image/svg+xml"]
    assert any("live run" in p for p in pictures)
