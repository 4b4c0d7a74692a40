"""The site as a reader meets it: the built pages in headless Chromium, offline.

The site is built once per session (``python -m sphinx -b html -W docs OUT``: a warning fails
it), or taken from ``$MINIELECTRA_DOCS_SITE`` when that folder holds a build (``.ci/run`` builds
it once and points here). Then, from ``file://`` with no server and no network:

- each lesson page shows every figure its notebook holds: as many images as the committed
  notebook has figure outputs (PNG or SVG), each loaded (a non-zero natural width) and visible;
- the site's search finds a word that only the lessons and chapters use, and lists a lesson;
- a lesson and a chapter with formulas show them typeset by MathJax: each formula MyST marked
  (``class="math"``) holds MathJax's output, no raw ``\\(``, ``\\[`` or ``$...$`` is left in the
  visible text, and every file the page asks for (the fonts among them) is in the site.

The references are the committed notebooks (counted with nbformat) and a word picked from a
lesson's source, not the build's own output. Skipped with a reason without Chromium, the
``playwright`` package or the ``docs`` extra.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("MINIELECTRA_CHROMIUM", "/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]
LESSONS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
FIGURES = ("image/png", "image/svg+xml")
SEARCH_WORD = "Gumbel"  # lesson 04's sampling trick: in the lessons and chapters, not the API

pytest.importorskip("sphinx", reason="the docs extra is not installed (pip install -e '.[docs]')")
pytest.importorskip("myst_nb", reason="the docs extra is not installed (pip install -e '.[docs]')")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed "
                               "(pip install -e '.[dev]')")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists() and shutil.which(CHROMIUM) is None,
                       reason=f"no Chromium at {CHROMIUM} (Debian, Ubuntu: apt-get install "
                              "chromium; or set MINIELECTRA_CHROMIUM to a Chromium binary)"),
]


@pytest.fixture(scope="session")
def site(tmp_path_factory) -> Path:
    given = os.environ.get("MINIELECTRA_DOCS_SITE")
    if given and (Path(given) / "index.html").is_file():
        return Path(given).resolve()  # .ci/run names it relative to the checkout
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-W", "-q",
                           str(ROOT / "docs"), str(out)], capture_output=True, text=True,
                          timeout=1800)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    return out


@pytest.fixture(scope="module")
def page():
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        try:
            context = browser.new_context(offline=True, viewport={"width": 1300, "height": 900})
            yield context.new_page()
        finally:
            browser.close()


def figure_outputs(path: Path) -> int:
    nb = nbformat.read(path, as_version=4)
    return sum(1 for cell in nb.cells if cell.cell_type == "code"
               for out in cell.get("outputs", [])
               if any(m in out.get("data", {}) for m in FIGURES))


def test_every_lesson_is_on_the_site():
    assert len(LESSONS) == 8


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.stem)
def test_each_lesson_page_shows_its_figures(site, page, lesson):
    html = site / "course" / "notebooks" / f"{lesson.stem}.html"
    assert html.is_file(), html
    page.goto(html.as_uri())
    page.wait_for_load_state("load")
    images = page.eval_on_selector_all(
        "div.cell_output img",
        "els => els.map(e => ({w: e.naturalWidth, shown: e.getBoundingClientRect().width}))")
    expected = figure_outputs(lesson)
    assert len(images) == expected, (lesson.name, images)
    assert all(i["w"] > 0 and i["shown"] > 100 for i in images), images


def test_search_finds_a_word_from_a_lesson(site, page):
    assert any(SEARCH_WORD in p.read_text() for p in LESSONS)  # the word is a lesson's
    page.goto((site / "search.html").as_uri() + f"?q={SEARCH_WORD}")
    page.wait_for_selector("#search-results ul.search li", timeout=30_000)
    found = page.eval_on_selector_all("#search-results ul.search li a",
                                      "els => els.map(e => e.getAttribute('href'))")
    assert any("course/notebooks/04_replaced_token_detection" in h for h in found), found


# Every lesson and chapter that writes formulas
MATH_PAGES = [f"course/{part}/{p.stem}.html" for part, suffix in (("notebooks", "ipynb"),
                                                                   ("tutorial", "md"))
              for p in sorted((ROOT / part).glob(f"[0-9][0-9]_*.{suffix}"))
              if re.search(r"\$\$|\$[^$\s][^$\n]*\$", p.read_text())]
# What a reader sees of the page: its article, without code, which may hold a literal `$`
VISIBLE_TEXT = """() => {
  const article = document.querySelector("article").cloneNode(true);
  article.querySelectorAll("pre, code, script, style").forEach(e => e.remove());
  return article.innerText;
}"""


@pytest.mark.parametrize("name", MATH_PAGES)
def test_formulas_are_typeset_offline(site, page, name):
    (source,) = [p for suffix in (".md", ".ipynb")
                 if (p := ROOT / "docs" / Path(name).with_suffix(suffix)).exists()]
    assert "$" in source.read_text()  # the page's source writes formulas
    failed = []

    def lacking(request):  # a request that failed for a file the site does not have (not one
        path = Path(unquote(urlparse(request.url).path))  # aborted by the next navigation)
        if request.url.startswith("file:") and not path.exists():
            failed.append(request.url)

    page.on("requestfailed", lacking)
    page.goto((site / name).as_uri())
    page.wait_for_function("() => window.MathJax && MathJax.isReady", timeout=60_000)
    page.evaluate("() => new Promise(done => MathJax.Hub.Queue(() => done(true)))")
    marked = page.eval_on_selector_all(
        "article .math.notranslate",
        "els => els.map(e => !!e.querySelector('.MathJax, .MathJax_Display'))")
    assert marked and all(marked), f"{name}: {marked.count(False)} of {len(marked)} not typeset"
    text = page.evaluate(VISIBLE_TEXT)
    raw = re.findall(r"\\\(|\\\[|\$[^$\s][^$\n]*\$", text)
    assert not raw, f"{name}: raw LaTeX in the page: {raw[:5]}"
    page.remove_listener("requestfailed", lacking)
    assert not failed, f"{name}: files the page asks for and the site lacks: {failed[:5]}"
    fonts = page.evaluate("() => [...document.fonts].filter(f => f.status === 'loaded')"
                          ".map(f => f.family)")
    assert any("STIX" in f for f in fonts), fonts  # the bundled web fonts drew them


@pytest.mark.parametrize("name", ["results/suite.html", "results/speed.html"])
def test_the_results_tables_fit_the_page(site, page, name):
    """At the width of a laptop's browser, beside the page's contents, every table of the
    results pages with the widest tables shows whole: none has to be scrolled sideways."""
    page.goto((site / name).as_uri())
    page.wait_for_load_state("load")
    widths = page.eval_on_selector_all(
        "article table", "els => els.map(t => [t.parentElement.scrollWidth, "
                         "t.parentElement.clientWidth])")
    assert widths and all(inner <= shown for inner, shown in widths), widths
