"""Every folder a command writes, through one door: :func:`output_folder`.

It takes the folder, the layout the command keeps there (:class:`~.ownership.Layout`: its files
and its record) and the inputs the folder must not be, hold or lie in, and gives the block a
folder to write:

- ``replace=True`` (``finetune``, ``glue``, ``convert``, the experiments' reports): an empty
  folder beside the output, locked, swapped in whole when the block ends without error; on any
  error, Ctrl-C or a full disk the output is as it was, and the message says so;
- ``replace=False`` (``pretrain``'s run directory, ``prepare``, ``lessons``, ``experiment``): the
  output itself, its ``files`` added to its record, held under ``run.lock`` while the block runs
  (``lock=False`` where two at once harm nothing); a folder the call made and left with nothing
  but the lock and the record goes again when the block fails.

Both refuse first, in one line: an output that is or holds an input, a file in the way that the
command did not write, a folder another process holds. The pieces: :mod:`.ownership` (the
record), :mod:`.safeio` (writes, the lock); the guarantees, each with its test:
``docs/guides/faults.md``.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import logging
import os
import shutil
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from .ownership import MANIFEST, Layout, check_claim, claim, foreign_files, refuse_foreign, \
    refuse_overlap, write_manifest
from .safeio import ASIDE, LOCK_FILE, FolderLock, check_out_dir, replace_dir

log = logging.getLogger(__name__)


@contextlib.contextmanager
def output_folder(path: str | Path | None, layout: Layout, *, files: Iterable[str] = (),
                  inputs: Mapping[str, str | Path | None] | Iterable[tuple] = (),
                  replace: bool = False,
                  lock: bool = True, what: str | None = None,
                  flag: str = "--out") -> Iterator[Path | None]:
    """The folder to write ``path``'s contents into (see the module's docstring); None, with
    nothing checked, when ``path`` is None (a command run without ``--out``)."""
    if path is None:
        try:
            yield None
        except KeyboardInterrupt as e:
            raise type(e)(f"{str(e) or 'interrupted'}; nothing saved (no {flag})") from None
        return
    refuse_overlap(path, inputs, flag=flag)
    what = what or layout.command
    if replace:
        with _replaced(path, layout, what=what, flag=flag) as tmp:
            yield tmp
    else:
        with _in_place(Path(path), layout, list(files), lock=lock, what=what, flag=flag):
            yield Path(path)


# ------------------------------------------------------------------------ 1. written in place

@contextlib.contextmanager
def _in_place(out: Path, layout: Layout, files: list[str], *, lock: bool, what: str,
              flag: str) -> Iterator[None]:
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, f"{flag} is a file, not a directory", str(out))
    check_claim(out, layout, files, flag=flag)  # before the lock file is made: it may be a user's
    created = not out.exists()
    fresh = not (out / LOCK_FILE).exists()
    held = None
    try:
        if lock:
            out.mkdir(parents=True, exist_ok=True)
            held = FolderLock(out, what=what).acquire()
        claim(out, layout, files, flag=flag)  # checked again under the lock
        yield
    except BaseException:
        _undo(out, held, created, fresh)
        raise
    if held is not None:
        held.release()


def _undo(out: Path, held: FolderLock | None, created: bool, fresh: bool) -> None:
    """Unlock; a block that failed before writing anything leaves no trace: the run.lock and
    the record it created go, and the folder too when this call made it. Never hides the error
    that got us here."""
    if held is not None:
        held.release()
    left = sorted(p.name for p in out.iterdir()) if out.is_dir() else []
    if fresh and set(left) <= {LOCK_FILE, MANIFEST}:
        for name in left:
            with contextlib.suppress(OSError):
                (out / name).unlink()
        if created:
            shutil.rmtree(out, ignore_errors=True)


# ------------------------------------------------------------------------ 2. replaced whole

def _leftovers(path: Path, kind: str) -> list[Path]:
    return sorted(path.parent.glob(f".{glob.escape(path.name)}.{kind}-*"))


def _recover(path: Path) -> None:
    """A kill between the two renames of a swap left the previous output in ``.NAME.old-*/``:
    put it back."""
    old = [p / ASIDE for p in _leftovers(path, "old") if (p / ASIDE).is_dir()]
    if not path.exists() and old:
        os.rename(old[-1], path)
        log.warning("%s: restored the previous output (a swap was interrupted)", path)


@contextlib.contextmanager
def _replaced(out: str | Path, layout: Layout, *, what: str, flag: str) -> Iterator[Path]:
    """An empty temporary folder beside ``out``, holding ``out/run.lock``; when the block ends
    without error it gets its record and replaces ``out`` whole. An existing ``out`` holding a
    file ``layout.command`` did not write is refused first. On any exception ``out`` is as it
    was (a folder this call created goes again)."""
    try:
        with _swap(out, layout, what=what, flag=flag) as tmp:
            yield tmp
    except KeyboardInterrupt as e:
        raise type(e)(f"{str(e) or 'interrupted'}; nothing saved, {out} is as it was") from None
    except OSError as e:  # named at its place in out (_swap)
        if e.errno != errno.ENOSPC:
            raise
        raise OSError(errno.ENOSPC, f"{e.strerror} while writing {e.filename}; nothing "
                      "saved, the folder is as it was", str(out)) from None


@contextlib.contextmanager
def _swap(path: str | Path, layout: Layout, *, what: str, flag: str) -> Iterator[Path]:
    path = check_out_dir(path, flag=flag)
    if path.is_symlink():  # a link the user named is the folder they mean: where it points
        path = path.resolve()
    _recover(path)
    refuse_foreign(path, foreign_files(path, layout), layout, flag=flag)
    created = not path.exists()
    path.mkdir(parents=True, exist_ok=True)
    try:
        lock = FolderLock(path, what=what).acquire()
    except BaseException:
        if created:
            shutil.rmtree(path, ignore_errors=True)  # ours, and at most the lock's file in it
        raise
    new_lock, done = None, False
    try:
        for p in _leftovers(path, "tmp"):  # a killed writer's; ours to clean: we hold the lock
            shutil.rmtree(p, ignore_errors=True)
        with replace_dir(path) as tmp:
            yield tmp
            write_manifest(tmp, layout, [  # every file the block wrote
                p.relative_to(tmp).as_posix() for p in tmp.rglob("*")
                if p.is_file() and not p.is_symlink() and p.name not in (LOCK_FILE, MANIFEST)])
            new_lock = FolderLock(tmp, what=what).acquire()  # the lock moves with the folder
        done = True
    finally:
        for held in (new_lock, lock):
            if held is not None:
                held.release()
        if created and not done and [p.name for p in path.iterdir()] == [LOCK_FILE]:
            with contextlib.suppress(OSError):  # never hides the error that got us here
                (path / LOCK_FILE).unlink()
                path.rmdir()
