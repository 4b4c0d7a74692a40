"""Ctrl-C during pre-training: finish the step in flight, save a checkpoint, stop cleanly.

Python turns SIGINT into a ``KeyboardInterrupt`` wherever the main thread happens to be, which
may be halfway through an optimiser update: a checkpoint written then would hold weights that no
step count describes, and ``--resume`` would not continue bit for bit. :func:`deferred_sigint`
holds the first Ctrl-C until the loop reaches a step boundary (a second one interrupts at once);
the loop then saves the last completed step and raises :class:`Interrupted`, which the CLI turns
into one line and exit code 130 (128 + SIGINT, the shell's convention).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from pathlib import Path


class Interrupted(KeyboardInterrupt):
    """A run stopped by Ctrl-C after saving its last completed step (``checkpoint``: None when
    no step had completed)."""

    def __init__(self, step: int, checkpoint: Path | None):
        self.step, self.checkpoint = step, checkpoint
        saved = (f"checkpoint saved to {checkpoint}" if checkpoint is not None
                 else "nothing to save yet")
        super().__init__(f"interrupted at step {step}; {saved}")


class SigintFlag:
    """Set by the first Ctrl-C inside :func:`deferred_sigint`; the loop reads it between steps."""

    requested = False


@contextlib.contextmanager
def deferred_sigint() -> Iterator[SigintFlag]:
    """While inside, the first SIGINT only sets ``flag.requested``; a second raises at once.

    Only the main thread can own signal handlers, and a handler someone else installed (a
    notebook kernel's, say) is left alone: there ``KeyboardInterrupt`` arrives as it always did,
    and the loop still saves what it has.
    """
    flag = SigintFlag()
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield flag
        return

    def handler(signum, frame):
        if flag.requested:  # the second Ctrl-C: the user does not want to wait
            raise KeyboardInterrupt
        flag.requested = True

    signal.signal(signal.SIGINT, handler)
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
