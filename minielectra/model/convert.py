"""``minielectra convert``: between minielectra checkpoints and transformers ELECTRA directories.

The top of the model layer: it needs the model class and both file formats, which themselves
never import the model (:mod:`.checkpoint`, :mod:`.hf`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Literal

from ..safeio import check_out_dir, model_files, refuse_foreign
from . import hf
from .checkpoint import load_pretrained
from .electra import Electra


def convert(src: str | Path, out: str | Path, *, direction: Literal["from_hf", "to_hf"],
            generator: str | Path | None = None,
            model_class: Callable[..., Electra] = Electra) -> Path:
    """``from_hf``: transformers dir(s) -> minielectra checkpoint; ``to_hf``: the reverse.
    ``out`` is replaced as a whole, so an existing one holding anything but a model's files is
    refused (it may be the user's folder of other things). ``model_class`` builds the model
    from its configs (:func:`minielectra.objectives.compute.build_model` for any objective's)."""
    check_out_dir(out)
    refuse_foreign(out, model_files, what="convert")
    if direction == "from_hf":
        return load_pretrained(src, model_class, generator=generator).save_pretrained(out)
    if direction == "to_hf":
        if generator is not None:
            raise ValueError("generator= is only for direction='from_hf'")
        return hf.export(load_pretrained(src, model_class), out)
    raise ValueError(f"direction must be 'from_hf' or 'to_hf', got {direction!r}")
