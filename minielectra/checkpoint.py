"""Saving and loading a whole ELECTRA (generator + discriminator): minielectra's checkpoint format.

A checkpoint is a directory::

    model.safetensors   every weight once
    config.json         {"format": "minielectra", "version": 1, "model": {...}, "objective": {...}}
    vocab.txt           the tokenizer, when the model has one (+ tokenizer_config.json)

The generator and the discriminator hold the *same* embedding modules (weight tying, paper
section 3.2), so ``state_dict()`` lists those tensors twice. safetensors refuses aliased tensors;
``safetensors.torch.save_model`` writes each once and ``load_model`` fills every alias, and since
the tying itself lives in ``config.json``, a loaded model shares exactly what the saved one did.

Two promises: a write is atomic (:func:`atomic_dir`: a crash leaves the old checkpoint or none,
never half a new one), and a load is never partial (:func:`check_state`: a missing, unexpected or
mis-shaped tensor is an error that names it). :func:`load_pretrained` also reads transformers
ELECTRA directories, through :mod:`minielectra.hf`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from safetensors import safe_open
from safetensors.torch import load_model, save_model

from .config import ModelConfig, ObjectiveConfig, _from_dict

if TYPE_CHECKING:
    from .electra import Electra

logger = logging.getLogger(__name__)

FORMAT, VERSION = "minielectra", 1
WEIGHTS, CONFIG, VOCAB = "model.safetensors", "config.json", "vocab.txt"

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


def _aliases(model: torch.nn.Module) -> dict[str, list[str]]:
    """The first name of each shared parameter -> its other names in ``model.state_dict()``."""
    names: dict[int, list[str]] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), []).append(name)
    return {first: rest for first, *rest in names.values() if rest}


# ------------------------------------------------------------------------ 2. atomic writes


@contextlib.contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """Yield an empty temporary directory beside ``path``; when the block ends without error it
    replaces ``path`` as a whole (the old contents go).

    On an exception the temporary directory is removed and ``path`` is untouched. POSIX cannot
    swap two directories in one rename, so an existing ``path`` is first renamed aside: a process
    killed between the two renames leaves no ``path`` (the old one is ``.NAME.old-*`` beside it),
    never a half-written one.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise FileExistsError(f"{path} exists and is not a directory")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-", dir=path.parent))
    old = None
    try:
        yield tmp
        os.chmod(tmp, 0o755)  # mkdtemp makes it private
        _fsync_tree(tmp)
        if path.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{path.name}.old-", dir=path.parent))
            os.rename(path, old / "checkpoint")
        os.rename(tmp, path)
    except BaseException:
        if old is not None and not path.exists():  # put the previous version back
            os.rename(old / "checkpoint", path)
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    _fsync(path.parent)


def _fsync(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # e.g. directories on Windows
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _fsync_tree(root: Path) -> None:
    """Flush every file so that the rename never publishes data still only in the page cache."""
    for p in sorted(root.rglob("*"), reverse=True):
        _fsync(p)
    _fsync(root)


# ------------------------------------------------------------------------ 3. the tokenizer


def load_tokenizer(directory: Path):
    """``WordPieceTokenizer.load(directory)`` when ``directory/vocab.txt`` exists, else None."""
    if not (directory / VOCAB).is_file():
        return None
    try:
        from .tokenizer import WordPieceTokenizer
    except ModuleNotFoundError as e:
        if e.name not in ("minielectra.tokenizer", "tokenizers"):
            raise
        logger.warning("%s has a vocab.txt but the tokenizer cannot be imported (%s); "
                       "the model is loaded without one", directory, e)
        return None
    return WordPieceTokenizer.load(directory)


# ------------------------------------------------------------------------ 4. save and load


def save_pretrained(model: "Electra", path: str | Path, *,
                    extra_files: Mapping[str, str | bytes] | None = None) -> Path:
    """Write ``model`` to the directory ``path`` atomically (replacing what was there).

    ``extra_files`` (name -> text or bytes) are written into the same directory before it is
    published, e.g. ``{"run_config.json": ...}``: files added to ``path`` later are not atomic.
    """
    path = Path(path)
    config = {"format": FORMAT, "version": VERSION,
              "model": dataclasses.asdict(model.config),
              "objective": dataclasses.asdict(model.objective)}
    with atomic_dir(path) as tmp:
        save_model(model, str(tmp / WEIGHTS), metadata={"format": "pt"})
        (tmp / CONFIG).write_text(json.dumps(config, indent=2) + "\n")
        if model.tokenizer is not None:
            model.tokenizer.save(tmp)
        for name, content in (extra_files or {}).items():
            target = tmp / name
            if isinstance(content, bytes):
                target.write_bytes(content)
            else:
                target.write_text(content)
    return path


# The checkpoint shipped inside the package (see its MODEL_CARD.md): what notebooks, the
# visualisation and ``--checkpoint bundled`` use when no checkpoint is given.
BUNDLED = Path(__file__).parent / "assets" / "bundled"


def resolve_bundled(path: str | Path) -> Path:
    """``"bundled"`` -> the packaged checkpoint; any other path unchanged."""
    if str(path) == "bundled":
        if not (BUNDLED / CONFIG).is_file():
            raise FileNotFoundError(f"the bundled checkpoint is missing from {BUNDLED}")
        return BUNDLED
    return Path(path)


def load_pretrained(path: str | Path, *, generator: str | Path | None = None) -> "Electra":
    """A minielectra checkpoint directory (or ``"bundled"``), or transformers ELECTRA
    directories (see :func:`minielectra.hf.load`, which ``generator=`` is passed to)."""
    path = resolve_bundled(path)
    if not path.is_dir():
        leftovers = sorted(path.parent.glob(f".{path.name}.old-*/checkpoint"))
        hint = (f"; an interrupted save left the previous checkpoint at {leftovers[-1]}"
                if leftovers else "")
        raise FileNotFoundError(f"no checkpoint directory at {path}{hint}")
    config = _read_json(path / CONFIG) if (path / CONFIG).is_file() else {}
    if config.get("format") == FORMAT:
        if generator is not None:
            raise ValueError(f"{path} is a minielectra checkpoint; generator= is for "
                             "transformers directories")
        return _load_minielectra(path, config)
    from . import hf
    if hf.is_hf_dir(path):
        return hf.load(path, generator=generator)
    raise CheckpointError(f"{path} is neither a minielectra checkpoint ({CONFIG} with "
                          f"\"format\": \"{FORMAT}\") nor a transformers ELECTRA directory")


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{path}: not valid JSON ({e})") from None


def _load_minielectra(path: Path, config: dict) -> "Electra":
    from .electra import Electra
    if config.get("version") != VERSION:
        raise CheckpointError(f"{path / CONFIG}: version {config.get('version')!r} is not "
                              f"supported (this minielectra reads version {VERSION})")
    if "model" not in config:
        raise CheckpointError(f"{path / CONFIG} has no \"model\" section")
    model = Electra(_from_dict(ModelConfig, config["model"], prefix="model."),
                    _from_dict(ObjectiveConfig, config.get("objective", {}), prefix="objective."))
    weights = path / WEIGHTS
    if not weights.is_file():
        raise FileNotFoundError(f"{path} has no {WEIGHTS}")
    with safe_open(weights, framework="pt") as f:
        found = {k: f.get_slice(k).get_shape() for k in f.keys()}
    aliases = _aliases(model)
    duplicates = {n for rest in aliases.values() for n in rest}
    expected = {k: v.shape for k, v in model.state_dict().items() if k not in duplicates}
    check_state(expected, found, source=str(weights), aliases=aliases)
    load_model(model, weights, strict=True)
    model.tokenizer = load_tokenizer(path)
    return model
