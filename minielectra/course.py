"""Where the course is: the folder ``minielectra lessons DIR`` made, found from any notebook in it.

The lessons say "run ``minielectra pretrain --preset nano`` from the course root", which writes
``runs/nano`` there, while a notebook runs in ``notebooks/`` or ``notebooks/solutions/``. Every
notebook and the explorer's checkpoint box find such a path the same way, :func:`course_path`.
"""

from __future__ import annotations

from pathlib import Path

from .ownership import read_manifest


def course_root(start: str | Path | None = None) -> Path | None:
    """The nearest folder at or above ``start`` (default: the working directory) that
    ``minielectra lessons`` wrote (its record says so); outside a copied course, the nearest
    that holds ``notebooks/`` and ``tutorial/`` side by side (a checkout of the repository);
    None outside both."""
    here = (Path.cwd() if start is None else Path(start)).absolute()
    folders = (here, *here.parents)
    for folder in folders:
        record = read_manifest(folder)
        if record is not None and record["command"] == "lessons":
            return folder
    return next((f for f in folders if (f / "notebooks").is_dir() and (f / "tutorial").is_dir()),
                None)


def course_path(path: str | Path, *, start: str | Path | None = None) -> Path:
    """``path`` as a lesson means it: as given where it exists from ``start`` (an absolute path,
    ``../runs/nano``), else against the course root where it exists there (``runs/nano``
    trained from the root), else unchanged, so that an error names what was typed."""
    path = Path(path)
    here = Path.cwd() if start is None else Path(start)
    if (here / path).exists():
        return path if start is None else here / path
    root = course_root(here)
    if root is not None and not path.is_absolute() and (root / path).exists():
        return root / path
    return path
