"""Progress bars that suit where the output goes: tqdm's bar on a terminal, its widget in a
notebook, and elsewhere (a log file, a pipe, CI) plain lines at most every ``interval`` seconds,
not thousands of carriage-return updates on one line::

    pretrain: 500/2000 (25%), 1.2 min, 7.0 it/s, loss=0.412, acc=0.871
"""

from __future__ import annotations

import contextlib
import sys
import time
from typing import Any, Callable, Iterable, Iterator, TextIO

LOG_INTERVAL_S = 30.0  # seconds between two lines when the output is not a terminal


def _in_notebook() -> bool:
    shell = sys.modules.get("IPython")
    ip = shell.get_ipython() if shell is not None and hasattr(shell, "get_ipython") else None
    return ip is not None and "IPKernelApp" in getattr(ip, "config", {})


def _scaled(n: float) -> str:
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.1f}{unit}"
    return f"{n:g}"


class LineProgress:
    """tqdm's interface (``update``, ``set_postfix``, ``close``, a context manager), written as
    plain lines: at most one every ``interval`` seconds, and a last one at :meth:`close`."""

    def __init__(self, total: int | None = None, *, desc: str = "", initial: int = 0,
                 unit: str = "it", unit_scale: bool = False, disable: bool = False,
                 file: TextIO | None = None, interval: float = LOG_INTERVAL_S,
                 **ignored: Any) -> None:
        self.total, self.desc, self.n, self.unit = total, desc, initial, unit
        self.unit_scale, self.disable, self.interval = unit_scale, disable, interval
        self.file = file
        self.postfix: dict[str, str] = {}
        self.start = self.last = time.monotonic()
        self.start_n, self.closed, self.written_n = initial, False, None

    def update(self, n: float = 1) -> None:
        self.n += n
        if not self.disable and time.monotonic() - self.last >= self.interval:
            self.write_line()

    def set_postfix(self, refresh: bool = True, **values: Any) -> None:
        self.postfix = {k: str(v) for k, v in values.items()}

    def line(self) -> str:
        elapsed = time.monotonic() - self.start
        count = _scaled(self.n) if self.unit_scale else f"{self.n:g}"
        parts = [f"{count}/{_scaled(self.total) if self.unit_scale else self.total}"
                 if self.total else count]
        if self.total:
            parts[0] += f" ({100 * self.n / self.total:.0f}%)"
        rate = (self.n - self.start_n) / elapsed if elapsed > 0 else 0.0
        speed = _scaled(rate) if self.unit_scale else f"{rate:.1f}"
        parts += [f"{elapsed / 60:.1f} min", f"{speed} {self.unit}/s"]
        parts += [f"{k}={v}" for k, v in self.postfix.items()]
        return f"{self.desc}: " * bool(self.desc) + ", ".join(parts)

    def write_line(self) -> None:
        print(self.line(), file=self.file or sys.stderr, flush=True)
        self.last, self.written_n = time.monotonic(), self.n

    def close(self) -> None:
        if not self.closed and not self.disable and self.written_n != self.n:
            self.write_line()
        self.closed = True

    def __enter__(self) -> "LineProgress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def progress_bar(total: int | None = None, *, file: TextIO | None = None, **kwargs: Any):
    """A progress bar for ``file`` (default: standard error): tqdm's bar on a terminal, its
    widget in a notebook, :class:`LineProgress` anywhere else. ``kwargs`` are tqdm's."""
    stream = file or sys.stderr
    if _in_notebook():
        from tqdm.auto import tqdm
        return tqdm(total=total, file=file, **kwargs)
    if getattr(stream, "isatty", lambda: False)():
        from tqdm import tqdm
        return tqdm(total=total, file=file, **kwargs)
    return LineProgress(total, file=file, **kwargs)


@contextlib.contextmanager
def beside_bars(file: TextIO | None = None) -> Iterator[None]:
    """Lines printed to ``file`` (default: standard error) in here start a line of their own on a
    terminal: tqdm's bars there are cleared first and drawn again after, not written onto."""
    from tqdm import tqdm
    with tqdm.external_write_mode(file=file or sys.stderr):
        yield


def counted(items: Iterable, bar, size: Callable[[Any], float] = lambda item: 1) -> Iterator:
    """``items`` as they are, each one adding ``size(item)`` to ``bar`` as it is handed on."""
    for item in items:
        bar.update(size(item))
        yield item
