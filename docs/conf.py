"""The minielectra site: the course, guides, reference and results, built offline.

    pip install -e ".[docs]"
    python -m sphinx -b html -W docs OUT        # OUT/index.html; -W: a warning fails the build

Nothing is downloaded at build time or when a page is read: the theme and its assets ship in
the ``sphinx-book-theme`` wheel, the notebooks are rendered as committed (``nb_execution_mode =
"off"``: the outputs nbval verified, figures as their saved PNG/SVG), and no page loads a script
from the network. The course is not copied: ``docs/course/notebooks`` and ``docs/course/tutorial``
are symbolic links to the repository's folders, and :mod:`repolinks` resolves their links to
the code and to each other. Results tables come from the committed results files
(:mod:`results`), the API pages from the docstrings (:mod:`apipages`), the command-line page from
the parser (``sphinx-argparse`` over :func:`minielectra.cli.build_parser`).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))           # the checkout's minielectra, as the tests use it
sys.path.insert(0, str(DOCS / "_ext"))

import minielectra  # noqa: E402

project = "minielectra"
author = "the minielectra authors"
copyright = "the minielectra authors, Apache-2.0"
version = release = minielectra.__version__

extensions = [
    "myst_nb",                 # Markdown (MyST) pages and the committed notebooks
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",     # each documented module's source, highlighted, in the site
    "sphinxarg.ext",           # the command line from the argparse parser
    "repolinks",
    "results",
    "apipages",
]

# ----------------------------------------------------------------------------- sources

exclude_patterns = [
    "_build", "**/.ipynb_checkpoints",
    # included whole by guides/small.md (one page, not two); links to it go there (repolinks)
    "course/tutorial/reproduce_small.md",
]
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb", ".rst": "restructuredtext"}
root_doc = "index"
# A link or reference that leads nowhere fails the build (with -W); outside minielectra's own
# names (torch.Tensor, pathlib.Path ...) there is no inventory to check against offline.
nitpicky = True
nitpick_ignore_regex = [
    (r"py:(class|obj|exc|data|func|meth|attr|mod)", r"(?!minielectra\b).*"),
    # type-hint names the annotations use without their module
    (r"py:(class|obj)", r"(Path|Tensor|Any|Sequence|Iterable|Iterator|Callable|Mapping|T|Row|"
                        r"Pair|Example|np\..*|torch\..*|nn\..*|go\..*)"),
]
# a plotly figure's JSON: the site shows the PNG or SVG saved beside it
suppress_warnings = ["mystnb.unknown_mime_type"]
# Guides that other work adds: listed in guides/index.md, left out of it until their page exists.
OPTIONAL_GUIDES = ("faults", "layout")

# ----------------------------------------------------------------------------- MyST and notebooks

myst_enable_extensions = ["dollarmath", "colon_fence", "deflist"]
myst_heading_anchors = 3           # GitHub-style anchors: tutorial links such as #solutions
myst_dmath_double_inline = True
nb_execution_mode = "off"          # the committed outputs, exactly as nbval checked them
nb_merge_streams = True
# A widget saved without its state draws nothing outside a kernel: show its text line instead
# (each widget leaves a picture of itself in the next output), and load no widget script.
nb_mime_priority_overrides = [("html", "application/vnd.jupyter.widget-view+json", None)]
nb_ipywidgets_js = {}

# ----------------------------------------------------------------------------- API

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_format = "short"
autodoc_default_options = {"members": True, "show-inheritance": False}
napoleon_google_docstring = True
napoleon_numpy_docstring = False

# ----------------------------------------------------------------------------- HTML

html_theme = "sphinx_book_theme"
html_title = f"minielectra {release}"
html_static_path = ["_static"]
html_css_files = ["site.css"]
html_theme_options = {
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "use_download_button": True,
    "use_fullscreen_button": False,
    "use_repository_button": False,   # no public address yet
    "use_source_button": False,
    "use_issues_button": False,
    "use_edit_page_button": False,
    "launch_buttons": {},
}
html_last_updated_fmt = None
html_show_sourcelink = False
# MathJax from a wheel (jupyter-server-mathjax ships MathJax 2 and its STIX-Web fonts), copied
# beside the pages: formulas render without a network.
mathjax_path = "mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full"  # the config the wheel ships
mathjax2_config = {
    # MyST marks each page's sections tex2jax_ignore and each formula class "math": process those
    # (the classes MyST gives MathJax 3), or no formula of a page is typeset.
    "tex2jax": {"inlineMath": [["\\(", "\\)"]], "displayMath": [["\\[", "\\]"]],
                "processEscapes": True,
                "processClass": "tex2jax_process|mathjax_process|math|output_area"},
    # The wheel ships the STIX-Web fonts only (not MathJax's TeX fonts): ask for those, and for
    # no local or image fonts, as Jupyter's own pages do.
    "HTML-CSS": {"availableFonts": [], "preferredFont": None, "webFont": "STIX-Web",
                 "imageFont": None},
}


def copy_mathjax(app, exception) -> None:
    import jupyter_server_mathjax
    if exception is None and app.builder.format == "html":
        source = Path(jupyter_server_mathjax.__file__).parent / "static"
        shutil.copytree(source, Path(app.outdir) / "_static" / "mathjax", dirs_exist_ok=True)


def drop_missing_guides(app, docname, source) -> None:
    if docname == "guides/index":
        for name in OPTIONAL_GUIDES:
            if not (DOCS / "guides" / f"{name}.md").exists():
                source[0] = source[0].replace(f"\n{name}\n", "\n")


def setup(app):
    app.connect("build-finished", copy_mathjax)
    app.connect("source-read", drop_missing_guides)
