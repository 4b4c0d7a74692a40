"""Ctrl-C (or SIGTERM) during pre-training: finish the step in flight, save a checkpoint, stop.

A ``KeyboardInterrupt`` halfway through an optimiser update would leave weights that no step
count describes, and ``--resume`` would not continue bit for bit: :func:`deferred_sigint` holds
the first Ctrl-C until a step boundary (a second interrupts at once); the loop then saves and
raises :class:`Interrupted` (exit code 130, or 143 for SIGTERM).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

from ..safeio import Terminated


class Interrupted(KeyboardInterrupt):
    """A run stopped by Ctrl-C after saving its last completed step (``checkpoint``: None when
    no step had completed)."""

    def __init__(self, step: int, checkpoint: Path | None, *, signum: int = signal.SIGINT):
        self.step, self.checkpoint = step, checkpoint
        self.exit_code = 128 + signum
        saved = (f"checkpoint saved to {checkpoint}" if checkpoint is not None
                 else "nothing to save yet")
        super().__init__(f"interrupted at step {step}; {saved}")


class SigintFlag:
    """Set by the first Ctrl-C inside :func:`deferred_sigint`; the loop reads it between steps."""

    requested = False
    signum = signal.SIGINT  # which signal asked


@contextlib.contextmanager
def deferred_sigint() -> Iterator[SigintFlag]:
    """While inside, the first SIGINT or SIGTERM only sets ``flag.requested`` (and
    ``flag.signum``); a second raises at once. Only the main thread can own signal handlers."""
    flag = SigintFlag()
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return
    # Handlers someone else installed (a notebook kernel's, say) are left alone: there
    # KeyboardInterrupt arrives as it always did, and the loop still saves what it has.
    previous = {}
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        previous[signal.SIGINT] = signal.default_int_handler
    term = signal.getsignal(signal.SIGTERM)  # the default, or the CLI's (safeio.sigterm_raises)
    if term is signal.SIG_DFL or getattr(term, "__module__", None) == "minielectra.safeio":
        previous[signal.SIGTERM] = term

    def handler(signum, frame):
        if flag.requested:  # the second signal: the user does not want to wait
            raise Terminated("terminated (SIGTERM)") if signum == signal.SIGTERM \
                else KeyboardInterrupt
        flag.requested, flag.signum = True, signum

    for s in previous:
        signal.signal(s, handler)
    try:
        yield flag
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
