"""Writing what a user owns: never through a link, all or nothing, one process per folder.

Four promises every command's output keeps, whatever the disk or a second process does:

- **No write through a link the user did not name** (:func:`write_file`, :func:`refuse_link`): a
  file is written beside its destination and renamed over it, which replaces a symbolic link
  itself and never its target; a link in the way of a copy is refused unless asked to replace it.
- **All or nothing** (:func:`exclusive_output`): an output folder is built in a temporary folder
  beside it and swapped in when complete, so a crash, a full disk or Ctrl-C leaves the previous
  output as it was (and a folder the user filled with other files is refused, not replaced).
- **One process per folder** (:class:`FolderLock`): ``run.lock`` holds a POSIX record lock, which
  the kernel drops when its process ends however it ends, and which forked workers do not
  inherit; the file names the holder (pid, host, start), and a line left by a dead pid is
  recognised as stale.
- **SIGTERM is Ctrl-C** (:func:`sigterm_raises`): what schedulers send stops a command through
  the same clean-up path, with exit status 143 (128 + SIGTERM) instead of 130.
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
from collections.abc import Callable, Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: the holder's pid is all there is to go by
    fcntl = None

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
    """Write ``data`` to ``path`` all at once: a temporary file beside it, flushed, then renamed
    over ``path``. A link at ``path`` is replaced by the file (its target is untouched); the
    permissions are a new file's (0666 less the umask). An error names ``path``."""
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


def public_modes(root: str | Path) -> None:
    """Give ``root`` and everything in it a new file's permissions (0666 or 0777 less the
    umask): ``mkdtemp`` and safetensors make theirs private, unlike every sibling."""
    mask = _umask()
    for p in [Path(root), *Path(root).rglob("*")]:
        if not p.is_symlink():
            os.chmod(p, (0o777 if p.is_dir() else 0o666) & ~mask)


def read_json(path: str | Path) -> dict:
    """A JSON object from ``path``; anything else (not UTF-8, not JSON, a list at the top) is a
    ValueError naming the file."""
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
    """``path`` is a folder or absent, and the folder it sits in can be written (probed by
    creating and removing a temporary folder there): refused before any work, naming it."""
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


def foreign_entries(path: Path, owned: Callable[[Path], bool]) -> list[Path]:
    """Entries of the folder ``path`` that ``owned`` does not claim (a command's own output)."""
    if not path.is_dir():
        return []
    return sorted(p for p in path.iterdir() if not owned(p))


def refuse_foreign(path: str | Path, owned: Callable[[Path], bool], *, what: str,
                   flag: str = "--out") -> None:
    """Refuse an existing folder holding anything ``what`` did not write: replacing the folder
    as a whole would delete the user's other files."""
    others = foreign_entries(Path(path), owned)
    if others:
        raise FileExistsError(errno.EEXIST, f"{flag} holds {len(others)} file(s) that {what} did "
                              f"not write (e.g. {others[0].name}), and its output replaces the "
                              "folder as a whole: choose a new or empty folder", str(path))


def model_files(p: Path) -> bool:
    """A model folder's own entries: configs, weights, vocabulary, sums, the lock."""
    return (p.suffix in (".json", ".safetensors", ".bin", ".pt") or
            p.name in ("vocab.txt", LOCK_FILE, "MODEL_CARD.md") or
            (p.is_dir() and not p.is_symlink() and
             re.fullmatch(r"discriminator|generator|masked_lm|seed-\d+", p.name) is not None))


# ------------------------------------------------------------------------ 2. one process a folder


class FolderBusy(RuntimeError):
    """Another process holds the folder's ``run.lock``."""


# The lock files this process holds (by device and inode): POSIX locks never conflict within a
# process, so a second lock here is refused by this table. Weak: a lock dropped unreleased is
# closed by the garbage collector, which frees the folder.
_HELD: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def stale_holder(line: str) -> int | None:
    """The pid of a holder line written on this host by a process that no longer runs."""
    m = re.match(r"pid (\d+) on (\S+),", line)
    if m and m.group(2) == socket.gethostname() and not _alive(int(m.group(1))):
        return int(m.group(1))
    return None


class FolderLock:
    """``folder/run.lock``, held while a command writes the folder; :meth:`release` frees it."""

    def __init__(self, folder: str | Path, *, what: str = "run"):
        self.folder, self.what, self.file, self.key = Path(folder), what, None, None

    def _open(self) -> int:
        path = self.folder / LOCK_FILE
        refuse_link(path, replace=True)  # ours to replace; its target is never written
        return os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o666)

    def _busy(self, holder: str) -> FolderBusy:
        holder = holder or "holder unknown"
        return FolderBusy(f"{self.folder} is in use by another {self.what} ({holder}); wait for "
                          "it to end, or choose another --out")

    def acquire(self) -> "FolderLock":
        path = self.folder / LOCK_FILE
        with contextlib.suppress(FileNotFoundError):
            st = path.lstat()
            held = _HELD.get((st.st_dev, st.st_ino))
            if held is not None and held.file is not None:
                raise self._busy(held.holder)
        fd = self._open()
        f = os.fdopen(fd, "r+", errors="replace")
        previous = f.read().strip()
        try:
            if fcntl is not None:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            elif previous and stale_holder(previous) is None:
                raise BlockingIOError
        except (BlockingIOError, PermissionError):
            f.close()
            raise self._busy(previous) from None
        if previous and (pid := stale_holder(previous)) is not None:
            log.info("%s: left by pid %d, which no longer runs (killed?); taking it over", path,
                     pid)
        holder = (f"pid {os.getpid()} on {socket.gethostname()}, started "
                  f"{time.strftime('%Y-%m-%d %H:%M:%S')}")
        f.seek(0)
        f.truncate()
        f.write(holder + "\n")
        f.flush()
        st = os.fstat(fd)
        self.file, self.key, self.holder = f, (st.st_dev, st.st_ino), holder
        _HELD[self.key] = self
        return self

    def release(self) -> None:
        """The holder's line goes (an empty run.lock is a free folder), then the lock."""
        if self.file is not None:
            with contextlib.suppress(OSError):
                self.file.truncate(0)
            self.file.close()
            _HELD.pop(self.key, None)
            self.file = None

    close = release


def remove_stale_builds(root: str | Path) -> list[Path]:
    """Remove ``NAME.tmpPID`` folders in ``root`` whose builder (pid ``PID`` on this host) no
    longer runs: what a build killed outright (kill -9, a power cut) left; returns them."""
    removed = []
    for p in Path(root).glob("*.tmp*") if Path(root).is_dir() else []:
        pid = p.name.rpartition(".tmp")[2]
        if pid.isdigit() and p.is_dir() and not p.is_symlink() and not _alive(int(pid)):
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p)
    return removed


# ------------------------------------------------------------------------ 3. all-or-nothing output


def _leftovers(path: Path, kind: str) -> list[Path]:
    return sorted(path.parent.glob(f".{glob_escape(path.name)}.{kind}-*"))


def glob_escape(name: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", name)


def _recover(path: Path) -> None:
    """A process killed between the two renames of a swap left no ``path`` and the previous
    output in ``.NAME.old-*/``: put it back."""
    old = [p / "output" for p in _leftovers(path, "old") if (p / "output").is_dir()]
    if not path.exists() and old:
        os.rename(old[-1], path)
        log.warning("%s: restored the previous output (a swap was interrupted)", path)


def _swap(tmp: Path, path: Path) -> None:
    """Publish ``tmp`` as ``path``: the old folder is renamed aside, the new one into place."""
    public_modes(tmp)  # mkdtemp and safetensors make theirs private
    for p in sorted(tmp.rglob("*"), reverse=True):
        if p.is_file() and not p.is_symlink() and p.name != LOCK_FILE:  # closing a file
            with open(p, "rb") as f:  # drops this process's POSIX locks on it: not the lock
                os.fsync(f.fileno())
    old = None
    if path.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{path.name}.old-", dir=path.parent))
        os.rename(path, old / "output")
    try:
        os.rename(tmp, path)
    except BaseException:
        if old is not None:
            os.rename(old / "output", path)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def exclusive_output(path: str | Path, *, what: str, owned: Callable[[Path], bool] = model_files,
                     flag: str = "--out") -> Iterator[Path]:
    """Yield an empty temporary folder beside ``path``; when the block ends without error it
    replaces ``path`` as a whole. Meanwhile ``path/run.lock`` is held (a second process is
    refused, naming the holder).

    Checked before any work: ``path`` is a folder or absent, it and its parent can be written,
    and an existing ``path`` holds only what ``owned`` claims (else it is refused, since the
    swap would delete the rest). On any exception (Ctrl-C, a full disk) the temporary folder
    goes and ``path`` is as it was; a folder this call created is removed again.
    """
    path = check_out_dir(path, flag=flag)
    _recover(path)
    refuse_foreign(path, owned, what=what, flag=flag)
    created = not path.exists()
    path.mkdir(parents=True, exist_ok=True)
    try:
        lock = FolderLock(path, what=what).acquire()
    except BaseException:
        if created and not any(path.iterdir()):
            path.rmdir()
        raise
    new_lock, done = None, False
    try:
        for p in _leftovers(path, "tmp"):  # a killed writer's; ours to clean: we hold the lock
            shutil.rmtree(p, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-", dir=path.parent))
        try:
            yield tmp
            new_lock = FolderLock(tmp, what=what).acquire()  # the lock moves with the folder
            _swap(tmp, path)
            done = True
        finally:
            if not done:
                shutil.rmtree(tmp, ignore_errors=True)
    finally:
        for held in (new_lock, lock):
            if held is not None:
                held.release()
        if created and not done and [p.name for p in path.iterdir()] == [LOCK_FILE]:
            (path / LOCK_FILE).unlink()  # the folder this call made, holding only the lock
            path.rmdir()


# ------------------------------------------------------------------------ 4. SIGTERM


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the main thread is, as Ctrl-C raises KeyboardInterrupt."""

    exit_code = 143  # 128 + SIGTERM


def _raise_terminated(signum, frame):
    raise Terminated("terminated (SIGTERM)")


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    """While inside, SIGTERM raises :class:`Terminated` (a KeyboardInterrupt), so a command
    stops through the clean-up Ctrl-C takes. Only from the main thread, and only over the
    default handler (a notebook kernel's own stays)."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL):
        yield
        return
    signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
