"""Where ``finetune --out DIR`` writes: locked, checked before training, published all at once.

Fine-tuning takes minutes to hours; its output must not be lost to a second process, a full disk
or Ctrl-C. :func:`finetune_output` gives the run a temporary folder beside ``DIR``
(:func:`minielectra.ownership.exclusive_output`), replaced as a whole only once everything is
written; interrupted or failed, ``DIR`` is as it was, and the message says so.
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator
from pathlib import Path

from ..ownership import Layout, exclusive_output
from ..safeio import read_json


# A model folder (classification or SQuAD), its result, and with --seeds N --keep-all seed-N/.
FINETUNED = Layout("finetune", ("model.safetensors", "finetune.json", "vocab.txt",
                                "tokenizer_config.json", "checksums.json", "result.json",
                                "predictions.json", "na_probs.json", "seed-*"),
                  lambda folder: "task" in read_json(folder / "result.json"))


@contextlib.contextmanager
def finetune_output(out: str | Path | None, *, layout: Layout = FINETUNED,
                    what: str = "fine-tuning") -> Iterator[Path | None]:
    """Yield the folder to write into (None without ``out``); see the module docstring.
    ``glue --out`` is the same with its own layout."""
    if out is None:
        try:
            yield None
        except KeyboardInterrupt as e:
            raise type(e)(f"{str(e) or 'interrupted'}; nothing saved (no --out)") from None
        return
    try:
        with exclusive_output(out, layout, what=what) as tmp:
            yield tmp
    except KeyboardInterrupt as e:
        raise type(e)(f"{str(e) or 'interrupted'}; nothing saved, {out} is as it was") from None
    except OSError as e:  # named at its place in out (exclusive_output)
        if e.errno != errno.ENOSPC:
            raise
        raise OSError(errno.ENOSPC, f"{e.strerror} while writing {e.filename}; nothing "
                      "saved, the folder is as it was", str(out)) from None
