"""Saving and loading a whole ELECTRA (generator + discriminator): minielectra's checkpoint format.

A checkpoint is a directory::

    model.safetensors   every weight once
    config.json         {"format": "minielectra", "version": 1, "model": {...}, "objective": {...}}
    vocab.txt           the tokenizer, when the model has one (+ tokenizer_config.json)
    checksums.json      the sha256 of every file but the JSON ones, checked on load
                        (older checkpoints without it still load, unchecked)

The generator and the discriminator hold the *same* embedding modules (weight tying, paper
section 3.2), so ``state_dict()`` lists those tensors twice. safetensors refuses aliased tensors;
``safetensors.torch.save_model`` writes each once and ``load_model`` fills every alias, and since
the tying itself lives in ``config.json``, a loaded model shares exactly what the saved one did.

Writes are atomic and loads exact (:mod:`.storage`). :func:`load_pretrained` also reads
transformers ELECTRA directories, through :mod:`.hf`. Neither module imports the model class:
``Electra.from_pretrained`` passes itself in as ``model_class``, so the model sits above its file
formats and nothing imports in a circle.
"""

from __future__ import annotations

import dataclasses
import json
import pickle
from collections.abc import Callable, Mapping
from pathlib import Path

from safetensors import SafetensorError, safe_open
from safetensors.torch import load_model, save_model
from torch import nn

from ..config import ModelConfig, ObjectiveConfig
from ..overrides import from_dict
from . import hf
from ..safeio import ASIDE, read_json, replace_dir, write_file
from .hubmodels import owner_hint
from .storage import (CONFIG, VOCAB, CheckpointError, tied_aliases, check_finite,
                      check_state, load_tokenizer, order_safetensors_file, resolve_bundled,
                      verify_checksums, write_checksums, write_error)

FORMAT, VERSION = "minielectra", 1
WEIGHTS = "model.safetensors"
# The files a model load reads (run_config.json and trainer_state.pt are the resume's to check).
MODEL_FILES = (CONFIG, WEIGHTS, VOCAB, "tokenizer_config.json")

# ------------------------------------------------------------------------ save and load


def save_pretrained(model: nn.Module, path: str | Path, *,
                    extra_files: Mapping[str, str | bytes] | None = None) -> Path:
    """Write ``model`` to the directory ``path`` atomically (replacing what was there).

    ``extra_files`` (name -> text or bytes) are written into the same directory before it is
    published, e.g. ``{"run_config.json": ...}``: files added to ``path`` later are not atomic.
    """
    path = Path(path)
    config = {"format": FORMAT, "version": VERSION,
              "model": dataclasses.asdict(model.config),
              "objective": dataclasses.asdict(model.objective)}
    with replace_dir(path) as tmp:
        try:
            save_model(model, str(tmp / WEIGHTS), metadata={"format": "pt"})
        except SafetensorError as e:  # a full disk: an OSError naming the file
            raise write_error(e, path / WEIGHTS) from None
        order_safetensors_file(tmp / WEIGHTS)  # identical weights, identical bytes
        write_file(tmp / CONFIG, json.dumps(config, indent=2) + "\n")
        if model.tokenizer is not None:
            model.tokenizer.save(tmp)
        for name, content in (extra_files or {}).items():
            write_file(tmp / name, content)
        write_checksums(tmp)
    return path


def load_pretrained(path: str | Path, model_class: Callable[..., nn.Module], *,
                    generator: str | Path | None = None) -> nn.Module:
    """A ``model_class(model_config, objective_config)`` (a class, or a function that picks one)
    from a minielectra checkpoint directory (or ``"bundled"``), or from transformers ELECTRA
    directories (see :func:`.hf.load`, which ``generator=`` is passed to)."""
    path = resolve_bundled(path)
    if not path.is_dir():
        leftovers = sorted(path.parent.glob(f".{path.name}.old-*/{ASIDE}"))
        hint = (f"; an interrupted save left the previous checkpoint at {leftovers[-1]}"
                if leftovers else "")
        raise FileNotFoundError(f"no checkpoint directory at {path}{hint or owner_hint(path)}")
    verify_checksums(path, MODEL_FILES)
    config = _read_json(path / CONFIG) if (path / CONFIG).is_file() else {}
    if config.get("format") == FORMAT:
        if generator is not None:
            raise ValueError(f"{path} is a minielectra checkpoint; generator= is for "
                             "transformers directories")
        model = _load_minielectra(path, config, model_class)
    elif hf.is_hf_dir(path):
        model = _load_hf(path, model_class, generator)
    else:
        raise _not_a_checkpoint(path)
    check_finite(model, source=str(path))
    return model


def _load_hf(path: Path, model_class, generator) -> nn.Module:
    if generator is not None:  # a hub model id too (google/electra-small-generator)
        generator = resolve_bundled(generator)
    try:
        return hf.load(path, model_class, generator=generator)
    except pickle.UnpicklingError as e:  # torch.load(weights_only=True) refused to run code
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CheckpointError(f"{path}: a pytorch_model.bin holds more than tensors (a pickled "
                              f"program, refused and not run: {first}); convert it to "
                              "model.safetensors where it came from") from None
    except SafetensorError as e:
        raise CheckpointError(f"{path}: a model.safetensors is damaged or truncated ({e})"
                              ) from None


def _not_a_checkpoint(path: Path) -> CheckpointError:
    return CheckpointError(f"{path} is neither a minielectra checkpoint ({CONFIG} with "
                          f"\"format\": \"{FORMAT}\") nor a transformers ELECTRA directory")


def _read_json(path: Path) -> dict:
    try:
        return read_json(path)
    except ValueError as e:  # not UTF-8, not JSON, or not an object: named
        raise CheckpointError(str(e)) from None


def _load_minielectra(path: Path, config: dict, model_class: Callable[..., nn.Module]
                      ) -> nn.Module:
    if config.get("version") != VERSION:
        raise CheckpointError(f"{path / CONFIG}: version {config.get('version')!r} is not "
                              f"supported (this minielectra reads version {VERSION})")
    if "model" not in config:
        raise CheckpointError(f"{path / CONFIG} has no \"model\" section")
    try:  # a value of the wrong type or out of range: named, with the file
        model = model_class(from_dict(ModelConfig, config["model"], prefix="model."),
                            from_dict(ObjectiveConfig, config.get("objective", {}),
                                       prefix="objective."))
    except (KeyError, ValueError) as e:
        error = KeyError if isinstance(e, KeyError) else CheckpointError
        raise error(f"{path / CONFIG}: {e.args[0] if e.args else e}") from None
    weights = path / WEIGHTS
    if not weights.is_file():
        raise FileNotFoundError(f"{path} has no {WEIGHTS}")
    try:
        with safe_open(weights, framework="pt") as f:
            found = {k: f.get_slice(k).get_shape() for k in f.keys()}
    except SafetensorError as e:  # a checkpoint without checksums.json, cut short
        raise CheckpointError(f"{weights}: damaged or truncated, not a safetensors file ({e})"
                              ) from None
    aliases = tied_aliases(model)
    duplicates = {n for rest in aliases.values() for n in rest}
    expected = {k: v.shape for k, v in model.state_dict().items() if k not in duplicates}
    check_state(expected, found, source=str(weights), aliases=aliases)
    load_model(model, weights, strict=True)
    model.tokenizer = load_tokenizer(path)
    return model
