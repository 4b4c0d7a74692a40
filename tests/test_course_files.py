"""What a learner reads cites only what a learner has, and the diagrams are real pictures.

- No file of the repository names the project's internal reference notes (their name is built
  below from two halves so that this file does not match itself); the official recipe's values
  live in ``tutorial/appendix_official_recipe.md``, each with its official source file.
- The diagrams in ``tutorial/img/*.svg`` parse as SVG, hold their words as ``<text>`` (readable,
  searchable, translatable) and are each shown by a tutorial chapter.
"""

import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
INTERNAL = "ELECTRA_" + "REFERENCE"
SVG = "{http://www.w3.org/2000/svg}"
DIAGRAMS = ["electra_overview.svg", "example_layout.svg", "training_step.svg"]


def repository_files() -> list[Path]:
    """Tracked and untracked-but-not-ignored files (a CI venv inside the checkout is ignored);
    every file under the root except .git when this is not a git checkout."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             cwd=ROOT, capture_output=True, check=True).stdout
        names = [n for n in out.decode().split("\0") if n]
    except (OSError, subprocess.CalledProcessError):
        names = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if ".git" not in p.parts]
    return [ROOT / n for n in names if (ROOT / n).is_file() and not (ROOT / n).is_symlink()]


def test_no_file_names_the_internal_reference():
    files = repository_files()
    assert len(files) > 50 and ROOT / "README.md" in files  # the listing itself worked
    hits = [str(p.relative_to(ROOT)) for p in files if INTERNAL.encode() in p.read_bytes()]
    assert not hits, f"cite tutorial/appendix_official_recipe.md instead: {hits}"


def test_the_appendix_names_official_source_files():
    text = (ROOT / "tutorial" / "appendix_official_recipe.md").read_text()
    for name in ["configure_pretraining.py", "run_pretraining.py", "pretrain/pretrain_helpers.py",
                 "build_pretraining_dataset.py", "model/optimization.py", "flops_computation.py",
                 "configure_finetuning.py"]:
        assert f"`{name}" in text, name


@pytest.mark.parametrize("name", DIAGRAMS)
def test_diagrams_are_svg_with_text_as_text(name):
    root = ET.parse(ROOT / "tutorial" / "img" / name).getroot()
    assert root.tag == f"{SVG}svg", root.tag
    assert float(root.get("width")) >= 600 and root.get("viewBox"), name  # readable, scalable
    words = " ".join("".join(t.itertext()) for t in root.iter(f"{SVG}text"))
    assert len(words.split()) >= 20, words  # the labels are text, not paths or pixels
    assert root.find(f"{SVG}title") is not None  # what a screen reader announces


@pytest.mark.parametrize("name", DIAGRAMS)
def test_each_diagram_is_shown_by_a_chapter(name):
    chapters = sorted((ROOT / "tutorial").glob("[0-9][0-9]_*.md"))
    shown = [p.name for p in chapters if f"](img/{name})" in p.read_text()]
    assert shown, f"no tutorial chapter embeds img/{name}"


CHAPTERS = sorted((ROOT / "tutorial").glob("[0-9][0-9]_*.md"))


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_each_chapter_links_a_runnable_solutions_notebook(chapter):
    """The exercises' solutions are code a learner runs (nbval runs them too), not prose."""
    import nbformat

    name = f"{chapter.name[:2]}_solutions.ipynb"
    text = chapter.read_text()
    assert f"](../notebooks/solutions/{name})" in text, f"{chapter.name} does not link {name}"
    assert "not measured" not in text.lower(), chapter.name
    nb = nbformat.read(ROOT / "notebooks" / "solutions" / name, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.execution_count for c in code), f"{name} is not committed executed"
    assert not [c for c in code if "# NBVAL_" in c.source], "nbval instructions belong in tags"
