"""Where pre-training text comes from: one string names a corpus everywhere (CLI, config, notebooks).

Names understood by :func:`open_corpus` (a corpus is a stream of documents, :mod:`.documents`):

- ``pydocs``: built in, offline: the running Python's standard-library docstrings
  (:mod:`.pydocs`), collected once, then cached.
- a path: a ``.txt`` / ``.txt.gz`` file, a directory of them, or a glob, in the official format
  or as plain paragraphs, one per line; WikiText files (``wiki.*.raw``) split at ``= Title =``.
- ``pretrain-en``, ``wikitext-2``, ``wikitext-103``, ``openwebtext``: from the data dir
  (``data_dir`` or env ``MINIELECTRA_DATA_DIR``) when it has them, else from the hub; a WikiText
  folder with ``wiki.train.raw`` gives that file alone (the hub's train split).
- ``hf:<name>[:<config>][:rows=documents|lines|wikitext][:column=NAME][:revision=REV]``: the
  train split of any hub dataset, streamed (:mod:`.hub`).
- ``a+b``: the documents of ``a`` then those of ``b`` (the ``mini`` preset: ``pretrain-en+pydocs``).
"""

from __future__ import annotations

import glob as globlib
import hashlib
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

from .documents import WIKITEXT_FILE, Corpus, ReadStats, concat_corpora, file_documents

log = logging.getLogger(__name__)

DATA_DIR_ONLY = ("pretrain-en",)  # corpora that exist only as files in a data dir


def default_cache_dir(cache_dir=None) -> Path:
    """``cache_dir`` if given, else env ``MINIELECTRA_CACHE``, else ``~/.cache/minielectra``."""
    if cache_dir:
        return Path(cache_dir)
    return Path(os.environ.get("MINIELECTRA_CACHE") or Path.home() / ".cache" / "minielectra")


def find_data_dir(data_dir=None) -> Path | None:
    """``data_dir`` if given, else env ``MINIELECTRA_DATA_DIR``, else None (no data dir)."""
    data_dir = data_dir or os.environ.get("MINIELECTRA_DATA_DIR")
    return Path(data_dir) if data_dir else None


# -------------------------------------------------------------------------------- path corpora
def _resolve_paths(spec: str) -> list[Path]:
    """The text files a path spec names: a file, a directory (searched recursively) or a glob."""
    if any(c in spec for c in "*?["):
        paths = sorted(Path(p) for p in globlib.glob(spec, recursive=True) if Path(p).is_file())
        if not paths:
            raise FileNotFoundError(f"corpus {spec!r}: the glob matches no files")
        return paths
    path = Path(spec).expanduser()
    if path.is_file():
        return [path]
    if path.is_dir():
        paths = sorted(p for p in path.rglob("*") if p.is_file() and
                       (p.name.endswith((".txt", ".txt.gz")) or WIKITEXT_FILE.search(p.name)))
        if not paths:
            raise FileNotFoundError(f"corpus {spec!r}: directory {path} has no .txt or .txt.gz files")
        return paths
    raise FileNotFoundError(f"corpus {spec!r}: no such file or directory, and not a known corpus "
                            f"name ({', '.join(known_names())}, hf:<name>[:<config>][:option=value])")


def _files_corpus(name: str, paths: list[Path], stats: ReadStats) -> Corpus:
    # size + mtime stand in for the content: an edited file gets a new fingerprint (new caches).
    ident = [(str(p.resolve()), p.stat().st_size, p.stat().st_mtime_ns) for p in paths]
    fingerprint = "files:" + hashlib.sha256(json.dumps(ident).encode()).hexdigest()[:16]
    return Corpus(name, lambda: file_documents(paths, stats), fingerprint=fingerprint, stats=stats)


def _data_dir_files(name: str, data_dir: Path | None) -> list[Path] | None:
    """Files for a named corpus in the data dir (``<dir>/<name>/`` or ``<dir>/<name>-raw/``)."""
    if data_dir is None:
        return None
    for folder in (data_dir / name, data_dir / f"{name}-raw"):
        if folder.is_dir():
            try:
                paths = _resolve_paths(str(folder))
            except FileNotFoundError:
                continue
            # WikiText by name means its train split, as on the hub; valid/test are the
            # language-model benchmark's text. shared/data has only those two, so they stand in.
            train = [p for p in paths if WIKITEXT_FILE.search(p.name) and ".train." in p.name]
            if train:
                return train
            if any(WIKITEXT_FILE.search(p.name) for p in paths):
                log.info("corpus %s: %s has no wiki.train.raw; using the files it has", name, folder)
            return paths
    return None


# ------------------------------------------------------------------------------------- pydocs
def _pydocs_corpus(cache_dir: Path, stats: ReadStats) -> Corpus:
    from . import pydocs  # the collecting script, imported where it runs
    build = f"{sys.version.split()[0]}-{sys.platform}-v{pydocs._PYDOCS_VERSION}"
    path = cache_dir / "corpora" / f"pydocs-{build}.txt"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        # A fresh isolated interpreter: imports' side effects (readline, printing, signal
        # handlers) stay out of this process, and with -I neither the current directory nor
        # pydocs.py's own folder is on sys.path, so no local "random.py" shadows the stdlib.
        done = subprocess.run([sys.executable, "-I", pydocs.__file__, str(tmp)], timeout=300,
                              text=True, stdin=subprocess.DEVNULL, capture_output=True)
        if done.returncode:
            raise RuntimeError(f"corpus pydocs: collecting docstrings failed:\n{done.stderr[-2000:]}")
        os.replace(tmp, path)
        log.info("corpus pydocs: collected the standard library's docstrings into %s", path)
    return Corpus("pydocs", lambda: file_documents([path], stats),
                  fingerprint=f"pydocs:{build}", stats=stats)


# ----------------------------------------------------------------------------------- open_corpus
def known_names() -> list[str]:
    from .hub import HUB_CORPORA  # imported where a name may be one (hub code: not the course's)
    return ["pydocs", *DATA_DIR_ONLY, *HUB_CORPORA]


def absent_local_corpora(spec: str, *, data_dir=None) -> list[str]:
    """The parts of ``spec`` that exist only in a data dir (``pretrain-en``) and are not there."""
    root = find_data_dir(data_dir)
    return [s for s in (p.strip() for p in _split_spec(spec))
            if s in DATA_DIR_ONLY and not _data_dir_files(s, root)]


def open_corpus(spec: str, *, data_dir=None, cache_dir=None) -> Corpus:
    """The corpus a string names (see the module docstring). Opening reads nothing yet."""
    stats = ReadStats()
    data_dir = find_data_dir(data_dir)
    parts = [_open_one(s.strip(), data_dir, default_cache_dir(cache_dir), stats)
             for s in _split_spec(spec)]
    return parts[0] if len(parts) == 1 else concat_corpora(parts, stats)


def _split_spec(spec: str) -> list[str]:
    if not spec or not spec.strip():
        raise ValueError("corpus name is empty; use pydocs, a path, or one of " +
                         ", ".join(known_names()))
    if "+" in spec and not Path(spec).exists():  # "a+b", unless a real file has '+' in its name
        return spec.split("+")
    return [spec]


def _open_one(spec: str, data_dir: Path | None, cache_dir: Path, stats: ReadStats) -> Corpus:
    from .hub import HUB_CORPORA, hub_corpus, parse_hub_spec  # (as in known_names)
    if spec == "pydocs":
        return _pydocs_corpus(cache_dir, stats)
    if spec in DATA_DIR_ONLY or spec in HUB_CORPORA:
        paths = _data_dir_files(spec, data_dir)
        if paths:
            log.info("corpus %s: from data dir %s: %s", spec, data_dir, [p.name for p in paths])
            return _files_corpus(spec, paths, stats)
        if spec in DATA_DIR_ONLY:
            raise FileNotFoundError(
                f"corpus {spec!r} exists only in a data dir, and "
                + (f"{data_dir} has no {spec}/ folder" if data_dir else "no data dir is set")
                + f" (set MINIELECTRA_DATA_DIR to a data dir with {spec}/, or use another "
                "corpus: --corpus pydocs, built in, or --corpus FILE)")
        log.info("corpus %s: not in %s; will load it from the Hugging Face hub", spec,
                 f"data dir {data_dir}" if data_dir else "a data dir (none is set)")
        return hub_corpus(spec, HUB_CORPORA[spec])
    if spec.startswith("hf:"):
        return hub_corpus(spec, parse_hub_spec(spec))
    paths = _resolve_paths(spec)
    log.info("corpus %s: %d file(s)", spec, len(paths))
    return _files_corpus(spec, paths, stats)
