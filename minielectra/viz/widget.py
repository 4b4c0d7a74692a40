"""The interactive explorer (ipywidgets, in JupyterLab): type a sentence, corrupt it, look.

Everything the controls do goes through :meth:`Explorer.update`, so a test can set the widgets'
values, call it and read ``explorer.records`` and ``explorer.figure``.
"""

from __future__ import annotations

from pathlib import Path

import ipywidgets as w
import plotly.graph_objects as go

from ..course import course_path, course_root
from .scoring import Checkpoint, load_checkpoint, parse_replacements, score_text
from .show import FIGURE_WIDTH, FigureView, static_copy, widget_bundle
from .strip import hidden_pieces, plotly_text, token_strip

DEFAULT_TEXT = "The cat sat on the mat because it was tired after the long walk."
PER_ROW = 11  # cells a row at FIGURE_WIDTH: ~70 px each, enough for a long word at 14 px


class Explorer:
    """Controls (``text``, ``replace``, ``checkpoint``, ``seed``, ``words``, ``sample``) over a
    token strip in ``view``; ``widget`` is the whole box."""

    def __init__(self, checkpoint: str | Path = "bundled", text: str = DEFAULT_TEXT, *,
                 seed: int = 0, replace: str = "", words: bool = False, top_k: int = 5):
        self.top_k, self.records = top_k, []
        self._loaded: dict[str, Checkpoint] = {}
        wide = w.Layout(width="95%")
        self.text = w.Textarea(value=text, description="text", layout=wide,
                               continuous_update=False)
        self.replace = w.Text(value=replace, description="replace", layout=wide,
                              placeholder="POS=WORD pairs, e.g. 2=dog 5=ran (empty: the "
                                          "generator samples)", continuous_update=False)
        runs = course_runs()
        self.checkpoint = w.Combobox(value=str(checkpoint), options=["bundled", *runs],
                                     description="checkpoint", ensure_option=False, layout=wide,
                                     placeholder="bundled, a checkpoint dir or a run dir",
                                     continuous_update=False)
        self.seed = w.IntText(value=seed, description="seed", continuous_update=False)
        self.words = w.Checkbox(value=words, description="join word pieces into words")
        self.sample = w.Button(description="sample again (next seed)",
                               layout=w.Layout(width="auto"))  # the default 148 px cuts it
        self.message = w.HTML()
        self.view = FigureView()
        for control in (self.text, self.replace, self.checkpoint, self.seed, self.words):
            control.observe(lambda _change: self.update(), names="value")
        self.sample.on_click(lambda _button: self.next_seed())
        self.widget = w.VBox([self.text, self.replace, self.checkpoint,
                              w.HBox([self.seed, self.sample, self.words]), self.message,
                              self.view.widget])
        self.update()

    @property
    def figure(self) -> go.Figure:
        return self.view.figure

    def model(self, spec: str) -> Checkpoint:
        """The checkpoint named ``spec`` (a run dir found as :func:`.course_path` finds it),
        loaded once."""
        if spec not in self._loaded:
            found = load_checkpoint(course_path(spec))
            found.name = spec  # the strip's title: what the box says
            self._loaded[spec] = found
        return self._loaded[spec]

    def next_seed(self) -> None:
        """Sample again: the next seed (which redraws); replacements typed by hand are cleared."""
        self.replace.value = ""
        self.seed.value += 1

    def update(self) -> None:
        """Score the text as the controls say and redraw; bad input shows its message instead."""
        try:
            ckpt = self.model(self.checkpoint.value.strip() or "bundled")
            replace = parse_replacements(self.replace.value.replace(",", " ").split(),
                                         name="replace")
            self.records = score_text(ckpt, self.text.value, replace=replace,
                                      seed=self.seed.value, top_k=self.top_k)
            if self.words.value:
                hidden_pieces(self.records, replace, name="replace")
        except (ValueError, KeyError, FileNotFoundError, RuntimeError) as e:
            self.records = []  # the old strip is not the answer to the new input: clear it
            self.message.value = f"<span style='color:#b00'>{_escape(e)}</span>"
            self._draw(error_figure(_escape(e)))
            return
        how = "replaced by hand" if replace else f"sampled with seed {self.seed.value}"
        self._draw(token_strip(self.records, words=self.words.value, per_row=PER_ROW,
                               title=f"{ckpt.name}: {how}"))
        self.message.value = ""

    def _draw(self, fig: go.Figure) -> None:
        fig.layout.width = FIGURE_WIDTH
        self.view.draw(fig)  # the whole figure: nothing of the last one (an error) survives

    def _ipython_display_(self):  # an Explorer as the last line of a cell shows its box
        from IPython.display import display
        display(widget_bundle(self.widget, "<Explorer: a text box, its controls and the token "
                              "strip; they work while the notebook runs>"), raw=True)
        static_copy(self.figure)  # a picture of the first strip, for readers without a kernel


def course_runs() -> list[str]:
    """The run dirs in the course's ``runs/`` (pretrain's default ``--out``), as ``runs/NAME``:
    the checkpoint box's choices, from any notebook of the course."""
    root = course_root() or Path.cwd()
    return sorted(f"runs/{p.name}" for p in (root / "runs").glob("*") if p.is_dir())


def error_figure(message: str) -> go.Figure:
    """An empty strip that says what was wrong with the input, where the strip was."""
    fig = go.Figure()
    fig.add_annotation(text=f"no strip: {message}", x=0.5, y=0.5, xref="paper", yref="paper",
                       showarrow=False, font=dict(color="#b00", size=14))
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return fig.update_layout(height=160, plot_bgcolor="white", margin=dict(l=10, r=10, t=20,
                                                                            b=10))


def _escape(e: Exception) -> str:
    """The message as text for HTML and plotly (a KeyError's without its quotes)."""
    return plotly_text(str(e.args[0] if isinstance(e, KeyError) and e.args else e))
