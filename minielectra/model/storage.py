"""Safe checkpoint files: atomic directory writes, exact state checks, the bundled checkpoint.

What every on-disk format of the model needs (minielectra's own, :mod:`.checkpoint`, and
transformers', :mod:`.hf`), kept apart so that neither format imports the other. Two promises:
a write is atomic (:func:`atomic_dir`: a crash leaves the old checkpoint or none, never half a new
one), and a load is never partial (:func:`check_state`: a missing, unexpected or mis-shaped tensor
is an error that names it).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

import torch

logger = logging.getLogger(__name__)

CONFIG, VOCAB = "config.json", "vocab.txt"

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
    """``"bundled"`` -> the packaged checkpoint; any other path unchanged."""
    if str(path) == "bundled":
        if not (BUNDLED / CONFIG).is_file():
            raise FileNotFoundError(f"the bundled checkpoint is missing from {BUNDLED}")
        return BUNDLED
    return Path(path)
