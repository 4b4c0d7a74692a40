"""Which folders a command may write: its own, by the record it left there, and never an input.

A command that writes a folder leaves :data:`MANIFEST` in it, naming the files it wrote; a file
in the way that the record does not name is the user's, and the command is refused in one line
(:func:`claim`). A folder from before records is adopted only when its layout and run record
match (:class:`Layout`); an output that is or holds an input is refused (:func:`refuse_overlap`);
the door every command's output goes through is :mod:`.outputs`. The guarantees, each with its
test: ``docs/guides/faults.md``.
"""

from __future__ import annotations

import errno
import fnmatch
import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from .safeio import LOCK_FILE, held_here, write_file

log = logging.getLogger(__name__)

MANIFEST = ".minielectra-files.json"
# write_file's temporary file of NAME (".NAME.<8 random>.tmp"), left by a process killed mid-write
_TEMP = re.compile(r"^\.(?P<name>.+)\.[a-z0-9_]{8}\.tmp$")

# ------------------------------------------------------------------------ 1. the record


@dataclass(frozen=True)
class Layout:
    """A command's folder: its name in the record, and how a folder from before records is
    recognised (every entry matches an fnmatch pattern of ``names`` and ``record(folder)`` is
    true; ``record=None``: never)."""

    command: str
    names: tuple[str, ...] = ()
    record: Callable[[Path], bool] | None = None
    shared: bool = False  # the folder is the user's too (lessons DIR): only names in the way


def read_manifest(folder: str | Path) -> dict | None:
    """The folder's record, or None (absent, a link, or not one this module wrote)."""
    path = Path(folder) / MANIFEST
    if path.is_symlink() or not path.is_file():
        return None
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    ok = (isinstance(value, dict) and isinstance(value.get("command"), str)
          and isinstance(value.get("files"), list)
          and all(isinstance(f, str) for f in value["files"]))
    return value if ok else None


def write_manifest(folder: str | Path, layout: Layout, files: Iterable[str]) -> None:
    """Record ``files`` (paths relative to ``folder``; ``name/`` for a whole folder) as written
    by ``layout.command``."""
    record = {"command": layout.command, "files": sorted(set(files)),
              "about": "the files minielectra wrote here; any other file is yours, and "
                       "minielectra refuses to write over it"}
    write_file(Path(folder) / MANIFEST, json.dumps(record, indent=1) + "\n")


def _adoptable(folder: Path, layout: Layout) -> bool:
    if layout.record is None or (folder / MANIFEST).exists() or (folder / MANIFEST).is_symlink():
        return False
    entries = [p for p in folder.iterdir() if p.name != LOCK_FILE]
    if not entries or any(p.is_symlink() or not any(fnmatch.fnmatchcase(p.name, n)
                                                    for n in layout.names) for p in entries):
        return False
    try:
        return bool(layout.record(folder))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


def claimed_by(record: dict) -> set[str]:
    """The names a record claims, the record among them."""
    return set(record["files"]) | {MANIFEST}


def claimed(folder: str | Path, layout: Layout) -> set[str]:
    """What ``layout.command`` wrote in ``folder`` by its record (and the record), or, for a
    folder it adopts, everything there."""
    folder = Path(folder)
    if not folder.is_dir():
        return set()
    record = read_manifest(folder)
    if record is not None:
        return claimed_by(record) if record["command"] == layout.command else set()
    if _adoptable(folder, layout):
        return {p.name + ("/" if p.is_dir() else "") for p in folder.iterdir()
                if p.name != LOCK_FILE}
    return set()


# ------------------------------------------------------------------------ 2. foreign files

_HOLDER = re.compile(r"(pid \d+ on \S+, started .*)?\s*")  # what FolderLock writes


def _foreign(p: Path, rel: str, mine: set[str], command: str) -> list[str]:
    """The files at or under ``p`` (``rel`` to the folder) that ``command`` did not write; a
    link is never the tool's (it writes none). A folder inside that holds the command's own
    record is its own (``experiment efficiency`` beside ``experiments/toy-grammar``)."""
    if p.is_symlink():
        return [rel]
    if p.is_dir():
        if rel + "/" in mine:
            return []
        record = read_manifest(p)
        if record is not None and record["command"] == command:  # by its own record
            mine = {f"{rel}/{f}" for f in claimed_by(record)}
        return [f for c in sorted(p.iterdir()) for f in _foreign(c, f"{rel}/{c.name}", mine,
                                                                  command)]
    if not p.is_file():
        return [rel]  # a pipe, a socket: not ours
    temp = _TEMP.match(p.name)
    if rel in mine or (temp and Path(rel).with_name(temp["name"]).as_posix() in mine):
        return []  # its file, or a write of it that a kill cut short
    lock = rel == LOCK_FILE or (p.name == LOCK_FILE and  # the folder's, or an own folder's
                                f"{Path(rel).parent.as_posix()}/{MANIFEST}" in mine)
    if lock and (held_here(p) or p.stat().st_size < 200 and _HOLDER.fullmatch(
            p.read_bytes().decode("utf-8", "replace"))):
        return []  # a lock file FolderLock made (empty once released), read only if not held
    return [rel]


def foreign_files(folder: str | Path, layout: Layout, names: Iterable[str] | None = None
                  ) -> list[str]:
    """Paths in ``folder`` that ``layout.command`` did not write: among ``names`` (and the
    record, and links on the way to them), or anywhere in the folder."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    mine = claimed(folder, layout)
    wanted = (sorted({n.rstrip("/") for n in names} | {MANIFEST}) if names is not None else
              sorted(p.name for p in folder.iterdir()))
    found = []
    for rel in wanted:
        parts = Path(rel).parts
        for i in range(1, len(parts)):  # a folder on the way: a link would send the write away
            above = folder.joinpath(*parts[:i])
            if above.is_symlink() or (above.exists() and not above.is_dir()):
                found.append(Path(*parts[:i]).as_posix())
        p = folder / rel
        if p.exists() or p.is_symlink():
            found += _foreign(p, rel, mine, layout.command)
    return sorted(set(found))


def refuse_foreign(folder: str | Path, found: list[str], layout: Layout, *,
                   flag: str = "--out") -> None:
    """One line naming the first foreign file (and how many there are)."""
    if not found:
        return
    other, record = read_manifest(folder), Path(folder) / MANIFEST
    if other is None and (record.exists() or record.is_symlink()):
        raise FileExistsError(errno.EEXIST, f"{flag} holds a {MANIFEST} that is not a record "
                              "minielectra wrote (damaged, or a link): nothing was changed; "
                              "delete it to have the folder checked as one from before records, "
                              f"or choose another {flag}", str(folder))
    if other is not None and other["command"] != layout.command:
        raise FileExistsError(errno.EEXIST, f"{flag} is minielectra {other['command']}'s output "
                              f"(its {MANIFEST} says so), not {layout.command}'s; nothing was "
                              f"changed: choose another {flag}", str(folder))
    first = Path(folder) / found[0]
    whose = ("a symbolic link; nothing is written through one" if first.is_symlink() else
             f"its {MANIFEST} does not name it" if other is not None else
             f"no {MANIFEST} names it")
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    raise FileExistsError(errno.EEXIST, f"{flag} holds {found[0]}{more}, which minielectra "
                          f"{layout.command} did not write ({whose}); nothing was changed: move "
                          f"it away, or choose another {flag}", str(folder))


def check_claim(folder: str | Path, layout: Layout, names: Iterable[str], *,
                flag: str = "--out") -> None:
    """Refuse a folder that is neither new, empty nor the command's own by its record (unless
    ``layout.shared``), and a file in the way (``names``, ``run.lock``) it did not write."""
    folder, names = Path(folder), list(names)
    if claimed(folder, layout) or layout.shared:  # its own folder: what is in the way counts
        found = foreign_files(folder, layout, [*names, LOCK_FILE])  # the lock's file too
    else:  # a folder it never wrote: new or empty, or refused (nothing goes in among yours)
        found = foreign_files(folder, layout)
    refuse_foreign(folder, found, layout, flag=flag)


def claim(folder: str | Path, layout: Layout, names: Iterable[str], *,
          flag: str = "--out") -> None:
    """Refuse what :func:`check_claim` refuses, then create ``folder`` and add ``names`` to its
    record."""
    folder, names = Path(folder), list(names)
    check_claim(folder, layout, names, flag=flag)
    mine = claimed(folder, layout) - {MANIFEST}
    folder.mkdir(parents=True, exist_ok=True)
    if mine and read_manifest(folder) is None:
        log.info("%s: written before minielectra kept a record of its files; adopted as "
                 "minielectra %s's own (%s)", folder, layout.command, MANIFEST)
    if not set(names) <= mine or read_manifest(folder) is None:
        write_manifest(folder, layout, mine | set(names))


# ------------------------------------------------------------------------ 3. inputs as outputs


Inputs = Mapping[str, "str | Path | None"] | Iterable[tuple[str, "str | Path | None"]]


def refuse_overlap(out: str | Path | None, inputs: Inputs, *, flag: str = "--out") -> None:
    """Refuse ``out`` that is, contains or lies inside one of ``inputs`` (``{flag: path}``, or
    ``(flag, path)`` pairs where a flag names several; a name that is no path on disk, such as
    a hub id, is skipped)."""
    if out is None:
        return
    o = Path(out).expanduser().resolve()
    for name, path in (inputs.items() if isinstance(inputs, Mapping) else inputs):
        if path is None or not isinstance(path, (str, Path)) or not Path(path).exists():
            continue
        i = Path(path).expanduser().resolve()
        how = ("is" if o == i else "lies inside" if i in o.parents else
               "contains" if o in i.parents else None)
        if how is not None:
            raise ValueError(f"{flag} {out} {how} {name} {path}, which this command reads: an "
                             f"output never replaces or mixes with its input; choose another "
                             f"{flag}")
