"""Safe checkpoint files: atomic directory writes, exact state checks, the bundled checkpoint.

What every on-disk format of the model needs (minielectra's own, :mod:`.checkpoint`, and
transformers', :mod:`.hf`), kept apart so that neither format imports the other. Three promises:
a write is atomic (:func:`minielectra.safeio.replace_dir`: a crash leaves the old checkpoint or
none, never half a new one), a load is never partial (:func:`check_state`: a missing, unexpected
or mis-shaped tensor is an error that names it), and a damaged file is named, not loaded
(:func:`verify_checksums` against the sha256 sums written with the checkpoint;
:func:`check_finite` for NaN weights).
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import struct
from collections.abc import Mapping
from pathlib import Path

import torch

from ..data.files import first_damaged, outside, sha256_sums
from ..safeio import write_file

logger = logging.getLogger(__name__)

CONFIG, VOCAB, CHECKSUMS = "config.json", "vocab.txt", "checksums.json"

# ------------------------------------------------------------------------ 1. checking a state


class CheckpointError(ValueError):
    """A checkpoint does not fit the model it is loaded into."""


def _shape(s) -> str:
    return "(" + ", ".join(str(x) for x in s) + ")"


def check_state(expected: Mapping[str, torch.Size], found: Mapping[str, torch.Size], *,
                source: str, aliases: Mapping[str, list[str]] | None = None) -> None:
    """Raise :class:`CheckpointError` unless ``found`` has exactly the keys and shapes expected.

    ``aliases`` maps an expected name to other names of the same (shared) tensor, any one of
    which may stand for it in the file. The message lists every problem, each key with shapes.
    """
    aliases = aliases or {}
    problems = []
    for key, shape in expected.items():
        name = next((n for n in (key, *aliases.get(key, ())) if n in found), None)
        if name is None:
            problems.append(f"missing key {key}: model {_shape(shape)}")
        elif tuple(found[name]) != tuple(shape):
            problems.append(f"shape mismatch for {name}: checkpoint {_shape(found[name])}, "
                            f"model {_shape(shape)}")
    known = set(expected).union(*aliases.values())
    problems += [f"unexpected key {key}: checkpoint {_shape(found[key])}"
                 for key in found if key not in known]
    if problems:
        raise CheckpointError(f"{source} does not match the model ({len(problems)} problem"
                              f"{'s' if len(problems) > 1 else ''}):\n  " + "\n  ".join(problems))


def tied_aliases(model: torch.nn.Module) -> dict[str, list[str]]:
    """The first name of each shared parameter -> its other names in ``model.state_dict()``."""
    names: dict[int, list[str]] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), []).append(name)
    return {first: rest for first, *rest in names.values() if rest}


def check_finite(module: torch.nn.Module, *, source: str) -> None:
    """Refuse weights holding NaN or inf: every output of such a model is meaningless, yet an
    evaluation of it would still print numbers (AUC 0.5) and exit 0."""
    for name, t in module.state_dict().items():
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            raise CheckpointError(f"{source}: tensor {name} holds NaN/inf values (the run that "
                                  "wrote it diverged); use an earlier checkpoint")


# ------------------------------------------------------------------------ 2. checksums


class DamagedCheckpointError(CheckpointError):
    """A file of a checkpoint is missing, truncated or altered since it was written."""


def write_checksums(directory: Path) -> None:
    """``checksums.json``: the sha256 of every file in ``directory`` but the JSON ones, written
    inside the atomic directory before it is published, so that a later read can tell a damaged
    file (a disk error, a truncated copy) from the one the run wrote. JSON files are left out:
    their parser names what is wrong with them, and people edit them by hand; weights, the
    optimiser state and vocab.txt have no other check (a vocab cut short still loads)."""
    files = sorted(p for p in Path(directory).rglob("*") if p.is_file() and p.suffix != ".json")
    sums = sha256_sums(directory, [p.relative_to(directory).as_posix() for p in files])
    write_file(Path(directory) / CHECKSUMS, json.dumps({"sha256": sums}, indent=2) + "\n")


def verify_checksums(directory: Path, names=None) -> bool:
    """Check the files ``checksums.json`` lists (only ``names`` among them, when given) against
    their sha256; raise :class:`DamagedCheckpointError` naming the first that differs. Returns
    False for a directory without ``checksums.json`` (older checkpoints: nothing to verify)."""
    directory = Path(directory)
    path = directory / CHECKSUMS
    if not path.is_file():
        return False
    try:
        sums = json.loads(path.read_text())["sha256"]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
        raise DamagedCheckpointError(f"{path}: unreadable ({e!r})") from None
    if not isinstance(sums, dict) or not all(isinstance(v, str) for v in sums.values()):
        raise DamagedCheckpointError(f"{path}: damaged (\"sha256\" is not a map of file names "
                                     "to sums)")
    away = [name for name in sums if outside(directory, name)]  # never read, whichever asked
    problem = first_damaged(directory, {name: digest for name, digest in sums.items()
                                        if names is None or name in names or name in away})
    if problem:
        raise DamagedCheckpointError(problem)
    return True


def _ordered_header(raw: bytes) -> bytes:
    """The same header in one order, padded to its length: metadata keys sorted, then the
    tensors by their place in the file. safetensors writes its metadata in the order of a hash
    map seeded afresh in every process, so identical weights gave files, and checksums, that
    differed."""
    header = json.loads(raw)
    meta = header.pop("__metadata__", None)
    ordered = {"__metadata__": dict(sorted(meta.items()))} if meta is not None else {}
    ordered.update(sorted(header.items(), key=lambda kv: (kv[1]["data_offsets"], kv[0])))
    text = json.dumps(ordered, separators=(",", ":"), ensure_ascii=False).encode()
    if len(text) > len(raw):  # the same entries: never longer than safetensors' own
        raise ValueError("safetensors header grew when ordered")
    return text + b" " * (len(raw) - len(text))


def canonical_safetensors(data: bytes) -> bytes:
    """``data`` (a safetensors file's bytes) with its header in one order (:func:`_ordered_header`)."""
    n = struct.unpack("<Q", data[:8])[0]
    return data[:8] + _ordered_header(data[8:8 + n]) + data[8 + n:]


def order_safetensors_file(path: str | Path) -> None:
    """Put the header of the safetensors file ``path`` in one order, in place (same length)."""
    with open(path, "r+b") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = _ordered_header(f.read(n))
        f.seek(8)
        f.write(header)


def write_error(e: Exception, path: str | Path) -> OSError:
    """A safetensors write error as the OSError it wraps ("os error 28": a full disk), naming
    ``path`` (the file's final place, not the temporary folder)."""
    found = re.search(r"os error (\d+)", str(e))
    code = int(found.group(1)) if found else errno.EIO
    return OSError(code, os.strerror(code), str(path))


# ------------------------------------------------------------------------ 4. the tokenizer


def load_tokenizer(directory: Path):
    """``WordPieceTokenizer.load(directory)`` when ``directory/vocab.txt`` exists, else None."""
    if not (directory / VOCAB).is_file():
        return None
    try:
        from ..data.tokenizer import WordPieceTokenizer
    except ModuleNotFoundError as e:
        if e.name not in ("minielectra.data.tokenizer", "tokenizers"):
            raise
        logger.warning("%s has a vocab.txt but the tokenizer cannot be imported (%s); "
                       "the model is loaded without one", directory, e)
        return None
    return WordPieceTokenizer.load(directory)


# The checkpoint shipped inside the package (see its MODEL_CARD.md): what notebooks, the
# visualisation and ``--checkpoint bundled`` use when no checkpoint is given.
BUNDLED = Path(__file__).parents[1] / "assets" / "bundled"


def resolve_bundled(path: str | Path) -> Path:
    """``"bundled"`` -> the packaged checkpoint; a hub model id (``google/electra-small-
    discriminator``, not a local path) -> its downloaded directory (:mod:`.hubmodels`); any
    other path unchanged."""
    from .hubmodels import hub_model_dir, is_hub_id
    if str(path) == "bundled":
        if not (BUNDLED / CONFIG).is_file():
            raise FileNotFoundError(f"the bundled checkpoint is missing from {BUNDLED}")
        return BUNDLED
    if is_hub_id(path):
        return hub_model_dir(str(path))
    return Path(path)
