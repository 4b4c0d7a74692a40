"""Documents and corpora: the stream of text that pre-training reads, and how files become it.

A document is a list of non-empty lines, the input of the official builder
(``build_pretraining_dataset.py``: a blank line ends a document); examples never cross one.
:meth:`Corpus.split` holds out documents by a hash of their text: the same held-out set on every
machine and in every order, and a streamed corpus is never read to its end for it.
"""

from __future__ import annotations

import gzip
import hashlib
import itertools
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

log = logging.getLogger(__name__)

# The held-out part of a streamed corpus comes from this many documents at its start: ~1000
# documents at the default 2%, plenty to evaluate on, and a stream is never read to its end.
STREAMED_HELD_OUT_SCAN = 50_000
WIKITEXT_FILE = re.compile(r"wiki\.(train|valid|test)\.(raw|tokens)(\.gz)?$")
_WIKITEXT_TITLE = re.compile(r"^= [^=].* =$")  # " = Title = " starts an article; " = = h = = " not


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


def not_text(head: bytes) -> str | None:
    """Why a file starting with ``head`` is not UTF-8 text (None: it may be): text never holds
    NUL bytes; UTF-16 and UTF-32 text does, and says so by its byte-order mark or its pattern."""
    if head.startswith((b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff")):
        return "UTF-32 text (its byte-order mark), not UTF-8: save it as UTF-8"
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "UTF-16 text (its byte-order mark), not UTF-8: save it as UTF-8"
    if b"\0" not in head:
        return None
    if not head.strip(b"\0"):
        return f"only NUL bytes ({len(head)} read), no text: a file never written, or wiped"
    for zeros, chars in ((head[1::2], head[0::2]), (head[0::2], head[1::2])):  # LE, BE
        printable = sum(32 <= c < 127 or c in b"\t\n\r" for c in chars)
        if len(head) >= 8 and zeros.count(0) > 0.9 * len(zeros) and printable > 0.9 * len(chars):
            return "UTF-16 text (every other byte is NUL), not UTF-8: save it as UTF-8"
    return f"a binary file, not text (a NUL byte at byte {head.index(0)})"


def _open_binary(path: Path):
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def _read_lines(path: Path, stats: ReadStats) -> Iterator[str]:
    """Stripped lines of one file; a binary file is skipped and undecodable bytes are replaced."""
    stats.files.add(str(path))
    try:
        with _open_binary(path) as f:
            why = not_text(f.read(8192))  # images, archives, .npy, UTF-16 text
        if why is not None:
            raise ValueError(why)
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


def split_documents(lines: Iterable[str], *, wikitext: bool = False) -> Iterator[list[str]]:
    """Official format: a blank line (or the end of the input) ends a document. WikiText: an
    article starts at a ``= Title =`` line; blank lines only separate paragraphs."""
    doc: list[str] = []
    for line in lines:
        if doc and (_WIKITEXT_TITLE.match(line) if wikitext else not line):
            yield doc
            doc = []
        if line:
            doc.append(line.strip("= ") if wikitext and line.startswith("= ") else line)
    if doc:
        yield doc


def file_documents(paths: list[Path], stats: ReadStats) -> Iterator[list[str]]:
    """The documents of every file; when not one file could be read, the reason is an error
    (naming the first file), not an empty corpus."""
    read = 0
    for path in paths:
        wikitext = bool(WIKITEXT_FILE.search(path.name))
        for doc in split_documents(_read_lines(path, stats), wikitext=wikitext):
            read += 1
            yield doc
    skipped = [str(p) for p in paths if str(p) in stats.skipped]
    if not read and skipped and len(skipped) == len(paths):
        more = f" (and the other {len(skipped) - 1} file(s) too)" if len(skipped) > 1 else ""
        raise ValueError(f"corpus {skipped[0]}: {stats.skipped[skipped[0]]}{more}")


# ----------------------------------------------------------------------------------- a corpus
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
        The held-out part looks at the first ``max_scan`` documents only (default: all, or
        ``STREAMED_HELD_OUT_SCAN`` when streamed); the two stay disjoint whatever the cap."""
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


def concat_corpora(parts: list[Corpus], stats: ReadStats) -> Corpus:
    def documents():
        for part in parts:
            yield from part.documents()
    return Corpus("+".join(p.name for p in parts), documents, stats=stats,
                  fingerprint=lambda: "+".join(p.fingerprint for p in parts),
                  streamed=any(p.streamed for p in parts))
