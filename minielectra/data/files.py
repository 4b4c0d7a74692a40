"""sha256 sums of the files minielectra writes and later reads back without rebuilding them.

Each writer records the sums of what it wrote; each reader compares them before trusting the
files (a cache or checkpoint cut short by a full disk or edited): a damaged cache is rebuilt, a
damaged checkpoint is named (:mod:`minielectra.model.storage`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from pathlib import Path


def file_sha256(path: str | Path) -> str:
    """Read through one reused 64 KB buffer: hashing a cache of any size costs no memory."""
    h, buffer = hashlib.sha256(), bytearray(1 << 16)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buffer):
            h.update(view[:n])
    return h.hexdigest()


def sha256_sums(directory: str | Path, names: Iterable[str]) -> dict[str, str]:
    """``{name: sha256}`` of the files ``names`` (paths relative to ``directory``)."""
    return {name: file_sha256(Path(directory) / name) for name in names}


def outside(directory: str | Path, name: str) -> bool:
    """Whether the entry ``name`` of a sums file points out of ``directory``: an absolute path,
    a ``..`` part, or a link (the entry or a folder on its way) that resolves elsewhere."""
    if not isinstance(name, str) or not name or Path(name).is_absolute() or "\\" in name \
            or ".." in Path(name).parts:
        return True
    root = Path(directory).resolve()
    return not (root / name).resolve().is_relative_to(root)


def first_damaged(directory: str | Path, sums: Mapping[str, str]) -> str | None:
    """The first file of ``sums`` that is missing or whose content changed, with what is wrong
    (``"<path>: damaged ..."``); None when every file matches. An entry naming a file outside
    ``directory`` is damage too, and that file is never read."""
    for name, expected in sums.items():
        if outside(directory, name):
            return (f"{Path(directory) / 'checksums.json'}: damaged (its entry {name!r} names a "
                    "file outside the folder, which is never read)")
        path = Path(directory) / name
        if not path.is_file():
            return f"{path}: missing"
        if file_sha256(path) != expected:
            return f"{path}: damaged (its sha256 differs from the one recorded when it was written)"
    return None
