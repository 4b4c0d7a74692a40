"""Where pre-training text comes from: one string names a corpus everywhere (CLI, config, notebooks).

A corpus is a stream of *documents*; a document is a list of non-empty lines (sentences or
paragraphs). That is the input of the official ELECTRA data builder (``build_pretraining_dataset.py``:
one sentence per line, a blank line ends a document), and examples never cross a document.

Names understood by :func:`open_corpus`:

- ``pydocs``: built in, offline: the docstrings of the running Python's standard library, one
  module per document (~200k words, fixed for a Python build). Collected once, then cached.
- a path: a ``.txt`` / ``.txt.gz`` file, a directory of them, or a glob (``data/*.txt.gz``), in
  the official format or as plain paragraphs, one per line (a paragraph is then a "sentence"; the
  builder drops what exceeds max_len, as the official one does). WikiText files
  (``wiki.*.raw``) are split into articles at their ``= Title =`` lines.
- ``pretrain-en``, ``wikitext-2``, ``wikitext-103``, ``openwebtext``: read from the data dir
  (``data_dir`` or env ``MINIELECTRA_DATA_DIR``, layout of ``shared/data``) when it has them, else
  from the Hugging Face hub through ``datasets`` (large ones streamed, never loaded whole).
- ``hf:<name>[:<config>]``: any hub dataset with a text column, streamed.
- ``a+b``: the documents of ``a`` then those of ``b`` (the ``mini`` preset: ``pretrain-en+pydocs``).

:meth:`Corpus.split` holds out documents by a hash of their text, so the held-out set is the same on
every machine, in every order, and a document never lands on both sides.
"""

from __future__ import annotations

import glob as globlib
import gzip
import hashlib
import json
import logging
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

log = logging.getLogger(__name__)

# name -> (hub path, hub config, streamed, text format); "wikitext" rows are lines of articles.
HUB_CORPORA = {
    "wikitext-2": ("wikitext", "wikitext-2-raw-v1", False, "wikitext"),
    "wikitext-103": ("wikitext", "wikitext-103-raw-v1", True, "wikitext"),
    "openwebtext": ("Skylion007/openwebtext", None, True, "documents"),
}
DATA_DIR_ONLY = ("pretrain-en",)  # corpora that exist only as files in a data dir
_WIKITEXT_FILE = re.compile(r"wiki\.(train|valid|test)\.(raw|tokens)(\.gz)?$")
_WIKITEXT_TITLE = re.compile(r"^= [^=].* =$")  # " = Title = " starts an article; " = = h = = " not
_PYDOCS_VERSION = 1  # bump when the collector changes, so cached copies are rebuilt


def default_cache_dir(cache_dir=None) -> Path:
    """``cache_dir`` if given, else env ``MINIELECTRA_CACHE``, else ``~/.cache/minielectra``."""
    if cache_dir:
        return Path(cache_dir)
    return Path(os.environ.get("MINIELECTRA_CACHE") or Path.home() / ".cache" / "minielectra")


def find_data_dir(data_dir=None) -> Path | None:
    """``data_dir`` if given, else env ``MINIELECTRA_DATA_DIR``, else None (no data dir)."""
    data_dir = data_dir or os.environ.get("MINIELECTRA_DATA_DIR")
    return Path(data_dir) if data_dir else None


# ----------------------------------------------------------------------------- reading files
@dataclass
class ReadStats:
    """What reading files found: skipped files and replaced bytes, per file, for the report."""

    files: set[str] = field(default_factory=set)
    skipped: dict[str, str] = field(default_factory=dict)  # path -> reason
    replaced: dict[str, int] = field(default_factory=dict)  # path -> undecodable byte sequences

    def as_dict(self) -> dict:
        return {"files": len(self.files), "skipped_files": dict(sorted(self.skipped.items())),
                "replaced_sequences": sum(self.replaced.values()),
                "replaced_by_file": dict(sorted(self.replaced.items()))}


def _open_binary(path: Path):
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def _read_lines(path: Path, stats: ReadStats) -> Iterator[str]:
    """Stripped lines of one file; a binary file is skipped and undecodable bytes are replaced."""
    stats.files.add(str(path))
    try:
        with _open_binary(path) as f:
            if b"\x00" in f.read(8192):  # text never contains NUL; images/archives/.npy do
                raise ValueError("binary content (NUL bytes; or UTF-16/32 text)")
    except (OSError, EOFError, ValueError) as e:
        stats.skipped[str(path)] = str(e)
        log.warning("corpus: skipped %s: %s", path, e)
        return
    replaced, line_no = 0, 0
    with _open_binary(path) as f:
        try:
            for block in _line_blocks(f):
                try:
                    text = block.decode("utf-8")
                except UnicodeDecodeError:
                    text = block.decode("utf-8", errors="replace")
                    replaced += text.count("\ufffd") - block.count("\ufffd".encode())
                lines = text.split("\n")
                line_no += len(lines)
                yield from (line.strip() for line in lines)
        except (OSError, EOFError) as e:  # e.g. a truncated .gz: keep what was readable
            stats.skipped[str(path)] = f"unreadable after line {line_no}: {e}"
            log.warning("corpus: %s is unreadable after line %d (%s); the rest is skipped",
                        path, line_no, e)
    if replaced:
        stats.replaced[str(path)] = replaced
        log.warning("corpus: %s is not valid UTF-8: replaced %d undecodable byte sequence(s) "
                    "with U+FFFD", path, replaced)


def _line_blocks(f, size: int = 1 << 20) -> Iterator[bytes]:
    """Whole lines, up to ``size`` bytes at a time, without their last newline. Blocks are ~3x
    faster than reading line by line, and a newline byte never falls inside a UTF-8 character,
    so each block decodes on its own. (``read1``: a truncated .gz loses only its last block.)"""
    rest = b""
    while chunk := f.read1(size):
        data = rest + chunk
        cut = data.rfind(b"\n")
        if cut >= 0:
            rest = data[cut + 1:]
            yield data[:cut]
        else:
            rest = data
    if rest:
        yield rest


def _official_documents(lines: Iterable[str]) -> Iterator[list[str]]:
    """Official format: a blank line (or the end of the input) ends a document."""
    doc: list[str] = []
    for line in lines:
        if line:
            doc.append(line)
        elif doc:
            yield doc
            doc = []
    if doc:
        yield doc


def _wikitext_documents(lines: Iterable[str]) -> Iterator[list[str]]:
    """WikiText: an article starts at a ``= Title =`` line; blank lines only separate paragraphs."""
    doc: list[str] = []
    for line in lines:
        if _WIKITEXT_TITLE.match(line) and doc:
            yield doc
            doc = []
        if line:
            doc.append(line.strip("= ") if line.startswith("= ") else line)
    if doc:
        yield doc


def _file_documents(paths: list[Path], stats: ReadStats) -> Iterator[list[str]]:
    for path in paths:
        lines = _read_lines(path, stats)
        reader = _wikitext_documents if _WIKITEXT_FILE.search(path.name) else _official_documents
        yield from reader(lines)


# ------------------------------------------------------------------------------------- Corpus
class Corpus:
    """A named, re-iterable stream of documents; ``fingerprint`` identifies its content for caches."""

    def __init__(self, name: str, make_documents: Callable[[], Iterator[list[str]]], *,
                 fingerprint: str, stats: ReadStats | None = None):
        self.name = name
        self.fingerprint = fingerprint
        self.stats = stats or ReadStats()
        self._make_documents = make_documents

    def documents(self) -> Iterator[list[str]]:
        return self._make_documents()

    def texts(self) -> Iterator[str]:
        """Every line of every document (what a tokenizer trains on)."""
        for doc in self.documents():
            yield from doc

    def split(self, held_out_fraction: float) -> tuple["Corpus", "Corpus"]:
        """(train, held-out): a document is held out when the hash of its text < the fraction."""
        if not 0 <= held_out_fraction < 1:
            raise ValueError(f"held_out_fraction must be in [0, 1), got {held_out_fraction}")

        def part(held_out: bool) -> Corpus:
            def documents():
                return (d for d in self.documents() if (_doc_hash(d) < held_out_fraction) == held_out)
            tag = f"{'heldout' if held_out else 'train'}@{held_out_fraction:g}"
            return Corpus(f"{self.name}[{tag}]", documents, stats=self.stats,
                          fingerprint=f"{self.fingerprint}[{tag}]")
        return part(False), part(True)

    def __repr__(self) -> str:
        return f"Corpus({self.name!r})"


def _doc_hash(doc: list[str]) -> float:
    """A number in [0, 1) fixed by the document's text (same on every machine and run)."""
    digest = hashlib.blake2b("\n".join(doc).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2.0 ** 64


def _concat(parts: list[Corpus], stats: ReadStats) -> Corpus:
    def documents():
        for part in parts:
            yield from part.documents()
    return Corpus("+".join(p.name for p in parts), documents, stats=stats,
                  fingerprint="+".join(p.fingerprint for p in parts))


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
                       (p.name.endswith((".txt", ".txt.gz")) or _WIKITEXT_FILE.search(p.name)))
        if not paths:
            raise FileNotFoundError(f"corpus {spec!r}: directory {path} has no .txt or .txt.gz files")
        return paths
    raise FileNotFoundError(f"corpus {spec!r}: no such file or directory, and not a known corpus "
                            f"name ({', '.join(known_names())}, hf:<name>[:<config>])")


def _files_corpus(name: str, paths: list[Path], stats: ReadStats) -> Corpus:
    # size + mtime stand in for the content: an edited file gets a new fingerprint (new caches).
    ident = [(str(p.resolve()), p.stat().st_size, p.stat().st_mtime_ns) for p in paths]
    fingerprint = "files:" + hashlib.sha256(json.dumps(ident).encode()).hexdigest()[:16]
    return Corpus(name, lambda: _file_documents(paths, stats), fingerprint=fingerprint, stats=stats)


def _data_dir_files(name: str, data_dir: Path | None) -> list[Path] | None:
    """Files for a named corpus in the data dir (``<dir>/<name>/`` or ``<dir>/<name>-raw/``)."""
    if data_dir is None:
        return None
    for folder in (data_dir / name, data_dir / f"{name}-raw"):
        if folder.is_dir():
            try:
                return _resolve_paths(str(folder))
            except FileNotFoundError:
                continue
    return None


# ---------------------------------------------------------------------------------- hub corpora
def _hub_corpus(name: str, path: str, config: str | None, *, streaming: bool, fmt: str) -> Corpus:
    def documents():
        import datasets  # imported here: it is slow to import and only the hub needs it

        log.info("corpus %s: datasets.load_dataset(%r, %r, split='train', streaming=%s)",
                 name, path, config, streaming)
        try:
            rows = datasets.load_dataset(path, config, split="train", streaming=streaming)
        except Exception as e:  # offline, unknown name, ...: say which corpus and how to avoid it
            raise RuntimeError(f"corpus {name!r}: could not load {path!r} (config {config!r}) from "
                               f"the Hugging Face hub: {e}. Offline? Point MINIELECTRA_DATA_DIR at "
                               f"a data dir with a {name}/ folder, or use a path or 'pydocs'.") from e
        texts = (_text_of(row, name) for row in rows)
        if fmt == "wikitext":  # rows are the lines of the raw files
            return _wikitext_documents(t.strip() for t in texts)
        return ([ln for ln in (s.strip() for s in t.split("\n")) if ln] for t in texts)
    fingerprint = f"hub:{path}:{config}:train"
    return Corpus(name, lambda: (d for d in documents() if d), fingerprint=fingerprint)


def _text_of(row: dict, name: str) -> str:
    if isinstance(row.get("text"), str):
        return row["text"]
    for value in row.values():
        if isinstance(value, str):
            return value
    raise ValueError(f"corpus {name!r}: rows have no text column (columns: {sorted(row)})")


# ------------------------------------------------------------------------------------- pydocs
_PYDOCS_SKIP = {  # side effects on import (browser, prints, GUI), tests, or platform-only
    "antigravity", "this", "tkinter", "_tkinter", "turtle", "turtledemo", "idlelib", "test",
    "lib2to3", "ensurepip", "pydoc_data", "encodings", "msilib", "winreg", "winsound", "msvcrt",
    "distutils", "__main__"}
_SIGNATURE = re.compile(r"^[\w.]+\(.*\)(\s*->.*)?$")  # "sorted(iterable, /, *, key=None)": not prose


def _docstring_paragraphs(doc: str) -> Iterator[str]:
    """Prose paragraphs of a docstring, one line each; code, doctests and signatures dropped."""
    import inspect

    for para in re.split(r"\n\s*\n", inspect.cleandoc(doc)):
        lines = para.splitlines()
        if not lines or lines[0][:1].isspace() or any(
                ln.lstrip().startswith((">>>", "...")) for ln in lines):
            continue
        text = " ".join(para.split())
        if text and not _SIGNATURE.match(text):
            yield text


def _documented_objects(module) -> Iterator[object]:
    """The module, then its own classes (with their attributes) and functions, in sorted order."""
    import inspect

    yield module
    for name, obj in sorted(vars(module).items()):
        if name.startswith("__") or getattr(obj, "__module__", None) != module.__name__:
            continue  # re-exports are documented where they are defined
        if inspect.isclass(obj):
            yield obj
            yield from (value for _, value in sorted(vars(obj).items()))
        elif inspect.isroutine(obj):
            yield obj


def _collect_pydocs(out_path: str) -> None:
    """Write the stdlib's docstrings in the official format. Runs in a fresh ``python -I``."""
    import contextlib
    import importlib
    import io
    import pkgutil
    import warnings

    warnings.simplefilter("ignore")
    todo = sorted(n for n in sys.stdlib_module_names if n not in _PYDOCS_SKIP and "test" not in n)
    seen: set[str] = set()
    with open(out_path, "w", encoding="utf-8") as out:
        while todo:
            name = todo.pop(0)
            try:
                with contextlib.redirect_stdout(io.StringIO()), \
                        contextlib.redirect_stderr(io.StringIO()):
                    module = importlib.import_module(name)
            except BaseException:  # missing C extension, wrong platform, ...: skip the module
                continue
            if hasattr(module, "__path__"):  # a package: its submodules come right after it
                subs = sorted(m.name for m in pkgutil.iter_modules(module.__path__))
                todo[:0] = [f"{name}.{s}" for s in subs if s not in _PYDOCS_SKIP and "test" not in s]
            paragraphs = []
            for obj in _documented_objects(module):
                doc = getattr(obj, "__doc__", None)
                if isinstance(doc, str) and doc not in seen:  # the same text once only
                    seen.add(doc)
                    paragraphs.extend(_docstring_paragraphs(doc))
            if paragraphs:
                out.write("\n".join(paragraphs) + "\n\n")


def _pydocs_corpus(cache_dir: Path, stats: ReadStats) -> Corpus:
    build = f"{sys.version.split()[0]}-{sys.platform}-v{_PYDOCS_VERSION}"
    path = cache_dir / "corpora" / f"pydocs-{build}.txt"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        # A fresh isolated interpreter: imports' side effects (readline, printing, signal
        # handlers) stay out of this process, and a local "random.py" cannot shadow the stdlib.
        code = ("import importlib.util as u, sys; s = u.spec_from_file_location('_c', %r); "
                "m = sys.modules['_c'] = u.module_from_spec(s); s.loader.exec_module(m); "
                "m._collect_pydocs(%r)" % (__file__, str(tmp)))
        done = subprocess.run([sys.executable, "-I", "-c", code], timeout=300, text=True,
                              stdin=subprocess.DEVNULL, capture_output=True)
        if done.returncode:
            raise RuntimeError(f"corpus pydocs: collecting docstrings failed:\n{done.stderr[-2000:]}")
        os.replace(tmp, path)
        log.info("corpus pydocs: collected the standard library's docstrings into %s", path)
    return Corpus("pydocs", lambda: _file_documents([path], stats),
                  fingerprint=f"pydocs:{build}", stats=stats)


# ----------------------------------------------------------------------------------- open_corpus
def known_names() -> list[str]:
    return ["pydocs", *DATA_DIR_ONLY, *HUB_CORPORA]


def open_corpus(spec: str, *, data_dir=None, cache_dir=None) -> Corpus:
    """The corpus a string names (see the module docstring). Opening reads nothing yet."""
    stats = ReadStats()
    data_dir = find_data_dir(data_dir)
    parts = [_open_one(s.strip(), data_dir, default_cache_dir(cache_dir), stats)
             for s in _split_spec(spec)]
    return parts[0] if len(parts) == 1 else _concat(parts, stats)


def _split_spec(spec: str) -> list[str]:
    if not spec or not spec.strip():
        raise ValueError("corpus name is empty; use pydocs, a path, or one of " +
                         ", ".join(known_names()))
    if "+" in spec and not Path(spec).exists():  # "a+b", unless a real file has '+' in its name
        return spec.split("+")
    return [spec]


def _open_one(spec: str, data_dir: Path | None, cache_dir: Path, stats: ReadStats) -> Corpus:
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
                + " (set MINIELECTRA_DATA_DIR or pass data_dir)")
        path, config, streaming, fmt = HUB_CORPORA[spec]
        log.info("corpus %s: not in data dir %s; will load it from the Hugging Face hub",
                 spec, data_dir)
        return _hub_corpus(spec, path, config, streaming=streaming, fmt=fmt)
    if spec.startswith("hf:"):
        name, _, config = spec[3:].partition(":")
        return _hub_corpus(spec, name, config or None, streaming=True, fmt="documents")
    paths = _resolve_paths(spec)
    log.info("corpus %s: %d file(s)", spec, len(paths))
    return _files_corpus(spec, paths, stats)
