"""``minielectra lessons DIR``: the course's notebooks reach a learner who has no checkout.

The reference is the repository's ``notebooks/`` folder, read directly (not through the package):
the command must copy exactly those files, and a wheel built from this tree must contain them.
"""

import json
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
        ignored = ("NBVAL_IGNORE_OUTPUT" in source  # the comment, or nbval's cell tag
                   or "nbval-ignore-output" in c.get("metadata", {}).get("tags", []))
        if not ignored:  # compared by nbval: plain text only
            assert kinds <= {"text/plain"}, (name, source[:60], kinds)
            assert not any(o.get("name") == "stderr" for o in c["outputs"]), (name, source[:60])
        assert not any(o["output_type"] == "error" for o in c["outputs"]), (name, source[:60])


def test_notebook_links_resolve():
    link = re.compile(r"\]\((?!https?://|#)([^)#\s]+)(?:#[^)]*)?\)")
    for path in [*NOTEBOOKS.glob("*.ipynb"), NOTEBOOKS / "README.md"]:
        text = path.read_text()
        if path.suffix == ".ipynb":
            text = "\n".join("".join(c["source"]) for c in json.loads(text)["cells"]
                             if c["cell_type"] == "markdown")
        missing = [t for t in link.findall(text) if not (NOTEBOOKS / t).exists()]
        assert not missing, f"{path.name}: broken links {missing}"


def test_lesson_files_are_the_repository_notebooks():
    assert sorted(p.name for p in lesson_files()) == sorted(EXPECTED)


def test_copy_lessons_copies_bytes_and_refuses_to_overwrite(tmp_path):
    out = tmp_path / "course"
    result = copy_lessons(out)
    assert sorted(result["files"]) == sorted(EXPECTED)
    for name in EXPECTED:
        assert (out / name).read_bytes() == (NOTEBOOKS / name).read_bytes()
    assert result["next"] == f"jupyter lab {out}"

    edited = out / EXPECTED[0]
    edited.write_text("my notes")
    with pytest.raises(FileExistsError, match="--force"):
        copy_lessons(out)
    assert edited.read_text() == "my notes"  # nothing was touched
    assert copy_lessons(out, force=True)["overwritten"]
    assert edited.read_bytes() == (NOTEBOOKS / EXPECTED[0]).read_bytes()


def test_cli_lessons(tmp_path, capsys):
    out = tmp_path / "c"
    assert main(["lessons", str(out)]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["directory"] == str(out)
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
    shutil.copytree(NOTEBOOKS, src / "notebooks", ignore=shutil.ignore_patterns(".*"))
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
        shipped = {Path(n).name: z.read(n) for n in z.namelist()
                   if n.startswith("minielectra/notebooks/")}
    assert sorted(shipped) == sorted(EXPECTED)
    for name, data in shipped.items():
        assert data == (NOTEBOOKS / name).read_bytes(), name
