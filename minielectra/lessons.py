"""``minielectra lessons DIR``: copy the course (notebooks and tutorial) out of the package.

``minielectra/notebooks`` and ``minielectra/tutorial`` link to the repository's folders, so a
wheel carries them as package data. ``DIR`` gets the repository's layout (``DIR/notebooks/``,
``DIR/tutorial/``), so links between them work; a link to the library's code is pointed at a copy
in ``DIR/source/minielectra/`` (not ``DIR/minielectra/``, which a Python started in ``DIR`` would
import), and a link to a file only a checkout has becomes its text and its place in the
repository. A lesson file already in ``DIR`` is refused unless ``force``, which replaces only
files an earlier ``lessons`` wrote (``DIR``'s record, :mod:`minielectra.ownership`).
"""

from __future__ import annotations

import errno
import importlib.util
import json
import posixpath
import re
import shlex
from importlib import resources
from pathlib import Path

from .outputs import output_folder
from .ownership import Layout
from .safeio import write_file

# DIR is the learner's workspace too; no folder from before records is adopted: their work
LESSONS = Layout("lessons", shared=True)

# What each part of the course holds (relative to its folder); hidden files and caches never.
PARTS = {"notebooks": ("**/*.ipynb", "**/README.md"),
         "tutorial": ("**/*.md", "img/**/*.png", "img/**/*.svg")}
SOURCE = "source"  # DIR/source/minielectra/...: the library files the lessons link to
# A Markdown link or image: [label](target#anchor); absolute addresses and anchors alone excluded.
LINK = re.compile(r"(!?)\[([^\]\n]*)\]\((?![a-z][a-z0-9+.-]*:|#)([^)\s#]+)(#[^)\s]*)?\)")


def _shipped(part: str) -> Path:
    return Path(str(resources.files("minielectra") / part))


def lesson_files() -> dict[str, Path]:
    """``"notebooks/01_text_to_examples.ipynb"``, ... -> the shipped file, notebooks first, in
    lesson order."""
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


def _package_files(path: str) -> dict[str, Path]:
    """``minielectra/model/electra.py`` -> that file of the installed package; a folder -> its
    files (not its subfolders); {} when the package has no such thing."""
    found = resources.files("minielectra").joinpath(*path.split("/")[1:])
    found = Path(str(found))
    if found.is_file():
        return {path: found}
    if found.is_dir():
        return {f"{path.rstrip('/')}/{p.name}": p for p in sorted(found.iterdir())
                if p.is_file() and not p.name.startswith(".")}
    return {}


def relink(text: str, name: str) -> tuple[str, dict[str, Path]]:
    """The Markdown ``text`` of the course file ``name`` with each link out of the course
    rewritten, and the package files those links need, ``{"minielectra/...": path}``."""
    here, needed = posixpath.dirname(name), {}

    def sub(m: re.Match) -> str:
        bang, label, target, anchor = m.group(1), m.group(2), m.group(3), m.group(4) or ""
        path = posixpath.normpath(posixpath.join(here, target))
        top = path.split("/")[0]
        if top in PARTS:
            return m.group(0)
        files = _package_files(path) if top == "minielectra" else {}
        if files:
            needed.update(files)
            new = posixpath.relpath(f"{SOURCE}/{path}", here) + ("/" if target.endswith("/")
                                                                 else "")
            return f"{bang}[{label}]({new}{anchor})"
        return f"{label} (minielectra repository: `{path}`)"  # a picture too: say what it was

    return LINK.sub(sub, text), needed


def _course_bytes(name: str, source: Path) -> tuple[bytes, dict[str, Path]]:
    """A course file as the copy holds it, relinked, and the package files its links need."""
    if name.endswith(".md"):
        text, needed = relink(source.read_text(encoding="utf-8"), name)
        return text.encode("utf-8"), needed
    if not name.endswith(".ipynb"):
        return source.read_bytes(), {}
    needed: dict[str, Path] = {}

    def change(text: str) -> str:
        new, files = relink(text, name)
        needed.update(files)
        return new

    return map_markdown(source.read_text(encoding="utf-8"), change).encode("utf-8"), needed


def map_markdown(notebook: str, change) -> str:
    """A notebook's JSON text with each Markdown cell's text passed through ``change``: the text
    as it was when no cell changes, else written as nbformat writes a notebook (one space of
    indent, non-ASCII as it is, a final newline)."""
    nb, changed = json.loads(notebook), False
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            text = "".join(cell["source"])
            new = change(text)
            if new != text:
                cell["source"], changed = new.splitlines(keepends=True), True
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n" if changed else notebook


def copy_lessons(directory: str | Path, *, force: bool = False) -> dict:
    """Copy every lesson into ``directory`` (created if needed), with the library files they
    link in ``source/``; a lesson file already there is refused unless ``force``."""
    directory = Path(directory).expanduser()
    if directory.exists() and not directory.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "is a file, not a folder: give the folder the "
                                 "lessons go to", str(directory))
    course, sources = {}, {}  # {name in DIR: bytes}
    for name, path in lesson_files().items():
        course[name], needed = _course_bytes(name, path)
        sources.update({f"{SOURCE}/{n}": p.read_bytes() for n, p in needed.items()})
    sources = dict(sorted(sources.items()))
    files = {**course, **sources}
    clashes = [str(directory / n) for n in files if (directory / n).exists()]
    # a link or a file where a folder goes, or at a lesson's name a file that no `lessons` wrote:
    # refused, even forced (no lock: a second copy at once writes the same bytes)
    with output_folder(directory, LESSONS, files=files, lock=False, flag="DIR"):
        if clashes and not force:
            raise FileExistsError(f"{len(clashes)} lesson file(s) already exist, e.g. "
                                  f"{clashes[0]}; pass --force to overwrite them")
        for name, data in files.items():
            target = directory / name
            target.parent.mkdir(parents=True, exist_ok=True)
            write_file(target, data)  # at once; never through a link
    return {"directory": str(directory), "files": list(course), "sources": list(sources),
            "overwritten": clashes, "next": next_step(directory)}


def next_step(directory: Path) -> str:
    """The command that opens the copied course (installing JupyterLab first where missing)."""
    opens = f"jupyter lab {shlex.quote(str(directory))}"
    if importlib.util.find_spec("jupyterlab") is None:
        return f'pip install "jupyterlab>=4.0" && {opens}'
    return opens
