"""A user's table files, read whole: CSV and TSV with a header, JSONL, each optionally gzipped.

What fine-tuning on your own data (:mod:`minielectra.finetune.owndata.data`) and ``predict
--file`` (:mod:`minielectra.finetune.inputs`) both read. Any bytes of any size end in rows or in
one ``ValueError`` naming the file and the line (``tests/test_readers_any_input.py``).
"""

from __future__ import annotations

import csv
import errno
import io
import json
import sys
from pathlib import Path
from typing import Any

from .task import read_text

Row = tuple[str, dict[str, Any]]  # (where: "FILE: line N", the row's fields)


def file_kind(path: Path) -> str:
    """The extension that names the format, ``.gz`` looked through: ``.csv`` for a.csv.gz."""
    suffixes = [s.lower() for s in path.suffixes] or [""]
    return suffixes[-2] if suffixes[-1] == ".gz" and len(suffixes) > 1 else suffixes[-1]


def read_rows(path: str | Path) -> list[Row]:
    """The data rows of a CSV/TSV (with a header) or JSONL file, each with where it is."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, "a folder, not a file: give the data file itself "
                                "(.csv, .tsv or .jsonl)", str(path))
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    kind = file_kind(path)
    if kind not in (".csv", ".tsv", ".jsonl"):
        raise ValueError(f"{path}: unknown format {kind or '(no extension)'!r}; name the file "
                         "*.csv, *.tsv or *.jsonl (optionally .gz)")
    text = read_text(path)
    if not text.strip():
        raise ValueError(f"{path}: the file is empty")
    rows = _jsonl_rows(path, text) if kind == ".jsonl" else _table_rows(path, text, kind)
    if not rows:
        raise ValueError(f"{path}: a header but no data rows")
    return rows


def table_reader(text: str, *, delimiter: str, quoting: int):
    """``csv.reader`` over ``text`` without a cap on a field's length: a long text is still a
    text (the model reads its first max_seq_len tokens), where the csv module's default refuses
    fields over 131,072 characters."""
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    return csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, quoting=quoting)


def _table_rows(path: Path, text: str, kind: str) -> list[Row]:
    # TSV is read as GLUE's files are (no quoting: a quote is text); CSV with its usual quoting.
    quoting = csv.QUOTE_NONE if kind == ".tsv" else csv.QUOTE_MINIMAL
    reader = table_reader(text, delimiter="\t" if kind == ".tsv" else ",", quoting=quoting)
    try:
        return _parse_table(path, reader)
    except csv.Error as e:
        raise ValueError(f"{path}: line {reader.line_num}: not {kind[1:].upper()} ({e})") from None


def _parse_table(path: Path, reader) -> list[Row]:
    header = [h.strip() for h in next(reader)]
    twice = next((h for h in header if header.count(h) > 1), None)
    if twice is not None:  # one of the two would be read, silently
        raise ValueError(f"{path}: line {reader.line_num}: the header names column {twice!r} "
                         "twice; rename one of them")
    rows = []
    for fields in reader:
        if not any(f.strip() for f in fields):
            continue  # blank lines
        where = f"{path}: line {reader.line_num}"
        if len(fields) != len(header):
            raise ValueError(f"{where}: {len(fields)} fields, but the header has {len(header)} "
                             f"({', '.join(header)})")
        rows.append((where, dict(zip(header, fields))))
    return rows


def _one_each(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    twice = next((k for k in keys if keys.count(k) > 1), None)
    if twice is not None:
        raise KeyError(twice)
    return dict(pairs)


def _jsonl_rows(path: Path, text: str) -> list[Row]:
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line, object_pairs_hook=_one_each)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: line {n}, column {e.colno}: not JSON ({e.msg})") from None
        except KeyError as e:
            raise ValueError(f"{path}: line {n}: the object names {e.args[0]!r} twice; one of "
                             "the two would be read, silently") from None
        except RecursionError:  # Python's parser gives up on deep nesting: not a record
            raise ValueError(f"{path}: line {n}: JSON nested too deeply to be a record") from None
        if not isinstance(record, dict):
            raise ValueError(f"{path}: line {n}: a JSON {type(record).__name__}, not an object "
                             "with text and label fields")
        rows.append((f"{path}: line {n}", record))
    return rows
