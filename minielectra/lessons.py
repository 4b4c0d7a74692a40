"""``minielectra lessons DIR``: copy the course's notebooks out of the installed package.

The notebooks live in the repository's ``notebooks/``; ``minielectra/notebooks`` is a symbolic link
to that folder, so an editable install reads them in place and ``pip install minielectra`` (a
wheel) carries a copy as package data (``pyproject.toml``). A learner without a checkout runs
``minielectra lessons my-course`` and then ``jupyter lab my-course``; the notebooks find the
bundled checkpoint and the built-in ``pydocs`` corpus, so no data directory is needed.
"""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path

FILES = ("*.ipynb", "README.md")


def lesson_files() -> list[Path]:
    """The shipped notebooks (``NN_topic.ipynb``, in lesson order) and the course's README."""
    root = Path(str(resources.files("minielectra") / "notebooks"))
    found = sorted({p for pattern in FILES for p in root.glob(pattern)})
    if not any(p.suffix == ".ipynb" for p in found):
        raise FileNotFoundError(f"no notebooks in {root}: this installation of minielectra does "
                                "not ship the lessons (reinstall it, or use a checkout's "
                                "notebooks/ folder)")
    return found


def copy_lessons(directory: str | Path, *, force: bool = False) -> dict:
    """Copy every lesson into ``directory`` (created if needed). An existing file of the same
    name is refused, naming it, unless ``force``: a learner's edited notebook is their work."""
    directory = Path(directory).expanduser()
    files = lesson_files()
    clashes = [str(directory / f.name) for f in files if (directory / f.name).exists()]
    if clashes and not force:
        raise FileExistsError(f"{len(clashes)} lesson file(s) already exist, e.g. {clashes[0]}; "
                              "pass --force to overwrite them")
    directory.mkdir(parents=True, exist_ok=True)
    for f in files:
        shutil.copyfile(f, directory / f.name)
    return {"directory": str(directory), "files": [f.name for f in files],
            "overwritten": clashes, "next": f"jupyter lab {directory}"}
