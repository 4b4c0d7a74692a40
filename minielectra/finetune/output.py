"""Where ``finetune --out DIR`` writes: locked, checked before training, published all at once.

Fine-tuning takes minutes to hours; its output must not be lost to a second process, a full disk
or Ctrl-C. :func:`finetune_output` gives the run a temporary folder beside ``DIR``
(:func:`minielectra.safeio.exclusive_output`): ``DIR`` is checked (a folder or absent, writable,
holding only a fine-tuned model's files) and locked before the first step, and replaced as a
whole only once everything is written. Interrupted or failed, ``DIR`` is as it was, and the
message says so.
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator
from pathlib import Path

from ..safeio import exclusive_output


@contextlib.contextmanager
def finetune_output(out: str | Path | None) -> Iterator[Path | None]:
    """Yield the folder to write into (None without ``out``); see the module docstring."""
    if out is None:
        try:
            yield None
        except KeyboardInterrupt as e:
            raise type(e)(f"{str(e) or 'interrupted'}; nothing saved (no --out)") from None
        return
    try:
        with exclusive_output(out, what="fine-tuning") as tmp:
            yield tmp
    except KeyboardInterrupt as e:
        raise type(e)(f"{str(e) or 'interrupted'}; nothing saved, {out} is as it was") from None
    except OSError as e:
        if e.errno != errno.ENOSPC:
            raise
        raise OSError(errno.ENOSPC, f"{e.strerror} while writing the fine-tuned model; "
                      "nothing saved, the folder is as it was", str(out)) from None
