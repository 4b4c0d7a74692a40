"""Show a figure in a notebook so that every reader sees it, with or without a running kernel.

GitHub's notebook preview and ``nbconvert --to html`` run no plotly.js, so :func:`show` puts a
picture and a line of text beside plotly's JSON, in the same output: an SVG drawn in Python
(:mod:`.sketch`, offline, milliseconds, on every machine), or, when asked (``static=True``, or
``MINIELECTRA_STATIC_FIGURES=1``, how the committed lessons are executed), a PNG drawn by plotly.js
itself in headless Chromium (:func:`.browser.figure_png`, a few seconds a figure).
"""

from __future__ import annotations

import base64
import json
import os

import plotly.graph_objects as go

# The width of figures and widgets (px), set explicitly: a widget autosized by plotly stays at
# its 700 px default and crowds its subplot titles; 900 px holds two report panels' titles side by
# side (tests/test_viz_run.py checks). Figures without a width of their own get it in their PNG.
FIGURE_WIDTH = 900
DEFAULT_HEIGHT = 450  # plotly's own default height, for figures that set none
PLOTLY_MIME = "application/vnd.plotly.v1+json"


def static_figures_on() -> bool:
    """Whether :func:`show` draws its picture with plotly.js (a PNG) rather than as an SVG
    sketch: ``MINIELECTRA_STATIC_FIGURES=1``."""
    return os.environ.get("MINIELECTRA_STATIC_FIGURES", "").strip().lower() in ("1", "true",
                                                                                 "yes")


def describe(fig: go.Figure) -> str:
    """One line for the text/plain part of the output: the figure's title, what it is."""
    title = fig.layout.title.text if fig.layout.title and fig.layout.title.text else None
    kinds = sorted({t.type for t in fig.data}) or ["empty"]
    return f"<figure{': ' + title if title else ''} ({', '.join(kinds)})>"


def png(fig: go.Figure) -> bytes:
    """The figure as a PNG at its own size (or :data:`FIGURE_WIDTH` x :data:`DEFAULT_HEIGHT`)."""
    from .browser import figure_png
    width = int(fig.layout.width or FIGURE_WIDTH)
    height = int(fig.layout.height or DEFAULT_HEIGHT)
    return figure_png(fig.to_json(), width=width, height=height)


def figure_bundle(fig: go.Figure, *, static: bool | None = None,
                  interactive: bool = True) -> dict:
    """The output's mimetypes: plotly's JSON (``interactive``), a picture and one line of text.
    The picture: a PNG drawn by plotly.js (``static``; default: :func:`static_figures_on`), else,
    or where no Chromium draws one, an SVG sketch; ``static=False`` with ``interactive``: none
    (a widget's own figure, redrawn while it runs)."""
    want_png = static_figures_on() if static is None else static
    bundle = {PLOTLY_MIME: json.loads(fig.to_json())} if interactive else {}
    text = describe(fig)
    if want_png:
        try:
            # base64 text, as a notebook stores images
            bundle["image/png"] = base64.b64encode(png(fig)).decode("ascii")
        except (FileNotFoundError, RuntimeError, OSError) as e:
            text += f" (drawn without plotly.js: {e})"
    if "image/png" not in bundle and (static is not False or not interactive):
        from .sketch import figure_svg
        bundle["image/svg+xml"] = figure_svg(fig, size=(FIGURE_WIDTH, DEFAULT_HEIGHT))
    bundle["text/plain"] = text
    return bundle


def show(fig: go.Figure, *, static: bool | None = None) -> None:
    """Display ``fig`` in the notebook as :func:`figure_bundle` says."""
    from IPython.display import display
    display(figure_bundle(fig, static=static), raw=True)


def static_copy(fig: go.Figure, *, static: bool | None = None) -> None:
    """A picture of a widget's current figure, as an output of its own: what a reader sees where
    the widget cannot be drawn (GitHub, nbconvert's HTML, JupyterLab after a kernel restart:
    "model not found"). A PNG when ``static``, else an SVG sketch."""
    from IPython.display import display
    display(figure_bundle(fig, static=static, interactive=False), raw=True)


class FigureView:
    """A figure that a widget redraws and that a browser reload brings back: an ipywidgets
    ``Output`` whose one output is the figure's plotly JSON; :meth:`draw` replaces it.

    Not plotly's ``FigureWidget``: a reload restores that widget's figure as it was first shown,
    or nothing ("[anywidget] Failed to initialize model"); an ``Output``'s outputs are
    kernel-side state, so the page draws the latest figure.
    """

    def __init__(self, fig: go.Figure | None = None):
        import ipywidgets as w
        self.widget = w.Output()
        self.figure = go.Figure()
        if fig is not None:
            self.draw(fig)

    def draw(self, fig: go.Figure) -> None:
        self.figure = fig
        bundle = figure_bundle(fig, static=False)
        self.widget.outputs = ({"output_type": "display_data", "data": bundle, "metadata": {}},)


def widget_bundle(widget, text: str) -> dict:
    """A widget's output with ``text`` as its plain-text part, for a reader without the kernel."""
    bundle = widget._repr_mimebundle_()
    bundle["text/plain"] = text
    return bundle
