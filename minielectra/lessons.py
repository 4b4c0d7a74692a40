"""``minielectra lessons DIR``: copy the course (notebooks and tutorial) out of the package.

The notebooks live in the repository's ``notebooks/`` and their chapters in ``tutorial/``;
``minielectra/notebooks`` and ``minielectra/tutorial`` are symbolic links to those folders, so an
editable install reads them in place and a wheel carries a copy as package data
(``pyproject.toml``). ``DIR`` gets the repository's layout, ``DIR/notebooks/`` and
``DIR/tutorial/`` (with ``img/``), so the links between them (``../tutorial/...``,
``../notebooks/...``) work there too. A learner without a checkout runs ``minielectra lessons
my-course`` and then ``jupyter lab my-course``; the notebooks find the bundled checkpoint and the
built-in ``pydocs`` corpus, so no data directory is needed.

A learner's copy is their work: a lesson file already in ``DIR`` is refused, naming it, unless
``force``; and ``force`` replaces only the files an earlier ``lessons`` wrote there (``DIR``'s
record, :mod:`minielectra.ownership`): a file of the learner's at a lesson's name, or a symbolic
link there or on the way, is refused even then, so nothing is written over or through it.
"""

from __future__ import annotations

import errno
from importlib import resources
from pathlib import Path

from .ownership import Layout, check_claim, claim
from .safeio import write_file

# DIR is the learner's workspace too; no folder from before records is adopted: their work
LESSONS = Layout("lessons", shared=True)

# What each part of the course holds (relative to its folder); hidden files and caches never.
PARTS = {"notebooks": ("**/*.ipynb", "**/README.md"),
         "tutorial": ("**/*.md", "img/**/*.png", "img/**/*.svg")}


def _shipped(part: str) -> Path:
    return Path(str(resources.files("minielectra") / part))


def lesson_files() -> dict[str, Path]:
    """``"notebooks/01_text_to_examples.ipynb"``, ``"tutorial/img/..."``, ... -> the shipped file,
    in a stable order (notebooks first, in lesson order)."""
    found = {}
    for part, patterns in PARTS.items():
        root = _shipped(part)
        for pattern in patterns:
            for p in root.glob(pattern):
                rel = p.relative_to(root)
                if p.is_file() and not any(s.startswith(".") or s == "__pycache__"
                                           for s in rel.parts):
                    found[f"{part}/{rel.as_posix()}"] = p
    if not any(name.endswith(".ipynb") for name in found):
        raise FileNotFoundError(f"no notebooks in {_shipped('notebooks')}: this installation of "
                                "minielectra does not ship the lessons (reinstall it, or use a "
                                "checkout's notebooks/ folder)")
    return dict(sorted(found.items()))


def copy_lessons(directory: str | Path, *, force: bool = False) -> dict:
    """Copy every lesson into ``directory`` (created if needed), as ``notebooks/`` and
    ``tutorial/``. A lesson file already there is refused, naming it, unless ``force``: a
    learner's edited notebook is their work; one ``lessons`` did not write is refused always."""
    directory = Path(directory).expanduser()
    if directory.exists() and not directory.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "is a file, not a folder: give the folder the "
                                 "lessons go to", str(directory))
    files = lesson_files()
    # a file at a lesson's name that no `lessons` wrote, or a link there: refused, even forced
    check_claim(directory, LESSONS, files, flag="DIR")
    clashes = [str(directory / n) for n in files if (directory / n).exists()]
    if clashes and not force:
        raise FileExistsError(f"{len(clashes)} lesson file(s) already exist, e.g. {clashes[0]}; "
                              "pass --force to overwrite them")
    claim(directory, LESSONS, files, flag="DIR")
    for name, source in files.items():
        target = directory / name
        target.parent.mkdir(parents=True, exist_ok=True)
        write_file(target, source.read_bytes())  # at once; never through a link
    return {"directory": str(directory), "files": list(files), "overwritten": clashes,
            "next": f"jupyter lab {directory}"}
