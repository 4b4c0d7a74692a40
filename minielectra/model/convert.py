"""``minielectra convert``: between minielectra checkpoints and transformers ELECTRA directories.

The top of the model layer: it needs the model class and both file formats, which themselves
never import the model (:mod:`.checkpoint`, :mod:`.hf`). ``out`` is written as every folder
output is (:func:`minielectra.outputs.output_folder`): refused when it holds anything an
earlier ``convert`` did not write, or is, holds or lies inside the source; replaced as a whole
once the converted model is complete.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Literal

from ..outputs import output_folder
from ..ownership import Layout
from ..safeio import read_json
from . import hf
from .checkpoint import load_pretrained
from .electra import Electra
from .storage import BUNDLED


def _is_model(folder: Path) -> bool:
    """A converted model's own config: minielectra's, or transformers' ELECTRA per part."""
    configs = [folder / "config.json", *folder.glob("*/config.json")]
    return any(c.is_file() and (read_json(c).get("format") == "minielectra"
                                or read_json(c).get("model_type") == "electra") for c in configs)


# minielectra's checkpoint files, or transformers' discriminator/, generator/, masked_lm/
CONVERTED = Layout("convert", ("config.json", "model.safetensors", "vocab.txt",
                               "tokenizer_config.json", "checksums.json", "discriminator",
                               "generator", "masked_lm"), _is_model)


def convert(src: str | Path, out: str | Path, *, direction: Literal["from_hf", "to_hf"],
            generator: str | Path | None = None,
            model_class: Callable[..., Electra] = Electra) -> Path:
    """``from_hf``: transformers dir(s) -> minielectra checkpoint; ``to_hf``: the reverse.
    ``out`` is replaced as a whole (see the module docstring). ``model_class`` builds the model
    from its configs (:func:`minielectra.objectives.compute.build_model` for any objective's)."""
    if direction not in ("from_hf", "to_hf"):
        raise ValueError(f"direction must be 'from_hf' or 'to_hf', got {direction!r}")
    if direction == "to_hf" and generator is not None:
        raise ValueError("generator= is only for direction='from_hf'")
    flag = "--from-hf" if direction == "from_hf" else "--to-hf"
    inputs = {flag: BUNDLED if str(src) == "bundled" else src, "--generator": generator}
    with output_folder(out, CONVERTED, inputs=inputs, replace=True) as tmp:
        model = load_pretrained(src, model_class, generator=generator)
        if direction == "from_hf":
            model.save_pretrained(tmp)
        else:
            hf.export(model, tmp)
    return Path(out)
