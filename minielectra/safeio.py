"""Writing what a user owns: never through a link, a file at once, one process per folder.

:func:`write_file` writes beside the destination and renames over it (a link there is replaced,
never its target); :class:`FolderLock` is ``run.lock``, an OS lock (through ``filelock``) the
kernel drops with its process; :func:`sigterm_raises` makes SIGTERM take Ctrl-C's clean-up path
(exit 143). Every command's output goes through :mod:`.outputs`; the guarantees:
``docs/guides/faults.md``.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import re
import shutil
import signal
import socket
import tempfile
import threading
import time
import weakref
from collections.abc import Iterator
from pathlib import Path

import filelock

log = logging.getLogger(__name__)

LOCK_FILE = "run.lock"

# ------------------------------------------------------------------------ 1. files and links


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def refuse_link(path: str | Path, *, replace: bool = False) -> None:
    """A symbolic link at ``path`` is refused (naming it and its target), or with ``replace``
    removed: the link itself, never what it points to."""
    path = Path(path)
    if not path.is_symlink():
        return
    if replace:
        path.unlink()
        return
    raise FileExistsError(errno.EEXIST, f"is a symbolic link (to {os.readlink(path)}); nothing is "
                          "written through a link: remove it, or choose another folder", str(path))


def write_file(path: str | Path, data: bytes | str) -> Path:
    """Write ``data`` to ``path`` all at once: a temporary file beside it, flushed, renamed over
    ``path`` (a link there is replaced, its target untouched). An error names ``path``."""
    path = Path(path)
    data = data.encode() if isinstance(data, str) else data
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except OSError as e:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise OSError(e.errno, e.strerror or str(e), str(path)) from None
    return path


def named_at(e: OSError, tmp: Path, path: Path) -> OSError:
    """``e`` naming the file's final place under ``path``, not under the temporary ``tmp``."""
    where = Path(e.filename) if e.filename else path
    if where.is_relative_to(tmp):
        where = path / where.relative_to(tmp)
    return OSError(e.errno, e.strerror or str(e), str(where))


def public_modes(root: str | Path) -> None:
    """Give ``root`` and everything in it a new file's permissions (``mkdtemp`` and
    safetensors make theirs private, unlike every sibling)."""
    mask = _umask()
    for p in [Path(root), *Path(root).rglob("*")]:
        if not p.is_symlink():
            os.chmod(p, (0o777 if p.is_dir() else 0o666) & ~mask)


ASIDE = "previous"  # .NAME.old-*/previous: where replace_dir moves the folder it replaces


@contextlib.contextmanager
def replace_dir(path: str | Path) -> Iterator[Path]:
    """Yield an empty temporary folder beside ``path``; when the block ends without error it
    replaces ``path`` whole, flushed to disk first. On an exception it goes and ``path`` is as it
    was, and an error in it names its final place under ``path``. POSIX cannot swap two folders in
    one rename, so an existing ``path`` is first renamed aside: a process killed between the two
    renames leaves the previous folder at ``.NAME.old-*/previous``, never half a new one."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise FileExistsError(f"{path} exists and is not a directory")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-", dir=path.parent))
    try:
        yield tmp
        public_modes(tmp)  # mkdtemp and safetensors make theirs private
        for p in sorted(tmp.rglob("*"), reverse=True):  # closing a lock file would drop this
            if not p.is_symlink() and p.name != LOCK_FILE:  # process's POSIX lock on it
                _fsync(p)
        old = None
        if path.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{path.name}.old-", dir=path.parent))
            os.rename(path, old / ASIDE)
        try:
            os.rename(tmp, path)
        except BaseException:
            if old is not None:
                os.rename(old / ASIDE, path)
                shutil.rmtree(old, ignore_errors=True)
            raise
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        _fsync(path.parent)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(e, OSError) and (Path(e.filename).is_relative_to(tmp) if e.filename
                                       else e.errno == errno.ENOSPC):
            raise named_at(e, tmp, path) from None  # named as the user will look for it
        raise


def _fsync(path: Path) -> None:
    """Flush a file or folder so that a rename never publishes what is only in the page cache."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # e.g. folders on Windows
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def read_json(path: str | Path) -> dict:
    """A JSON object from ``path``; anything else is a ValueError naming the file."""
    try:
        value = json.loads(Path(path).read_bytes().decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not a UTF-8 text file (byte {e.start}); not a config") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(value, dict):
        raise ValueError(f"{path}: expected a JSON object {{...}} at the top, found a "
                         f"{type(value).__name__}")
    return value


def refuse_overwrite(path: str | Path, *, force: bool = False, flag: str = "--force") -> None:
    """An existing file (or link, dangling or not) at ``path`` is refused unless ``force``; a
    folder there is refused always."""
    path = Path(path)
    if path.is_dir() and not path.is_symlink():
        raise IsADirectoryError(errno.EISDIR, "is a folder, not a file", str(path))
    if (path.exists() or path.is_symlink()) and not force:
        raise FileExistsError(errno.EEXIST, f"already exists; pass {flag} to replace it",
                              str(path))


def check_out_dir(path: str | Path, *, flag: str = "--out") -> Path:
    """Refuse, naming it, a ``path`` that is no folder or whose folder cannot be written
    (probed with a temporary folder)."""
    path = Path(path).expanduser()
    if path.exists() and not path.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, f"{flag} is a file, not a folder", str(path))
    parent = path.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, f"{flag}: a part of the path is a file, not a "
                                 "folder", str(parent))
    for where in (parent, path) if path.is_dir() else (parent,):
        try:
            os.rmdir(tempfile.mkdtemp(prefix=".minielectra-probe-", dir=where))
        except OSError as e:
            raise OSError(e.errno, f"{flag} cannot be written there ({e.strerror})",
                          str(where)) from None
    return path


# ------------------------------------------------------------------------ 2. one process a folder


class FolderBusy(RuntimeError):
    """Another process holds the folder's ``run.lock``."""


# The lock files this process holds (by device and inode), to tell our own run.lock from a user's
# file of that name. Weak: a lock dropped unreleased is closed by the garbage collector.
_HELD: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def held_here(path: str | Path) -> bool:
    """Whether this process holds the lock file ``path``."""
    try:
        st = Path(path).lstat()
    except OSError:
        return False
    held = _HELD.get((st.st_dev, st.st_ino))
    return held is not None and held.lock is not None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        pass
    return True


def stale_holder(line: str) -> int | None:
    """The pid of a holder line written on this host by a process that no longer runs."""
    m = re.match(r"pid (\d+) on (\S+),", line)
    if m and m.group(2) == socket.gethostname() and not _alive(int(m.group(1))):
        return int(m.group(1))
    return None


def _holder_line(path: Path) -> str:
    with contextlib.suppress(OSError):
        return path.read_text(errors="replace").strip()
    return ""


class FolderLock:
    """``folder/run.lock``, held while a command writes the folder; :meth:`release` frees it.

    The lock is ``filelock``'s (``flock`` on POSIX, ``msvcrt`` on Windows): the system drops it
    when the process ends, however it ends, so a killed run leaves no stale lock. The file holds
    the holder's line (pid, host, start), which a refused second process names."""

    def __init__(self, folder: str | Path, *, what: str = "run"):
        self.folder, self.what = Path(folder), what
        self.lock, self.key, self.holder = None, None, ""

    def _busy(self, holder: str) -> FolderBusy:
        holder = holder or "holder unknown"
        return FolderBusy(f"{self.folder} is in use by another {self.what} ({holder}); wait for "
                          "it to end, or choose another --out")

    def acquire(self) -> "FolderLock":
        path = self.folder / LOCK_FILE
        refuse_link(path, replace=True)  # ours to replace; its target is never written
        created = not path.exists()
        lock = filelock.FileLock(path, blocking=False, thread_local=False,
                                 fallback_to_soft=False, mode=0o666)
        try:
            lock.acquire()
        except filelock.Timeout:
            raise self._busy(_holder_line(path)) from None
        previous = _holder_line(path)
        if previous and (pid := stale_holder(previous)) is not None:
            log.info("%s: left by pid %d, which no longer runs (killed?); taking it over", path,
                     pid)
        holder = (f"pid {os.getpid()} on {socket.gethostname()}, started "
                  f"{time.strftime('%Y-%m-%d %H:%M:%S')}")
        try:  # another descriptor of the file: closing it leaves the flock held
            fd = os.open(path, os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0))
            try:
                os.ftruncate(fd, 0)
                os.write(fd, (holder + "\n").encode())
            finally:
                os.close(fd)
        except OSError as e:  # a full disk: said naming the file; a file we made goes again
            lock.release()
            if created:
                with contextlib.suppress(OSError):
                    path.unlink()
            raise OSError(e.errno, e.strerror or str(e), str(path)) from None
        st = path.lstat()
        self.lock, self.key, self.holder = lock, (st.st_dev, st.st_ino), holder
        _HELD[self.key] = self
        return self

    def release(self) -> None:
        """The holder's line goes (an empty run.lock is a free folder), then the lock."""
        if self.lock is not None:
            with contextlib.suppress(OSError):
                os.truncate(self.folder / LOCK_FILE, 0)
            self.lock.release()
            _HELD.pop(self.key, None)
            self.lock = None

    close = release

    def __del__(self):  # dropped unreleased: the folder is freed
        with contextlib.suppress(Exception):
            if self.lock is not None:
                self.lock.release()


def remove_stale_builds(root: str | Path) -> list[Path]:
    """Remove (and return) the ``NAME.tmpPID`` folders in ``root`` whose builder no longer
    runs: what a build killed outright left."""
    removed = []
    for p in Path(root).glob("*.tmp*") if Path(root).is_dir() else []:
        pid = p.name.rpartition(".tmp")[2]
        if pid.isdigit() and p.is_dir() and not p.is_symlink() and not _alive(int(pid)):
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p)
    return removed


# ------------------------------------------------------------------------ 3. SIGTERM


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the main thread is, as Ctrl-C raises KeyboardInterrupt."""

    exit_code = 143  # 128 + SIGTERM


def _raise_terminated(signum, frame):
    raise Terminated("terminated (SIGTERM)")


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    """While inside, SIGTERM raises :class:`Terminated`; only from the main thread, and only
    over the default handler (a notebook kernel's own stays)."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL):
        yield
        return
    signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
