"""``minielectra lessons DIR``: copy the course (notebooks and tutorial) out of the package.

The notebooks live in the repository's ``notebooks/`` and their chapters in ``tutorial/``;
``minielectra/notebooks`` and ``minielectra/tutorial`` are symbolic links to those folders, so an
editable install reads them in place and a wheel carries a copy as package data
(``pyproject.toml``). ``DIR`` gets the repository's layout, ``DIR/notebooks/`` and
``DIR/tutorial/`` (with ``img/``), so the links between them (``../tutorial/...``,
``../notebooks/...``) work there too. A learner without a checkout runs ``minielectra lessons
my-course`` and then ``jupyter lab my-course``; the notebooks find the bundled checkpoint and the
built-in ``pydocs`` corpus, so no data directory is needed.

A learner's copy is their work: a file already in ``DIR`` is refused, naming it, unless
``force``; and nothing is ever written through a symbolic link inside ``DIR`` (with ``force`` the
link itself is replaced, never its target).
"""

from __future__ import annotations

import errno
import importlib.util
import shlex
from importlib import resources
from pathlib import Path

from .safeio import refuse_link, write_file

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


def _check_folders(directory: Path, names) -> None:
    """Every folder on the way to a lesson file is a real folder (or absent): a link there would
    send the copy elsewhere, and a file there cannot hold one."""
    for name in names:
        where = directory
        for part in Path(name).parts[:-1]:
            where = where / part
            refuse_link(where)
            if where.exists() and not where.is_dir():
                raise NotADirectoryError(errno.ENOTDIR, "is a file, not a folder", str(where))


def copy_lessons(directory: str | Path, *, force: bool = False) -> dict:
    """Copy every lesson into ``directory`` (created if needed), as ``notebooks/`` and
    ``tutorial/``. An existing file (or link) of the same name is refused, naming it, unless
    ``force``: a learner's edited notebook is their work."""
    directory = Path(directory).expanduser()
    if directory.exists() and not directory.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "is a file, not a folder: give the folder the "
                                 "lessons go to", str(directory))
    files = lesson_files()
    _check_folders(directory, files)
    clashes = [str(directory / n) for n in files
               if (directory / n).exists() or (directory / n).is_symlink()]
    if clashes and not force:
        raise FileExistsError(f"{len(clashes)} lesson file(s) already exist, e.g. {clashes[0]}; "
                              "pass --force to overwrite them")
    for name, source in files.items():
        target = directory / name
        if target.is_dir() and not target.is_symlink():
            raise IsADirectoryError(errno.EISDIR, "is a folder, not a lesson file", str(target))
        target.parent.mkdir(parents=True, exist_ok=True)
        write_file(target, source.read_bytes())  # replaces a link itself, never its target
    return {"directory": str(directory), "files": list(files), "overwritten": clashes,
            "next": next_step(directory)}


def next_step(directory: Path) -> str:
    """The command that opens the copied course, installing JupyterLab first where this
    environment lacks it (the ``notebooks`` extra, or JupyterLab alone)."""
    opens = f"jupyter lab {shlex.quote(str(directory))}"
    if importlib.util.find_spec("jupyterlab") is None:
        return f'pip install "jupyterlab>=4.0" && {opens}'
    return opens
