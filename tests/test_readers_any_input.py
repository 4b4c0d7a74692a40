"""Every reader of a user's input takes any bytes of any size and ends in a result or in one
clear error that names where the input came from, never in a traceback.

The readers: fine-tuning's tables (``--train``/``--dev``: CSV, TSV, JSONL, each optionally
gzipped), ``predict --file`` (those tables, or plain lines), and ``predict -`` (standard input).
Hypothesis draws the inputs: arbitrary bytes; text in UTF-8, UTF-8 with a BOM, UTF-16 and
Latin-1 built from the characters that matter to a parser (delimiters, quotes, brackets, line
ends, NUL, non-ASCII); and a field long enough to pass the csv module's default limit. The draws
are derandomized, so a run is repeatable; a failure prints the smallest input that fails.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis", reason="the tests' extra (hypothesis) is missing")
from hypothesis import HealthCheck, example, given, settings, strategies as st  # noqa: E402

from minielectra.finetune.owndata.data import Columns, task_from_files  # noqa: E402
from minielectra.finetune.tables import read_rows  # noqa: E402
from minielectra.finetune.inputs import parse_lines, read_inputs  # noqa: E402

SETTINGS = settings(max_examples=150, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])
# What a user's file can hold that a parser cares about.
PARSER_CHARS = st.sampled_from([",", "\t", '"', "'", "\n", "\r", "\r\n", "\x00", "{", "}", "[",
                                "]", ":", "\\", " ", "text", "label", "sentence", "0", "1",
                                "-1.5", "é", "字", "\u2028", "\ufeff", "true", "null"])
TEXT = st.lists(PARSER_CHARS, max_size=60).map("".join) | st.text(max_size=200)
ENCODINGS = st.sampled_from(["utf-8", "utf-8-sig", "utf-16", "latin-1"])


@st.composite
def contents(draw) -> bytes:
    """A file's bytes: random bytes, or drawn text in an encoding, sometimes with a long field."""
    if draw(st.booleans()):
        return draw(st.binary(max_size=400))
    text = draw(TEXT)
    if draw(st.integers(0, 9)) == 0:  # a field longer than the csv module's 131,072 limit
        text = "text,label\n" + "a" * 140_000 + ",1\n" + text
    return text.encode(draw(ENCODINGS), errors="replace")


SUFFIXES = [".csv", ".tsv", ".jsonl", ".txt", ".csv.gz", ".jsonl.gz"]


def write(folder: Path, name: str, data: bytes, gz_ok: bool = True) -> Path:
    path = folder / name
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") and gz_ok else data)
    return path


def ends_well(call, where: str):
    """``call()``'s result, or its error when that is one a user reads: a ValueError or OSError
    (the command line prints either as one line) whose message names ``where``."""
    try:
        return call()
    except (ValueError, OSError) as e:
        message = str(e) if not isinstance(e, OSError) or e.filename is None else \
            f"{e.filename}: {e.strerror}"
        assert where in message, f"the error does not name {where}: {message!r}"
        assert "\n" not in message.strip(), f"more than one line: {message!r}"
        return None


@SETTINGS
@given(data=contents(), suffix=st.sampled_from(SUFFIXES), gz_ok=st.booleans())
@example(data=b'{"text": ' + b"[" * 100_000 + b"}\n", suffix=".jsonl", gz_ok=True)
@example(data=b"text,label\n\"unclosed,1\n", suffix=".csv", gz_ok=True)
@example(data=b"\x1f\x8b\x08\x00truncated", suffix=".csv.gz", gz_ok=False)
def test_a_finetuning_table_reads_or_is_refused_naming_the_file(tmp_path_factory, data, suffix,
                                                                gz_ok):
    path = write(tmp_path_factory.mktemp("t"), "train" + suffix, data, gz_ok)
    rows = ends_well(lambda: read_rows(path), str(path))
    if rows is not None:
        assert rows and all(isinstance(fields, dict) for _, fields in rows)
        ends_well(lambda: task_from_files(path, path, columns=Columns()), str(path))


@SETTINGS
@given(data=contents(), suffix=st.sampled_from(SUFFIXES), pair=st.booleans())
def test_predict_file_reads_or_is_refused_naming_the_file(tmp_path_factory, data, suffix, pair):
    path = write(tmp_path_factory.mktemp("p"), "inputs" + suffix, data)
    got = ends_well(lambda: read_inputs(path, inputs=("sentence",), pair=pair), str(path))
    if got is not None:
        assert got and all(isinstance(a, str) and (b is None or isinstance(b, str))
                           for a, b in got)


@SETTINGS
@given(text=TEXT | st.binary(max_size=300).map(lambda b: b.decode("utf-8", "replace")))
def test_standard_input_reads_or_is_refused_naming_it(text):
    got = ends_well(lambda: parse_lines(text, "standard input"), "standard input")
    if got is not None:
        assert got and all(isinstance(a, str) for a, _ in got)
