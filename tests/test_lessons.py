"""``minielectra lessons DIR``: the course's notebooks and tutorial reach a learner who has no
checkout.

The reference is the repository's ``notebooks/`` and ``tutorial/`` folders, read directly (not
through the package): the command must copy exactly those files, in the same layout, and a wheel
built from this tree must contain them.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from minielectra.cli import main
from minielectra.lessons import copy_lessons, lesson_files

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
EXPECTED = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) + ["README.md"]
# The whole course as the repository lays it out: what `lessons DIR` copies, path for path.
COURSE = sorted([f"notebooks/{p.relative_to(NOTEBOOKS).as_posix()}"
                 for p in NOTEBOOKS.rglob("*") if p.suffix == ".ipynb" or p.name == "README.md"] +
                [f"tutorial/{p.relative_to(ROOT / 'tutorial').as_posix()}"
                 for p in (ROOT / "tutorial").rglob("*")
                 if p.suffix in (".md", ".png", ".svg")])


def test_the_course_is_numbered_lessons():
    stems = [n for n in EXPECTED if n.endswith(".ipynb")]
    assert len(stems) >= 1
    numbers = [int(n[:2]) for n in stems]
    assert numbers == list(range(1, len(stems) + 1)), stems  # 01, 02, ... with no gaps
    for n in stems:  # each notebook has a tutorial chapter of the same number and stem
        assert (ROOT / "tutorial" / n.replace(".ipynb", ".md")).is_file(), n


@pytest.mark.parametrize("name", [n for n in EXPECTED if n.endswith(".ipynb")])
def test_each_lesson_follows_the_template(name):
    """Goal, a rebuild checked against the library, recap, exercises; committed executed (nbval
    compares only cells with an execution count); compared outputs hold nothing variable."""
    nb = json.loads((NOTEBOOKS / name).read_text())
    markdown = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    for heading in ("**Goal.**", "## Recap", "## Exercises"):
        assert heading in markdown, (name, heading)
    assert any("assert_close" in "".join(c["source"]) for c in code), name
    setup = "".join(code[0]["source"])
    assert "torch.manual_seed" in setup and "torch.set_num_threads" in setup, name
    assert [c["execution_count"] for c in code] == list(range(1, len(code) + 1)), name
    assert "widgets" not in nb["metadata"], f"{name}: saved widget state (megabytes)"
    for c in code:
        source, kinds = "".join(c["source"]), {k for o in c["outputs"] for k in o.get("data", {})}
        if not _ignored(c):  # compared by nbval: plain text only
            assert kinds <= {"text/plain"}, (name, source[:60], kinds)
            assert not any(o.get("name") == "stderr" for o in c["outputs"]), (name, source[:60])
        assert not any(o["output_type"] == "error" for o in c["outputs"]), (name, source[:60])


@pytest.mark.parametrize("name", [n for n in EXPECTED if n.endswith(".ipynb")])
def test_each_lesson_has_a_stub_the_solutions_fill(name):
    """"Your turn": the lesson's stub raises NotImplementedError and its check cell says it is
    not written yet; the solutions notebook defines the same function and the check accepts it."""
    def turn(nb):
        code = [c for c in nb["cells"] if c["cell_type"] == "code"]
        i = next(i for i, c in enumerate(code) if "minielectra.exercises." in "".join(c["source"]))
        out = "".join("".join(o.get("text", [])) for o in code[i]["outputs"])
        return "".join(code[i - 1]["source"]), out
    stub, said = turn(json.loads((NOTEBOOKS / name).read_text()))
    filled, accepted = turn(json.loads((NOTEBOOKS / f"solutions/{name[:2]}_solutions.ipynb")
                                       .read_text()))
    function = re.search(r"^def (\w+)\(", stub, re.M)[1]
    assert "raise NotImplementedError" in stub and "is not written yet" in said, name
    assert f"def {function}(" in filled and "NotImplementedError" not in filled, name
    assert f"`{function}` is right" in accepted, (name, accepted)


@pytest.mark.parametrize("name", [n for n in EXPECTED if n.endswith(".ipynb")])
def test_each_lesson_ends_pointing_at_its_solutions(name):
    """The exercises' last line says where their solutions are: the chapter's Solutions section
    and the lesson's solutions notebook, both existing files."""
    nb = json.loads((NOTEBOOKS / name).read_text())
    last = "".join(nb["cells"][-1]["source"]).strip().splitlines()[-1]
    solutions = f"solutions/{name[:2]}_solutions.ipynb"
    assert last.startswith("Solutions are in"), (name, last)
    assert f"](../tutorial/{name.replace('.ipynb', '.md')}#solutions)" in last, (name, last)
    assert f"]({solutions})" in last and (NOTEBOOKS / solutions).is_file(), (name, last)
    chapter = (ROOT / "tutorial" / name.replace(".ipynb", ".md")).read_text()
    assert "\n## Solutions" in chapter, name


def _ignored(cell: dict) -> bool:
    """nbval does not compare this cell's output (its metadata tag says so)."""
    tags = cell.get("metadata", {}).get("tags", [])
    return "nbval-ignore-output" in tags or "nbval-skip" in tags or (  # a comment marker
        "NBVAL_IGNORE_OUTPUT" in "".join(cell["source"]))  # is refused below


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.rglob("*.ipynb")), ids=lambda p: p.name)
def test_nbval_instructions_are_tags_not_comments(path):
    """nbval reads ``# NBVAL_...`` comments and cell tags alike; the tags keep them out of the
    learner's code. Reference: nbval's own table of comment markers."""
    from nbval.plugin import comment_markers
    nb = json.loads(path.read_text())
    for c in nb["cells"]:
        if c["cell_type"] != "code":
            continue
        comments = [line.strip() for line in "".join(c["source"]).splitlines()
                    if line.strip().startswith("#")
                    and line.strip().lstrip("#").strip() in comment_markers]
        assert not comments, f"{path.name}: {comments[0]} is a comment; use the tag " \
            f"{comments[0].lstrip('# ').lower().replace('_', '-')!r} in the cell's metadata"


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("*.ipynb")), ids=lambda p: p.name)
def test_every_committed_figure_has_a_picture_beside_it(path):
    """A plotly output alone shows nothing on GitHub or in nbconvert's HTML: each one carries a
    picture in the same output: a PNG (``minielectra.viz.show.show``, executed with static
    figures on) or an SVG drawn by our own writer (lesson 08's experiment figures)."""
    nb = json.loads(path.read_text())
    for c in nb["cells"]:
        for o in c.get("outputs", []):
            kinds = set(o.get("data", {}))
            if "application/vnd.plotly.v1+json" in kinds:
                assert kinds & {"image/png", "image/svg+xml"}, \
                    f"{path.name}: a figure without a picture beside it " \
                    f"(use show(fig); execute with MINIELECTRA_STATIC_FIGURES=1): " \
                    f"{''.join(c['source'])[:80]!r}"
            assert "VBox(" not in "".join(o.get("data", {}).get("text/plain", "")), path.name


def test_notebook_links_resolve():
    link = re.compile(r"\]\((?!https?://|#)([^)#\s]+)(?:#[^)]*)?\)")
    for path in [*NOTEBOOKS.glob("*.ipynb"), NOTEBOOKS / "README.md"]:
        text = path.read_text()
        if path.suffix == ".ipynb":
            text = "\n".join("".join(c["source"]) for c in json.loads(text)["cells"]
                             if c["cell_type"] == "markdown")
        missing = [t for t in link.findall(text) if not (NOTEBOOKS / t).exists()]
        assert not missing, f"{path.name}: broken links {missing}"


def test_lesson_files_are_the_repository_course():
    assert sorted(lesson_files()) == COURSE
    assert any(n.startswith("tutorial/img/") for n in COURSE)


# A Markdown link, and the form a link to a file only a checkout has takes in a copy.
MD_LINK = re.compile(r"!?\[([^\]\n]*)\]\(([^)\s]+)\)")
MENTION = re.compile(r" \(minielectra repository: `[^`]+`\)")


def _prose(text: str, *, copy: bool) -> str:
    """Markdown with every link reduced to its label (and, in a copy, every repository mention
    dropped): what the copy must keep of the repository's file, word for word."""
    text = MD_LINK.sub(lambda m: m.group(1), text)
    return MENTION.sub("", text) if copy else text


def _markdown(path: Path) -> str:
    if path.suffix != ".ipynb":
        return path.read_text()
    return "\n".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"]
                     if c["cell_type"] == "markdown")


def test_copy_lessons_copies_the_course_and_refuses_to_overwrite(tmp_path):
    out = tmp_path / "course"
    result = copy_lessons(out)
    assert sorted(result["files"]) == COURSE
    for name in COURSE:
        copied, original = out / name, ROOT / name
        if name.endswith((".md", ".ipynb")):  # the same words; only links out may differ
            assert _prose(_markdown(copied), copy=True) == _prose(_markdown(original),
                                                                  copy=False), name
        if name.endswith(".ipynb"):  # the code and its outputs: exactly the repository's
            code = lambda p: [c for c in json.loads(p.read_text())["cells"]  # noqa: E731
                              if c["cell_type"] == "code"]
            assert code(copied) == code(original), name
        elif not name.endswith(".md"):
            assert copied.read_bytes() == original.read_bytes(), name
    assert result["next"] == f"jupyter lab {out}"

    edited = out / "notebooks" / EXPECTED[0]
    edited.write_text("my notes")
    with pytest.raises(FileExistsError, match="--force"):
        copy_lessons(out)
    assert edited.read_text() == "my notes"  # nothing was touched
    assert copy_lessons(out, force=True)["overwritten"]
    assert _prose(_markdown(edited), copy=True) == \
        _prose(_markdown(NOTEBOOKS / EXPECTED[0]), copy=False)


def test_every_relative_link_of_a_copied_course_resolves(tmp_path):
    """A learner without a checkout clicks a lesson's "Code:" link or the model card: the file
    is there (the library's own, under source/). Reference: the repository's file of the same
    path, and a Python started in the course folder still imports the installed package."""
    result = copy_lessons(tmp_path)
    checked, broken = 0, []
    for name in [*result["files"], *result["sources"]]:
        if not name.endswith((".md", ".ipynb")):
            continue
        for _, target in MD_LINK.findall(_markdown(tmp_path / name)):
            if re.match(r"[a-z][a-z0-9+.-]*:|#", target):
                continue
            checked += 1
            if not (tmp_path / name).parent.joinpath(target.split("#")[0]).exists():
                broken.append(f"{name}: {target}")
    assert checked > 100 and not broken, broken
    sources = result["sources"]
    assert "source/minielectra/model/electra.py" in sources
    assert "source/minielectra/assets/bundled/MODEL_CARD.md" in sources
    for name in sources:
        assert (tmp_path / name).read_bytes() == \
            (ROOT / name.removeprefix("source/")).read_bytes(), name
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the installed package
    found = subprocess.run([sys.executable, "-c", "import minielectra; print(minielectra.__file__)"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, check=True).stdout
    assert not Path(found.strip()).is_relative_to(tmp_path), found


def test_links_between_notebooks_and_tutorial_resolve_in_the_copy(tmp_path):
    """The copy keeps the repository's layout, so ../tutorial/... and ../notebooks/... work."""
    copy_lessons(tmp_path)
    link = re.compile(r"\]\((\.\./(?:notebooks|tutorial)/[^)#\s]+)")
    checked = 0
    for name in COURSE:
        if name.endswith((".md", ".ipynb")):
            for target in link.findall((tmp_path / name).read_text()):
                assert (tmp_path / name).parent.joinpath(target).exists(), (name, target)
                checked += 1
    assert checked >= 8


def test_cli_lessons(tmp_path, capsys):
    out = tmp_path / "c"
    assert main(["lessons", str(out)]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["directory"] == str(out)
    # the files counted by folder, as the copy holds them; not a list that fills the screen
    on_disk = {part: sum(1 for p in (out / part).rglob("*") if p.is_file())
               for part in ("notebooks", "tutorial", "source")}
    assert json.loads(captured.out)["files"] == on_disk and min(on_disk.values()) > 0
    assert len(captured.out.splitlines()) <= 12
    assert f"source/ ({on_disk['source']}: the library's files the lessons link to)" in captured.err
    assert f"jupyter lab {out}" in captured.err
    assert main(["lessons", str(out)]) == 2  # refused: one line, no traceback
    assert "already exist" in capsys.readouterr().err
    assert main(["lessons", str(out), "--force"]) == 0


def _setuptools_major() -> int:
    try:
        return int(metadata.version("setuptools").split(".")[0])
    except (metadata.PackageNotFoundError, ValueError):
        return 0


@pytest.mark.slow
def test_the_wheel_ships_the_notebooks(tmp_path):
    if subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode:
        pytest.skip("pip is not available")
    # From a copy of the sources: an in-tree build reuses build/, where stale files survive.
    src = tmp_path / "src"
    shutil.copytree(ROOT / "minielectra", src / "minielectra", symlinks=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    for part in ("notebooks", "tutorial"):
        shutil.copytree(ROOT / part, src / part, ignore=shutil.ignore_patterns(".*"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    # Offline when this environment can build the wheel itself (setuptools >= 77, the
    # pyproject's requirement); otherwise pip fetches the build requirements, as any install does.
    isolation = ["--no-build-isolation"] if _setuptools_major() >= 77 else []
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", *isolation, "-q",
                           "-w", str(tmp_path / "dist"), str(src)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    wheel, = (tmp_path / "dist").glob("minielectra-*.whl")
    with zipfile.ZipFile(wheel) as z:
        shipped = {n.removeprefix("minielectra/"): z.read(n) for n in z.namelist()
                   if n.startswith(("minielectra/notebooks/", "minielectra/tutorial/"))}
    assert sorted(shipped) == COURSE
    for name, data in shipped.items():
        assert data == (ROOT / name).read_bytes(), name
    # The install guide's recipe: torch first, then the wheel, and pip keeps that torch (here,
    # this environment's) rather than fetching the package index's (CUDA on Linux x86-64).
    report = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-index",
                           "-q", "--report", str(report), str(wheel)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    installs = [i["metadata"]["name"] for i in json.loads(report.read_text())["install"]]
    assert installs == ["minielectra"], installs


# Lesson 08's table of English measurements, row label -> (results folder, arm): filled into the
# lesson (docs/_ext/results.py fill) so that a copied course, without the repository's results
# files, shows it too; this holds each row to the arm its label names.
ENGLISH_ARMS = {"ELECTRA, generator 1/8": ("generator-size-mini", "generator 1/8"),
                "ELECTRA, generator 1/4 (the paper's)": ("efficiency-mini", "ELECTRA"),
                "ELECTRA, generator 1/2": ("generator-size-mini", "generator 1/2"),
                "ELECTRA, generator 1 (as wide)": ("generator-size-mini", "generator 1"),
                "BERT-style MLM": ("efficiency-mini", "BERT (MLM)"),
                "random init": ("efficiency-mini", "random init (no pre-training)")}


def test_lesson_08s_english_table_is_the_results_files():
    cells = json.loads((NOTEBOOKS / "08_scaling_up.ipynb").read_text())["cells"]
    text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    text = re.sub(r"<!-- /?result[^>]*-->", "", text)  # the figures as a reader sees them
    shown = {m[1]: (m[2], m[3]) for m in re.finditer(
        r"^\| ([^|]+?) \| \**([\d.]+ ± [\d.]+)\** \| \**([\d.]+ ± [\d.]+)\** \|$", text, re.M)}
    results = ROOT / "research" / "results" / "experiments"
    want = {}
    for label, (folder, arm) in ENGLISH_ARMS.items():
        rows = json.loads((results / folder / "results.json").read_text())["rows"]
        r = next(r for r in rows if r["arm"] == arm)
        want[label] = (f"{r['swap_score']:.1f} ± {r['swap_score_sd']:.1f}",
                       f"{r['probe_avg']:.1f} ± {r['probe_avg_sd']:.1f}")
    assert shown == want
    best = max(want, key=lambda k: float(want[k][0].split()[0]))
    assert best == "ELECTRA, generator 1/8"  # what the prose after the table says


def test_lesson_05s_loop_runs_the_learners_step():
    """The loop that must equal ``minimal_pretrain`` runs the step the learner writes (the
    library's until the stub is filled), not steps the lesson wrote for them."""
    code = [c for c in json.loads((NOTEBOOKS / "05_training_electra.ipynb").read_text())["cells"]
            if c["cell_type"] == "code"]
    i = next(i for i, c in enumerate(code) if "minielectra.exercises." in "".join(c["source"]))
    assert "def electra_step(" in "".join(code[i - 1]["source"])
    loop = "".join(code[i + 1]["source"])
    assert re.search(r"for step in range\(steps\)", loop) and "electra_step(model" in loop
    assert "minimal_pretrain" in loop and "assert_close(ours, library" in loop


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.rglob("*.ipynb")), ids=lambda p: p.name)
def test_formulas_read_as_text_in_a_learners_offline_html(path):
    """``jupyter nbconvert --to html`` loads MathJax from a CDN: offline, ``$...$`` stays raw.
    The notebooks write their formulas in Unicode and HTML (``<sub>``, ``<sup>``), which every
    reader shows as they are: no TeX for a renderer to typeset, and every ``*x*`` italic."""
    from nbconvert.filters.markdown import markdown2html
    nb = json.loads(path.read_text())
    for c in nb["cells"]:
        if c["cell_type"] != "markdown":
            continue
        source = "".join(c["source"])
        assert not re.search(r"\$\$|\$[^$\s][^$\n]*\$|\\(frac|sqrt|mathrm|text)\b", source), \
            (path.name, source[:80])
        html = markdown2html(source)
        text = re.sub(r"<code>.*?</code>|<pre>.*?</pre>", "", html, flags=re.S)
        assert not re.search(r"(?<![\w*])\*\w[^*\n]*\*(?![\w*])", text), (path.name, source[:80])
