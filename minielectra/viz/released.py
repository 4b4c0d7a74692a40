"""The released ELECTRA-Small beside the bundled model: what a fully trained discriminator does.

``google/electra-small-discriminator`` and ``-generator`` are loaded with transformers, converted
(:mod:`minielectra.model.convert`) and returned as a :class:`.scoring.Checkpoint`. transformers is
not a dependency and the hub may be unreachable: then the message says what was skipped.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from ..model.convert import convert
from .scoring import Checkpoint, load_checkpoint

DISCRIMINATOR = "google/electra-small-discriminator"
GENERATOR = "google/electra-small-generator"


def _download(discriminator: str | Path, generator: str | Path, out: Path) -> None:
    """transformers' ``from_pretrained`` (hub names or local directories), saved under ``out``."""
    from transformers import AutoTokenizer, ElectraForMaskedLM, ElectraForPreTraining
    from transformers.utils import logging
    logging.disable_progress_bar()
    ElectraForPreTraining.from_pretrained(str(discriminator)).save_pretrained(out / "disc")
    tokenizer = AutoTokenizer.from_pretrained(str(discriminator))
    tokenizer.save_pretrained(out / "disc")
    vocab = out / "disc" / "vocab.txt"  # what minielectra reads; a fast tokenizer may not write it
    if not vocab.is_file():
        pieces = sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1])
        vocab.write_text("".join(f"{piece}\n" for piece, _ in pieces))
    ElectraForMaskedLM.from_pretrained(str(generator)).save_pretrained(out / "gen")


def load_released(discriminator: str | Path = DISCRIMINATOR,
                  generator: str | Path = GENERATOR) -> tuple[Checkpoint | None, str]:
    """``(checkpoint, message)``: the released model ready to score, or ``None`` and why not
    (``discriminator``, ``generator``: hub names or local transformers directories)."""
    try:
        import transformers  # noqa: F401  (test-only for minielectra: maybe absent)
    except ImportError:
        return None, (f"skipped {discriminator}: transformers is not installed "
                      "(pip install transformers to compare with the released model)")
    from ..data.hub import hub_unreachable  # one probe: offline, transformers retries ~25 s
    if not Path(discriminator).is_dir() and (why := hub_unreachable()) is not None:
        return None, (f"skipped {discriminator}: the Hugging Face hub is not reachable from "
                      f"here ({why}); with network access this cell shows it beside ours")
    work = Path(tempfile.mkdtemp(prefix="minielectra-released-"))
    try:
        _download(discriminator, generator, work)
    except (OSError, ValueError) as e:  # no such model, a broken download: transformers' OSError
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return None, (f"skipped {discriminator}: could not load it ({first[:160]}); the "
                      "comparison needs the Hugging Face hub or a local copy")
    ckpt = load_checkpoint(convert(work / "disc", work / "minielectra", direction="from_hf",
                                   generator=work / "gen"))
    ckpt.name = Path(str(discriminator)).name
    return ckpt, f"loaded {discriminator} (and {generator}) with transformers' from_pretrained"
