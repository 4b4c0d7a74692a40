"""Lessons 04-06 as a learner meets them: JupyterLab in a real browser, Run All, then look.

A fixture serves JupyterLab on 127.0.0.1 (a free port, no token) over a temporary folder holding
copies of the lessons (outputs cleared, so what is seen was drawn by this run), and always stops
it. Playwright's Python package drives Debian's Chromium (Playwright's own browser download is
not used). Each lesson runs top to bottom (Run > Run All Cells); then the page must show:

- no console errors and every code cell executed (an exception stops Run All);
- widget figures as wide as the notebook column, within ``MARGIN``;
- subplot titles that do not overlap (their bounding boxes);
- buttons whose labels fit (``scrollWidth <= clientWidth``);
- lesson 05's checkpoint slider and lesson 06's "sample again" changing what is drawn;
- lesson 06's explorer, typed into as a learner would: a bad entry shows its error, the good
  entry after it (a quote token, ``"``) shows its strip with no error left over and the quote
  written as ``"``, not ``&quot;``;
- a page reload (the notebook saved first, as JupyterLab's autosave does) draws every widget's
  figure again as it was: plotly's FigureWidget came back empty or stale.

A screenshot of each lesson (the page after Run All, each output that holds a figure scrolled
into view) is saved under ``$MINIELECTRA_SCREENSHOTS`` (default: the test's temporary folder).
Skipped with a reason when Chromium or the ``playwright`` package is missing; ``.ci/run``
installs Debian's ``chromium`` and the dev extra installs ``playwright``.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("MINIELECTRA_CHROMIUM", "/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]
LESSONS = ["04_replaced_token_detection", "05_training_electra", "06_looking_inside"]
MARGIN = 0.03  # a widget figure may be up to 3% narrower than the column (a scrollbar, padding)
# The course's figures are FIGURE_WIDTH (900 px) wide, fixed, not responsive: drawn for a notebook
# column of 900-927 px, which JupyterLab gives a 1350 px window with its file browser open. A
# wider window leaves a margin beside them; this window checks that they fill such a column.
VIEWPORT = {"width": 1350, "height": 1000}
RUN_ALL_S = 600  # one lesson's Run All on a loaded 2-core CPU, with margin

pytest.importorskip("jupyterlab", reason="jupyterlab is not installed (pip install -e "
                    "'.[notebooks]')")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed "
                               "(pip install -e '.[dev]')")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists() and shutil.which(CHROMIUM) is None,
                       reason=f"no Chromium at {CHROMIUM} (Debian, Ubuntu: apt-get install "
                              "chromium; or set MINIELECTRA_CHROMIUM to a Chromium binary)"),
]

# Settings a fresh profile would otherwise ask about or fetch from the network, and every cell
# kept in the page (windowed notebooks drop cells scrolled out of view from the DOM).
SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings":
        {"checkForUpdates": False, "fetchNews": "false"},
}


# ----------------------------------------------------------------------------------- the server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def copy_lesson(source: Path, folder: Path) -> None:
    """The notebook with its outputs and counts cleared: what the browser shows is this run's."""
    nb = nbformat.read(source, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nbformat.write(nb, folder / source.name)


def write_settings(folder: Path) -> None:
    for name, values in SETTINGS.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))


def wait_until_up(url: str, server: subprocess.Popen, log: Path, *, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"jupyter lab exited with {server.returncode}:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(f"{url}/api/status", timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"jupyter lab did not answer within {timeout:.0f} s:\n{log.read_text()}")


def serve_lab(root: Path, home: Path, notebooks: list[Path]):
    """Start JupyterLab over ``root`` laid out as ``minielectra lessons`` lays out a course:
    ``notebooks/`` (copies of ``notebooks``) beside ``tutorial/img`` (the diagrams the lessons
    link as ``../tutorial/img/...``); (url, process, log)."""
    (root / "notebooks").mkdir()
    for nb in notebooks:
        copy_lesson(nb, root / "notebooks")
    shutil.copytree(ROOT / "tutorial" / "img", root / "tutorial" / "img")
    write_settings(home / "settings")
    port, log = free_port(), home / "lab.log"
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(home / "config"),
           "JUPYTER_RUNTIME_DIR": str(home / "runtime"), "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
           f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
           "--ServerApp.allow_root=True",  # CI runs as root
           "--IdentityProvider.token=", "--ServerApp.password=",
           f"--ServerApp.root_dir={root}", f"--LabApp.user_settings_dir={home / 'settings'}",
           f"--LabApp.workspaces_dir={home / 'workspaces'}",
           "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    server = subprocess.Popen(cmd, cwd=root, env=env, stdout=log.open("w"),
                              stderr=subprocess.STDOUT)
    return f"http://127.0.0.1:{port}", server, log


def stop(server: subprocess.Popen) -> None:
    """Stop the server (its kernels with it): SIGTERM, then SIGKILL if it hangs."""
    if server.poll() is None:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root, home = tmp_path_factory.mktemp("course"), tmp_path_factory.mktemp("lab-home")
    url, server, log = serve_lab(root, home, [ROOT / "notebooks" / f"{n}.ipynb" for n in LESSONS])
    try:
        wait_until_up(url, server, log, timeout=90)
        yield url, root
    finally:
        stop(server)


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory) -> Path:
    folder = os.environ.get("MINIELECTRA_SCREENSHOTS")
    path = Path(folder) if folder else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


# ------------------------------------------------------------------------------------ the page

# Every code cell has run when no prompt shows [*], the kernel is idle and the first cell has a
# number; Run All stops at an exception, which leaves later cells unnumbered (checked after).
RAN = """() => {
  const prompts = [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')]
    .map(e => e.textContent.trim());
  const idle = document.querySelector('.jp-Notebook-ExecutionIndicator[data-status="idle"]');
  return prompts.length > 0 && /\\[\\d+\\]/.test(prompts[0]) && idle !== null &&
    !prompts.some(p => p.includes('*'));
}"""
UNRUN = """() => [...document.querySelectorAll('.jp-CodeCell')].map((c, i) => [i,
  c.querySelector('.jp-InputPrompt').textContent.trim()]).filter(([_, p]) => !/\\[\\d+\\]/.test(p))
  .map(([i, p]) => `code cell ${i}: ${p}`)"""
# Each plotly figure drawn by a widget (anywidget's FigureWidget or inside an ipywidgets box, not
# plotly's static mimetype output): its width and the width of the output column it sits in.
WIDGET_FIGURES = """() => [...document.querySelectorAll('.jp-OutputArea-output')]
  .filter(o => o.querySelector('.js-plotly-plot') &&
               o.getAttribute('data-mime-type') !== 'application/vnd.plotly.v1+json')
  .flatMap(o => [...o.querySelectorAll('.js-plotly-plot .main-svg:first-of-type')].map(svg => ({
    figure: svg.getBoundingClientRect().width, column: o.getBoundingClientRect().width,
    title: (svg.closest('.js-plotly-plot').querySelector('.gtitle') || {}).textContent || '',
    layout: 'template' in (svg.closest('.js-plotly-plot').layout || {})})))"""
# The bounding boxes of every figure's title and annotations (subplot titles are annotations).
TITLE_BOXES = """() => [...document.querySelectorAll('.js-plotly-plot')].map(plot =>
  [...plot.querySelectorAll('.gtitle, .annotation-text')].filter(e => e.textContent.trim())
    .map(e => { const r = e.getBoundingClientRect();
                return {text: e.textContent, x0: r.left, x1: r.right, y0: r.top, y1: r.bottom}; }))"""
BUTTONS = """() => [...document.querySelectorAll('.jp-OutputArea button:not(.modebar-btn)')]
  .map(b => ({text: b.textContent, scroll: b.scrollWidth, client: b.clientWidth}))"""
# What a figure shows: its texts and its heatmaps' images (a restyle redraws both).
VIEW = """(plot) => [...plot.querySelectorAll('text')].map(t => t.textContent).join('|') +
  [...plot.querySelectorAll('.heatmaplayer image')].map(i => i.getAttribute('href')).join('|')"""


KERNEL_IDLE = """() => [...document.querySelectorAll('#jp-main-statusbar *')]
  .some(e => e.children.length === 0 && /\\|\\s*Idle\\s*$/.test(e.textContent))"""
STARTED = """() => [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')]
  .some(e => /\\[(\\*|\\d+)\\]/.test(e.textContent))"""


def lab_page(url: str, notebook: str) -> str:
    """JupyterLab with ``notebook`` alone: its own workspace, reset, so that the lessons opened
    before it are not restored beside it (their cells would match the page's selectors)."""
    return f"{url}/lab/workspaces/{Path(notebook).stem}/tree/{notebook}?reset"


def run_all(page, url: str, notebook: str, *, before=None) -> None:
    """Open ``notebook`` in JupyterLab and run every cell (Run > Run All Cells); ``before(page)``
    first, if given, once the notebook is open."""
    page.goto(lab_page(url, notebook))
    # The splash goes when every plugin has started; a widget created before the widget manager
    # has started is drawn empty, so nothing runs before then.
    page.wait_for_selector("#jupyterlab-splash", state="detached", timeout=180_000)
    page.wait_for_function(KERNEL_IDLE, timeout=180_000, polling=500)
    if before is not None:
        before(page)
    for _attempt in range(3):  # a menu command clicked while the app is still starting is lost
        page.click(".lm-MenuBar-itemLabel:text-is('Run')")
        page.click(".lm-Menu-itemLabel:text-is('Run All Cells')")
        try:
            page.wait_for_function(STARTED, timeout=60_000, polling=500)
            break
        except sync_api.TimeoutError:
            page.keyboard.press("Escape")
    page.wait_for_function(RAN, timeout=RUN_ALL_S * 1000, polling=1000)
    settle(page)


# What the outputs show, in short: a widget's figure draws after its cell has finished, in
# steps (an empty plot first, then its layout), so the checks wait until this stops changing.
DRAWN = """() => [...document.querySelectorAll('.jp-OutputArea-output')].map(o =>
  [...o.querySelectorAll('.js-plotly-plot')].map(p => p.getBoundingClientRect().width + ':' +
    p.querySelectorAll('text').length).join(',') + '/' + o.textContent.length).join(';')"""


def settle(page, *, quiet_s: int = 3, timeout_s: int = 120) -> None:
    """Wait until the outputs have looked the same for ``quiet_s`` seconds."""
    last, same = None, 0
    for _ in range(timeout_s):
        page.wait_for_timeout(1000)
        now = page.evaluate(DRAWN)
        same = same + 1 if now == last else 0
        if same >= quiet_s:
            return
        last = now


def overlaps(a: dict, b: dict, *, tol: float = 1.0) -> bool:
    return (min(a["x1"], b["x1"]) - max(a["x0"], b["x0"]) > tol and
            min(a["y1"], b["y1"]) - max(a["y0"], b["y0"]) > tol)


def layout_problems(page) -> list[str]:
    """What a learner would see as broken on the page as it is drawn now."""
    problems = []
    for f in page.evaluate(WIDGET_FIGURES):
        if not f["layout"]:  # the widget's state never reached its view
            problems.append(f"widget figure {f['title']!r} is drawn without its layout")
        elif not (1 - MARGIN) * f["column"] <= f["figure"] <= f["column"] + 1:
            problems.append(f"widget figure {f['title']!r} is {f['figure']:.0f} px wide in a "
                            f"{f['column']:.0f} px column")
    for boxes in page.evaluate(TITLE_BOXES):
        problems += [f"titles overlap: {a['text']!r} and {b['text']!r}"
                     for i, a in enumerate(boxes) for b in boxes[i + 1:] if overlaps(a, b)]
    problems += [f"button label clipped: {b['text']!r} needs {b['scroll']} px, has {b['client']}"
                 for b in page.evaluate(BUTTONS) if b["scroll"] > b["client"]]
    return problems


def drawn_view(plot) -> str:
    """What the figure ``plot`` (a locator, found again each time: a widget redraw replaces the
    element) draws now; "" when there is none."""
    try:
        return plot.evaluate(VIEW, timeout=2000) if plot.count() else ""
    except sync_api.Error:  # replaced between the count and the evaluation
        return ""


def view_changes(page, plot, act, *, timeout_s: float = 60) -> bool:
    """Whether what ``plot`` draws changes (to something drawn) within ``timeout_s`` after
    ``act()``."""
    before = drawn_view(plot)
    act()
    for _ in range(int(timeout_s * 4)):
        page.wait_for_timeout(250)
        now = drawn_view(plot)
        if now and now != before:
            return True
    return False


def slider_problems(page) -> list[str]:
    """Each plotly slider: a click at the right end of its rail moves to the last step and
    redraws the figure."""
    problems = []
    plots = page.locator(".js-plotly-plot:has(.slider-container)")
    for k in range(plots.count()):
        plot = plots.nth(k)
        rail = plot.locator(".slider-rail-touch-rect").first
        rail.scroll_into_view_if_needed()
        box = rail.bounding_box()
        if not view_changes(page, plot, lambda: page.mouse.click(box["x"] + box["width"] - 3,
                                                                 box["y"] + box["height"] / 2)):
            problems.append(f"slider {k}: moving it to the last step did not change the view")
    return problems


def resample_problems(page) -> list[str]:
    """Each "sample again" button redraws the figure of its own widget."""
    problems = []
    outputs = page.locator(".jp-OutputArea-output:has(button:text-matches('^sample again'))")
    for k in range(outputs.count()):
        button = outputs.nth(k).locator("button:text-matches('^sample again')").first
        plot = outputs.nth(k).locator(".js-plotly-plot").first
        button.scroll_into_view_if_needed()
        if not plot.count():
            problems.append(f"explorer {k}: no figure next to the button")
        elif not view_changes(page, plot, button.click):
            problems.append(f"explorer {k}: 'sample again' did not change the view")
    return problems


# The lines a figure writes: each line of a multi-line text (a replaced cell: token, original).
TEXT_LINES = """p => [...p.querySelectorAll('text')].flatMap(t => {
  const lines = t.querySelectorAll('tspan.line');
  return lines.length ? [...lines].map(l => l.textContent) : [t.textContent]; })"""


def plot_texts(plot) -> list[str]:
    """The lines of text a figure draws now (cells, titles, annotations)."""
    try:
        return plot.evaluate(TEXT_LINES, timeout=2000) if plot.count() else []
    except sync_api.Error:
        return []


def wait_for_texts(page, plot, ok, *, timeout_s: float = 60) -> list[str]:
    """The figure's texts once ``ok(texts)`` holds, or the last ones seen after ``timeout_s``."""
    texts = plot_texts(plot)
    for _ in range(int(timeout_s * 4)):
        if ok(texts):
            break
        page.wait_for_timeout(250)
        texts = plot_texts(plot)
    return texts


def explorer_problems(page) -> list[str]:
    """Each explorer, typed into: a bad replacement, then a good one that puts a quote token in
    the sentence. The bad one must show its error in the figure, the good one its strip with no
    error left over and the quote written as it is."""
    problems = []
    outputs = page.locator(".jp-OutputArea-output:has(button:text-matches('^sample again'))")
    for k in range(outputs.count()):
        box = outputs.nth(k).locator(".widget-text:has(label:text-is('replace')) input").first
        plot = outputs.nth(k).locator(".js-plotly-plot").first
        box.scroll_into_view_if_needed()
        box.fill("99=dog")
        box.press("Enter")
        texts = wait_for_texts(page, plot, lambda ts: any(t.startswith("no strip") for t in ts))
        if not any("position 99 is outside the text" in t for t in texts):
            problems.append(f"explorer {k}: a bad entry did not show its error: {texts[:8]}")
        box.fill('3="')
        box.press("Enter")
        texts = wait_for_texts(page, plot, lambda ts: '"' in ts)
        if '"' not in texts:
            problems.append(f"explorer {k}: the quote token is not drawn as it is: {texts[:12]}")
        if any("&quot;" in t or "&amp;" in t for t in texts):
            problems.append(f"explorer {k}: a token is escaped twice: {texts[:12]}")
        if any(t.startswith("no strip") for t in texts):
            problems.append(f"explorer {k}: the error of the bad entry stayed over the strip")
    return problems


# Figures drawn by a widget: inside an output that is not plotly's own mimetype (an Output
# widget's figure sits in an inner output of that mimetype, inside the widget's output).
WIDGET_PLOTS = (".jp-OutputArea-output:not([data-mime-type='application/vnd.plotly.v1+json'])"
                " .js-plotly-plot")


def reload_problems(page) -> list[str]:
    """Save the notebook, reload the page and compare every widget figure's texts with what it
    drew before: a reload must bring each back as it was (not empty, not its first state)."""
    plots = page.locator(WIDGET_PLOTS)
    before = [sorted(plot_texts(plots.nth(k))) for k in range(plots.count())]
    titles = [plots.nth(k).evaluate("p => (p.querySelector('.gtitle') || {}).textContent || ''")
              for k in range(plots.count())]
    if not before:
        return []
    # File > Save Notebook: Ctrl+S typed while a widget's text box has the focus stays there.
    page.click(".lm-MenuBar-itemLabel:text-is('File')")
    page.click(".lm-Menu-itemLabel:text-matches('^Save( Notebook)?$')")
    page.wait_for_function("() => !document.querySelector('.jp-mod-dirty')", timeout=60_000)
    page.wait_for_timeout(1000)
    page.reload()
    page.wait_for_selector("#jupyterlab-splash", state="detached", timeout=180_000)
    page.wait_for_function(KERNEL_IDLE, timeout=180_000, polling=500)
    settle(page)
    problems = []
    for k, want in enumerate(before):
        # 150 s: with the other core busy, a reloaded page has taken more than 60 s to draw its
        # first widget figure (the one wait spent in full on a passing run is a figure that is
        # meant to differ, as in the harness's own probe)
        got = sorted(wait_for_texts(page, page.locator(WIDGET_PLOTS).nth(k),
                                    lambda ts: sorted(ts) == want, timeout_s=150))
        if got != want:
            problems.append(f"widget figure {k} ({titles[k]!r}) after a reload draws "
                            f"{[t for t in got if t not in want][:8]} instead of "
                            f"{[t for t in want if t not in got][:8]}")
    return problems


def screenshot(page, folder: Path, name: str) -> list[Path]:
    """The page with its first figure in view, then each output that holds a figure or a
    widget, one by one."""
    # plotly's mimetype renderer draws into the output node itself, a widget inside it
    outputs = page.locator(".jp-OutputArea-output.js-plotly-plot, "
                           ".jp-OutputArea-output:has(.js-plotly-plot), "
                           ".jp-OutputArea-output:has(.jupyter-widgets)")
    if outputs.count():
        outputs.first.evaluate("e => e.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(500)
    shots = [folder / f"{name}.png"]
    page.screenshot(path=shots[0])
    for i in range(outputs.count()):
        shots.append(folder / f"{name}_output{i:02d}.png")
        outputs.nth(i).screenshot(path=shots[-1])
    return shots


def console_errors(page) -> list[str]:
    """A list that fills with the page's console errors and uncaught exceptions."""
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"uncaught: {e}"))
    return errors


def learner_sees(browser, url: str, notebook: str, shots: Path, *, before=None) -> list[str]:
    """Run ``notebook`` in the browser and list every problem a learner would see."""
    page = browser.new_page(viewport=VIEWPORT)
    errors = console_errors(page)
    try:
        try:
            run_all(page, url, notebook, before=before)
        finally:  # a lesson that did not finish is shown as far as it got
            screenshot(page, shots, Path(notebook).stem)
        problems = [f"not run: {c}" for c in page.evaluate(UNRUN)]
        problems += layout_problems(page)
        problems += slider_problems(page) + resample_problems(page) + explorer_problems(page)
        problems += reload_problems(page)
    finally:
        page.close()
    return problems + [f"console error: {e}" for e in errors]


# ----------------------------------------------------------------------------------- the tests


@pytest.mark.parametrize("lesson", LESSONS)
def test_the_lesson_as_a_learner_sees_it(lab, browser, screenshots, lesson):
    url, _ = lab
    problems = learner_sees(browser, url, f"notebooks/{lesson}.ipynb", screenshots)
    assert not problems, "\n".join(problems)


def probe_notebook(path: Path) -> None:
    """A hand-made notebook with one widget figure sized to the column (read from column.json,
    which the test writes) and one of each fault: a 700 px figure with overlapping subplot
    titles, a button too narrow for its label, and a widget figure whose kernel-side state
    changes without the page being told (a reload draws the kernel's state, not what was shown)."""
    cells = [
        "import json\nimport ipywidgets as w\nimport plotly.graph_objects as go\n"
        "from plotly.subplots import make_subplots\n"
        "WIDTH = json.load(open('column.json'))['width']",
        "fits = go.FigureWidget(make_subplots(rows=1, cols=3, subplot_titles=['one', 'two', "
        "'three']))\nfits.update_layout(width=WIDTH, height=300, title='fits')\nfits",
        "fixed = go.FigureWidget(make_subplots(rows=1, cols=3, subplot_titles=["
        "'a long subplot title, the first', 'a long subplot title, the second', 'third']))\n"
        "fixed.update_layout(width=700, height=300, title='fixed')\nfixed",
        "import plotly.io as pio\npio.renderers.default = 'plotly_mimetype'\n"
        "go.Figure(go.Bar(y=[1, 3, 2]), layout=dict(title='static')).show()",
        "w.HBox([w.Button(description='roomy'), w.Button(description='a label much too long "
        "for its button', layout=w.Layout(width='120px'))])",
        "from minielectra.viz.show import FigureView\n"
        "shown = FigureView(go.Figure(go.Bar(y=[1, 3, 2]), layout=dict(width=WIDTH, height=300, "
        "title='first shown')))\nshown.widget",
        "later = FigureView(go.Figure(go.Bar(y=[2, 1]), layout=dict(width=WIDTH, height=300, "
        "title='changed after'))).widget.outputs\n"
        "with shown.widget._lock_property(outputs=list(later)):  # the kernel's state changes,\n"
        "    shown.widget.outputs = later  # and the page is not told",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nbformat.write(nb, path)


COLUMN = """() => document.querySelector('.jp-CodeCell .jp-InputArea-editor')
  .getBoundingClientRect().width"""


def test_the_checks_catch_what_they_are_for(lab, browser, tmp_path):
    """The harness itself: on a hand-made notebook the checks pass what fits and report each
    fault, so a lesson that passes has passed real checks."""
    url, root = lab
    probe_notebook(root / "probe.ipynb")
    def measure_the_column(page):
        (root / "column.json").write_text(json.dumps({"width": round(page.evaluate(COLUMN))}))

    problems = learner_sees(browser, url, "probe.ipynb", tmp_path, before=measure_the_column)
    assert not [p for p in problems if "fits" in p or "roomy" in p], problems
    assert any(p.startswith("widget figure 'fixed' is 700 px") for p in problems), problems
    assert any(p.startswith("titles overlap: 'a long subplot title") for p in problems), problems
    assert any("button label clipped: 'a label much too long" in p for p in problems), problems
    reloads = [p for p in problems if "after a reload" in p]
    assert len(reloads) == 1 and "'first shown'" in reloads[0] and "changed after" in reloads[0], \
        problems  # only the figure whose state changed behind the page's back
    assert not [p for p in problems if p.startswith(("not run", "console"))], problems
    shots = sorted(p.name for p in tmp_path.glob("probe*.png"))
    # the page, then each output: three widget figures (the last one's own figure output inside
    # it is an output too), the static figure and the box of buttons
    assert len(shots) == 1 + 6, shots
