"""The inputs of ``minielectra predict --file F``: a table with a text column, or plain lines.

- ``.csv``, ``.jsonl`` (each optionally ``.gz``): read as fine-tuning reads them
  (:func:`.tables.read_rows`); the text is ``text_column``, the model's own input field (SST-2's
  ``sentence``) or ``text``; a pair task's second text likewise. Other columns are ignored.
- ``.tsv``: a table too when its first line names the text column; otherwise lines.
- Anything else (``.txt``...): one input a line, ``A`` or ``A<TAB>B`` (:func:`read_lines`).
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Sequence

from .tables import Row, file_kind, read_rows, table_reader
from .task import read_text

Pair = tuple[str, "str | None"]
TABLES = (".csv", ".tsv", ".jsonl")


def read_lines(path: str | Path) -> list[Pair]:
    """One input a line: sentence A, or A, a tab, and B. Read with ``QUOTE_NONE``, as the GLUE
    files are (a stray quote is text, not a field delimiter); blank lines skipped. A file with no
    input, or a line with more than two fields, is refused naming the file (and the lines)."""
    return parse_lines(read_text(path), path)  # read_text refuses binary and non-UTF-8 files


def parse_lines(text: str, path: str | Path = "<stdin>") -> list[Pair]:
    """:func:`read_lines` of text already read (standard input); ``path`` names it in errors."""
    reader = table_reader(text, delimiter="\t", quoting=csv.QUOTE_NONE)
    try:
        rows = [(reader.line_num, r) for r in reader if any(r)]
    except csv.Error as e:  # e.g. a NUL byte
        raise ValueError(f"{path}: line {reader.line_num + 1}: not text lines ({e})") from None
    bad = [line for line, r in rows if len(r) > 2]
    if bad:
        raise ValueError(f"{path}: line(s) {bad[:5]} have more than two tab-separated fields")
    if not rows:
        raise ValueError(f"{path}: no input in the file (one sentence, or A<TAB>B, a line)")
    return [(r[0], r[1] if len(r) == 2 else None) for _, r in rows]


def _pick(given: str | None, candidates: Sequence[str], header: Sequence[str]) -> str | None:
    if given is not None:
        return given
    return next((c for c in candidates if c in header), None)


def _text(row: Row, column: str) -> str:
    where, fields = row
    value = fields[column]
    if value is None or isinstance(value, (dict, list)):
        raise ValueError(f"{where}, column {column!r}: the text is "
                         f"{'null' if value is None else 'a JSON ' + type(value).__name__}, "
                         "not a string")
    return str(value)


def read_inputs(path: str | Path, *, inputs: Sequence[str] = (), pair: bool = False,
                text_column: str | None = None,
                text_pair_column: str | None = None) -> list[Pair]:
    """The inputs in ``path`` (see the module doc). ``inputs``: the model's own field names;
    ``pair``: whether it scores pairs (then the second column is needed too)."""
    path = Path(path)
    kind = file_kind(path)
    if kind not in TABLES:
        return read_lines(path)
    texts = [text_column] if text_column else [*inputs[:1], "text"]
    if kind == ".tsv" and not _names_a_column(path, texts):
        return read_lines(path)  # a .tsv of plain lines (A, or A<TAB>B) with no header
    rows = read_rows(path)
    header = list(rows[0][1])
    a = _pick(text_column, texts, header)
    b = _pick(text_pair_column, [*inputs[1:2], "text_pair"], header) if pair else None
    if a is None or a not in header:
        raise _missing(path, "text", [a] if a else texts, header, "--text-column")
    if pair and (b is None or b not in header):
        raise _missing(path, "second text", [b] if b else [*inputs[1:2], "text_pair"], header,
                       "--text-pair-column")
    return [(_text(r, a), _text(r, b) if b else None) for r in rows]


def _missing(path: Path, role: str, wanted: Sequence[str], header: Sequence[str],
             flag: str) -> ValueError:
    return ValueError(f"{path}: no {role} column ({' or '.join(map(repr, wanted))}; its "
                      f"columns: {', '.join(map(str, header))}); name yours with {flag}, or give "
                      "a .txt file with one input a line")


def _names_a_column(path: Path, columns: Sequence[str]) -> bool:
    first = read_text(path).split("\n", 1)[0]
    return any(c in [h.strip() for h in first.split("\t")] for c in columns)
