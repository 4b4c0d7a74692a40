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
  from the Hugging Face hub through ``datasets`` (large ones streamed, never loaded whole). A
  WikiText folder with ``wiki.train.raw`` gives that file alone (the hub's train split); without
  it, the files that are there. Which files or hub dataset were used is logged.
- ``hf:<name>[:<config>][:rows=documents|lines|wikitext][:column=NAME][:revision=REV]``: the
  train split of any hub dataset, streamed. ``rows`` says what a row is: a document (the
  default; its newlines separate lines), one line of the official format (a blank row ends a
  document), or one line of a WikiText file. ``column`` picks the text column (default ``text``,
  else the first string column). The hub revision is resolved once and is part of the cache key.
- ``a+b``: the documents of ``a`` then those of ``b`` (the ``mini`` preset: ``pretrain-en+pydocs``).

:meth:`Corpus.split` holds out documents by a hash of their text, so the held-out set is the same on
every machine, in every order, and a document never lands on both sides. A streamed corpus takes
its held-out documents from its first ``STREAMED_HELD_OUT_SCAN`` documents only, so that
evaluating never reads the whole stream (which may not end).
"""

from __future__ import annotations

import glob as globlib
import gzip
import hashlib
import itertools
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


@dataclass(frozen=True)
class HubSpec:
    """A hub dataset's train split and how its rows become documents."""

    path: str
    config: str | None = None
    rows: str = "documents"  # one of HUB_ROWS: what one row of the dataset is
    column: str | None = None  # None: "text" if present, else the first string column
    revision: str | None = None  # None: the newest commit, resolved once per corpus
    streaming: bool = True  # False only for small datasets: downloaded, then memory-mapped


HUB_ROWS = ("documents", "lines", "wikitext")
_HUB_OPTIONS = ("rows", "column", "revision")
HUB_CORPORA = {
    "wikitext-2": HubSpec("wikitext", "wikitext-2-raw-v1", rows="wikitext", streaming=False),
    "wikitext-103": HubSpec("wikitext", "wikitext-103-raw-v1", rows="wikitext"),
    "openwebtext": HubSpec("Skylion007/openwebtext"),
}
# The held-out part of a streamed corpus comes from this many documents at its start: ~1000
# documents at the default 2%, plenty to evaluate on, and a stream is never read to its end.
STREAMED_HELD_OUT_SCAN = 50_000
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
    """A named, re-iterable stream of documents; ``fingerprint`` identifies its content for caches
    (given as a string, or as a function when finding it costs a lookup, e.g. a hub revision)."""

    def __init__(self, name: str, make_documents: Callable[[], Iterator[list[str]]], *,
                 fingerprint: str | Callable[[], str], stats: ReadStats | None = None,
                 streamed: bool = False):
        self.name = name
        self.stats = stats or ReadStats()
        self.streamed = streamed  # True: possibly endless, read only once per pass, never held
        self._fingerprint = fingerprint
        self._make_documents = make_documents

    @property
    def fingerprint(self) -> str:
        if callable(self._fingerprint):
            self._fingerprint = self._fingerprint()  # resolved once
        return self._fingerprint

    def documents(self) -> Iterator[list[str]]:
        return self._make_documents()

    def texts(self) -> Iterator[str]:
        """Every line of every document (what a tokenizer trains on)."""
        for doc in self.documents():
            yield from doc

    def split(self, held_out_fraction: float, *, max_scan: int | None = None
              ) -> tuple["Corpus", "Corpus"]:
        """(train, held-out): a document is held out when the hash of its text < the fraction.

        The held-out part looks at the first ``max_scan`` documents only (default: all of them,
        or ``STREAMED_HELD_OUT_SCAN`` for a streamed corpus); the train part never has a document
        whose hash is below the fraction, so the two stay disjoint whatever the cap.
        """
        if not 0 <= held_out_fraction < 1:
            raise ValueError(f"held_out_fraction must be in [0, 1), got {held_out_fraction}")
        if max_scan is None and self.streamed:
            max_scan = STREAMED_HELD_OUT_SCAN
        if max_scan is not None and max_scan < 1:
            raise ValueError(f"max_scan must be a positive number of documents, got {max_scan}")

        def part(held_out: bool) -> Corpus:
            scan = max_scan if held_out else None

            def documents():
                docs = itertools.islice(self.documents(), scan)
                return (d for d in docs if (_doc_hash(d) < held_out_fraction) == held_out)
            tag = f"{'heldout' if held_out else 'train'}@{held_out_fraction:g}"
            tag += f",first {scan}" if scan is not None else ""
            return Corpus(f"{self.name}[{tag}]", documents, stats=self.stats,
                          fingerprint=lambda: f"{self.fingerprint}[{tag}]",
                          streamed=self.streamed and not held_out)
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
                  fingerprint=lambda: "+".join(p.fingerprint for p in parts),
                  streamed=any(p.streamed for p in parts))


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
                            f"name ({', '.join(known_names())}, hf:<name>[:<config>][:option=value])")


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
                paths = _resolve_paths(str(folder))
            except FileNotFoundError:
                continue
            # WikiText by name means its train split, as on the hub; valid/test are the
            # language-model benchmark's text. shared/data has only those two, so they stand in.
            train = [p for p in paths if _WIKITEXT_FILE.search(p.name) and ".train." in p.name]
            if train:
                return train
            if any(_WIKITEXT_FILE.search(p.name) for p in paths):
                log.info("corpus %s: %s has no wiki.train.raw; using the files it has", name, folder)
            return paths
    return None


# ---------------------------------------------------------------------------------- hub corpora
def parse_hub_spec(spec: str) -> HubSpec:
    """``hf:<name>[:<config>][:rows=...][:column=...][:revision=...]`` -> :class:`HubSpec`."""
    usage = ("expected hf:<name>[:<config>][:rows=documents|lines|wikitext][:column=NAME]"
             "[:revision=REV]")
    names, options = [], {}
    for part in spec.removeprefix("hf:").split(":"):
        key, is_option, value = part.partition("=")
        if not is_option:
            if options or not part:
                raise ValueError(f"corpus {spec!r}: {part!r} is not where a name or config goes; "
                                 f"{usage}")
            names.append(part)
        elif key not in _HUB_OPTIONS:
            raise ValueError(f"corpus {spec!r}: unknown option {key!r} (options: "
                             f"{', '.join(_HUB_OPTIONS)}); {usage}")
        elif not value or key in options:
            raise ValueError(f"corpus {spec!r}: option {key!r} is empty or given twice; {usage}")
        else:
            options[key] = value
    if not 1 <= len(names) <= 2:
        raise ValueError(f"corpus {spec!r}: {len(names)} name parts; {usage}")
    if options.get("rows", "documents") not in HUB_ROWS:
        raise ValueError(f"corpus {spec!r}: rows={options['rows']!r} is not one of "
                         f"{', '.join(HUB_ROWS)}")
    return HubSpec(*names, **options)


def hub_documents(rows: Iterable[dict], name: str, *, rows_are: str = "documents",
                  column: str | None = None) -> Iterator[list[str]]:
    """Documents from the rows of a ``datasets`` dataset (``rows_are``: one of ``HUB_ROWS``)."""
    texts = (_text_of(row, name, column) for row in rows)
    if rows_are == "wikitext":  # rows are the lines of the raw files
        return _wikitext_documents(t.strip() for t in texts)
    if rows_are == "lines":  # the official format, one row per line
        return _official_documents(ln.strip() for t in texts for ln in t.strip().split("\n"))
    docs = ([ln for ln in (s.strip() for s in t.split("\n")) if ln] for t in texts)
    return (d for d in docs if d)


def _text_of(row: dict, name: str, column: str | None) -> str:
    if column is not None:
        if not isinstance(row.get(column), str):
            raise ValueError(f"corpus {name!r}: column {column!r} is "
                             + ("missing" if column not in row else
                                f"{type(row[column]).__name__}, not text")
                             + f" (columns: {sorted(row)})")
        return row[column]
    if isinstance(row.get("text"), str):
        return row["text"]
    for value in row.values():
        if isinstance(value, str):
            return value
    raise ValueError(f"corpus {name!r}: rows have no text column (columns: {sorted(row)}); "
                     "name one with :column=NAME")


def _hub_error(name: str, hub: HubSpec, e: Exception) -> Exception:
    """The error to raise when the hub fails: a missing train split is the user's to fix."""
    if isinstance(e, ValueError) and "split" in str(e).lower() and "train" in str(e):
        return ValueError(f"corpus {name!r}: hub dataset {hub.path!r} (config {hub.config!r}) has "
                          f"no 'train' split ({e}). Pre-training reads the train split and holds "
                          "out documents from it; pick a dataset or config that has one.")
    return RuntimeError(f"corpus {name!r}: could not load {hub.path!r} (config {hub.config!r}) "
                        f"from the Hugging Face hub: {e}. Offline? Point MINIELECTRA_DATA_DIR at a "
                        f"data dir with a {name}/ folder, or use a path or 'pydocs'.")


def _hub_revision(name: str, hub: HubSpec) -> str:
    """The commit the dataset will be read at, so that caches know when the data changed."""
    import datasets  # imported here: it is slow to import and only the hub needs it

    try:
        builder = datasets.load_dataset_builder(hub.path, hub.config, revision=hub.revision)
    except Exception as e:
        raise _hub_error(name, hub, e) from e
    splits = builder.info.splits  # known from the dataset card, when it has them
    if splits and "train" not in splits:
        raise _hub_error(name, hub, ValueError(f"splits: {sorted(splits)}, no train split"))
    return builder.hash or hub.revision or "unknown"  # builder.hash: the hub commit (40 hex)


def _hub_corpus(name: str, hub: HubSpec) -> Corpus:
    revision: list[str] = []  # resolved on first use; reading then pins that commit

    def commit() -> str:
        if not revision:
            revision.append(_hub_revision(name, hub))
        return revision[0]

    def documents():
        import datasets

        # Read at the commit the cache key names (a hub dataset's builder hash is its commit).
        pinned = commit() if re.fullmatch(r"[0-9a-f]{40}", commit()) else hub.revision
        kwargs = {"split": "train", "streaming": hub.streaming, "revision": pinned}
        log.info("corpus %s: datasets.load_dataset(%r, %r, %s)", name, hub.path, hub.config,
                 ", ".join(f"{k}={v!r}" for k, v in kwargs.items()))
        try:
            rows = datasets.load_dataset(hub.path, hub.config, **kwargs)
        except Exception as e:  # offline, unknown name, no train split: say which and what to do
            raise _hub_error(name, hub, e) from e
        return hub_documents(rows, name, rows_are=hub.rows, column=hub.column)
    return Corpus(name, documents, streamed=hub.streaming, fingerprint=lambda: (
        f"hub:{hub.path}:{hub.config}:train:rows={hub.rows}:column={hub.column}@{commit()}"))


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
        log.info("corpus %s: not in data dir %s; will load it from the Hugging Face hub",
                 spec, data_dir)
        return _hub_corpus(spec, HUB_CORPORA[spec])
    if spec.startswith("hf:"):
        return _hub_corpus(spec, parse_hub_spec(spec))
    paths = _resolve_paths(spec)
    log.info("corpus %s: %d file(s)", spec, len(paths))
    return _files_corpus(spec, paths, stats)
