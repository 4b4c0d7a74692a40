"""Corpora: file formats, path kinds, data dir and hub lookup, held-out split, pydocs, bad input."""

import gzip
import logging
import math
import random
import subprocess

import pytest

from minielectra import corpus as corpus_module
from minielectra.corpus import open_corpus

OFFICIAL = "First sentence.\nSecond sentence.\n\nDoc two.\n  \n\n\nDoc three, line one.\nline two\n"
DOCS = [["First sentence.", "Second sentence."], ["Doc two."], ["Doc three, line one.", "line two"]]


def write(path, text: str):
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".gz":
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def pydocs_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("pydocs-cache")


# -------------------------------------------------------------------------------- formats
def test_official_format_blank_lines_end_documents(tmp_path):
    corpus = open_corpus(str(write(tmp_path / "a.txt", OFFICIAL)))
    assert list(corpus.documents()) == DOCS
    assert list(corpus.texts()) == [line for doc in DOCS for line in doc]
    crlf = write(tmp_path / "crlf.txt", OFFICIAL.replace("\n", "\r\n"))
    assert list(open_corpus(str(crlf)).documents()) == DOCS


@pytest.mark.parametrize("block", [1, 7, 1 << 20])
def test_block_reading_equals_reading_line_by_line(tmp_path, monkeypatch, block):
    """Reference: Python's own line iteration + the official blank-line rule, written out."""
    rng = random.Random(block)
    words = ["word", "naïve", "東京", "€uro", "", "  ", "\t"]
    text = "\n".join(" ".join(rng.choices(words, k=rng.randint(0, 5))) for _ in range(500))
    path = write(tmp_path / "t.txt.gz", text)  # no final newline
    docs, doc = [], []
    for line in gzip.open(path, "rt", encoding="utf-8"):
        if line.strip():
            doc.append(line.strip())
        elif doc:
            docs, doc = docs + [doc], []
    docs += [doc] if doc else []
    original = corpus_module._line_blocks
    monkeypatch.setattr(corpus_module, "_line_blocks", lambda f: original(f, size=block))
    assert list(open_corpus(str(path)).documents()) == docs


def test_file_dir_glob_and_gzip_give_the_same_documents(tmp_path):
    write(tmp_path / "d" / "1.txt", "one.\n\ntwo.\n")
    write(tmp_path / "d" / "sub" / "2.txt.gz", "three.\nfour.\n")
    write(tmp_path / "d" / "notes.md", "not a corpus file\n")
    expected = [["one."], ["two."], ["three.", "four."]]
    assert list(open_corpus(str(tmp_path / "d")).documents()) == expected
    assert list(open_corpus(str(tmp_path / "d" / "**" / "*.txt*")).documents()) == expected
    assert list(open_corpus(str(tmp_path / "d" / "sub" / "2.txt.gz")).documents()) == expected[2:]


def test_wikitext_files_split_at_article_titles(tmp_path):
    raw = (" \n = Alpha = \n \n Alpha is a letter . \n \n = = History = = \n \n It is old . \n"
           " \n = Beta = \n \n Beta follows . \n")
    path = write(tmp_path / "wiki.valid.raw.gz", raw)
    assert list(open_corpus(str(path)).documents()) == [
        ["Alpha", "Alpha is a letter .", "History", "It is old ."], ["Beta", "Beta follows ."]]


def test_plus_concatenates_corpora(tmp_path):
    a = write(tmp_path / "a.txt", "a1\n\na2\n")
    b = write(tmp_path / "b.txt", "b1\n")
    both = open_corpus(f"{a}+{b}")
    assert list(both.documents()) == [["a1"], ["a2"], ["b1"]]
    assert both.name == f"{a}+{b}"


# ------------------------------------------------------------------------------ bad input
def test_missing_paths_and_unknown_names_name_the_culprit(tmp_path):
    with pytest.raises(FileNotFoundError, match="no-such.txt"):
        open_corpus(str(tmp_path / "no-such.txt"))
    with pytest.raises(FileNotFoundError, match="pydocs.*pretrain-en.*hf:<name>"):
        open_corpus("wikitext2")  # typo of a known name
    with pytest.raises(FileNotFoundError, match="glob matches no files"):
        open_corpus(str(tmp_path / "*.txt"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no .txt or .txt.gz"):
        open_corpus(str(tmp_path / "empty"))
    with pytest.raises(ValueError, match="empty"):
        open_corpus(" ")


def test_binary_file_is_skipped_and_reported(tmp_path, caplog):
    write(tmp_path / "d" / "good.txt", "fine text.\n")
    (tmp_path / "d" / "image.txt").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" * 20)
    (tmp_path / "d" / "broken.txt.gz").write_bytes(b"not gzip at all")
    corpus = open_corpus(str(tmp_path / "d"))
    with caplog.at_level(logging.WARNING, logger="minielectra"):
        assert list(corpus.documents()) == [["fine text."]]
    report = corpus.stats.as_dict()
    assert report["files"] == 3 and sorted(report["skipped_files"]) == [
        str(tmp_path / "d" / "broken.txt.gz"), str(tmp_path / "d" / "image.txt")]
    assert "image.txt" in caplog.text and "broken.txt.gz" in caplog.text


def test_truncated_gzip_keeps_the_readable_part(tmp_path):
    lines = [f"sentence {i} of a long file." for i in range(20000)]
    data = gzip.compress("\n".join(lines).encode())
    (tmp_path / "cut.txt.gz").write_bytes(data[:len(data) // 2])
    corpus = open_corpus(str(tmp_path / "cut.txt.gz"))
    docs = list(corpus.documents())
    assert len(docs) == 1 and 1000 < len(docs[0]) < 20000 and docs[0] == lines[:len(docs[0])]
    assert "unreadable after line" in corpus.stats.skipped[str(tmp_path / "cut.txt.gz")]


def test_undecodable_bytes_are_replaced_and_counted(tmp_path, caplog):
    path = tmp_path / "latin1.txt"
    path.write_bytes("café crème\n\nnaïve \ufffd kept\n".encode("latin-1", errors="replace")
                     .replace(b"?", "\ufffd".encode()))
    corpus = open_corpus(str(path))
    with caplog.at_level(logging.WARNING, logger="minielectra"):
        docs = list(corpus.documents())
    assert docs == [["caf\ufffd cr\ufffdme"], ["na\ufffdve \ufffd kept"]]
    assert corpus.stats.as_dict()["replaced_sequences"] == 3  # the genuine U+FFFD is not counted
    assert "latin1.txt" in caplog.text and "replaced 3" in caplog.text


# ----------------------------------------------------------------------------- held-out split
def test_split_is_deterministic_disjoint_and_order_free(tmp_path):
    docs = [f"document number {i}." for i in range(3000)]
    a = write(tmp_path / "a.txt", "\n\n".join(docs) + "\n")
    shuffled = docs[:]
    random.Random(0).shuffle(shuffled)
    b = write(tmp_path / "b.txt", "\n\n".join(shuffled) + "\n")
    train, heldout = open_corpus(str(a)).split(0.1)
    held = [d[0] for d in heldout.documents()]
    kept = [d[0] for d in train.documents()]
    assert sorted(held + kept) == sorted(docs) and not set(held) & set(kept)
    # binomial(3000, 0.1): mean 300, sd 16.4; 5 sd either side
    assert abs(len(held) - 300) < 5 * math.sqrt(3000 * 0.1 * 0.9)
    assert {d[0] for d in open_corpus(str(b)).split(0.1)[1].documents()} == set(held)
    assert heldout.fingerprint != train.fingerprint and "heldout" in heldout.name
    with pytest.raises(ValueError, match="held_out_fraction"):
        open_corpus(str(a)).split(1.5)


# ---------------------------------------------------------------------------- data dir and hub
def test_data_dir_answers_names_before_the_hub(tmp_path, monkeypatch, caplog):
    write(tmp_path / "data" / "pretrain-en" / "x.txt.gz", OFFICIAL)
    write(tmp_path / "data" / "wikitext-2-raw" / "wiki.valid.raw.gz", " = T = \n text . \n")
    monkeypatch.setenv("MINIELECTRA_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setattr(corpus_module, "_hub_corpus", lambda *a, **k: pytest.fail("hub used"))
    with caplog.at_level(logging.INFO, logger="minielectra"):
        assert list(open_corpus("pretrain-en").documents()) == DOCS
        assert list(open_corpus("wikitext-2").documents()) == [["T", "text ."]]
    assert "data dir" in caplog.text and "x.txt.gz" in caplog.text


def test_pretrain_en_without_data_dir_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.delenv("MINIELECTRA_DATA_DIR", raising=False)
    with pytest.raises(FileNotFoundError, match="MINIELECTRA_DATA_DIR"):
        open_corpus("pretrain-en")
    with pytest.raises(FileNotFoundError, match="no pretrain-en/ folder"):
        open_corpus("pretrain-en", data_dir=tmp_path)


@pytest.mark.parametrize("name, args", [
    ("wikitext-2", ("wikitext", "wikitext-2-raw-v1", False)),
    ("wikitext-103", ("wikitext", "wikitext-103-raw-v1", True)),
    ("openwebtext", ("Skylion007/openwebtext", None, True)),
    ("hf:someone/books:en", ("someone/books", "en", True)),
])
def test_hub_is_tried_with_the_right_arguments(name, args, tmp_path, monkeypatch, caplog):
    """No download: load_dataset is replaced by a recorder, then fails as it would offline."""
    datasets = pytest.importorskip("datasets")
    calls = []

    def offline(path, config=None, **kwargs):
        calls.append((path, config, kwargs))
        raise ConnectionError("hub unreachable")
    monkeypatch.setattr(datasets, "load_dataset", offline)
    corpus = open_corpus(name, data_dir=tmp_path)  # an empty data dir: not found locally
    with pytest.raises(RuntimeError, match=f"{name}.*hub unreachable.*MINIELECTRA_DATA_DIR"):
        with caplog.at_level(logging.INFO, logger="minielectra"):
            next(corpus.documents())
    path, config, streaming = args
    assert calls == [(path, config, {"split": "train", "streaming": streaming})]
    assert "load_dataset" in caplog.text


def test_hub_rows_become_documents(monkeypatch, tmp_path):
    datasets = pytest.importorskip("datasets")
    rows = {"wikitext": [{"text": " = A = \n"}, {"text": " a1 . \n"}, {"text": ""},
                         {"text": " = B = \n"}, {"text": " b1 . \n"}],
            "someone/owt": [{"id": 1, "text": "para one.\n\npara two.\n"}, {"text": " \n"}]}
    monkeypatch.setattr(datasets, "load_dataset", lambda path, config, **kw: iter(rows[path]))
    assert list(open_corpus("wikitext-103", data_dir=tmp_path).documents()) == [
        ["A", "a1 ."], ["B", "b1 ."]]
    assert list(open_corpus("hf:someone/owt").documents()) == [["para one.", "para two."]]


# ------------------------------------------------------------------------------------ pydocs
def test_pydocs_is_real_english_deterministic_and_cached(pydocs_cache, tmp_path, monkeypatch):
    corpus = open_corpus("pydocs", cache_dir=pydocs_cache)
    docs = list(corpus.documents())
    words = sum(len(line.split()) for doc in docs for line in doc)
    assert len(docs) > 150 and 100_000 < words < 1_000_000
    assert any("Return" in line for line in docs[0] + docs[1] + docs[2])
    assert not any(line.startswith(">>>") for doc in docs for line in doc)  # prose only
    again = open_corpus("pydocs", cache_dir=tmp_path / "other")  # a second, independent collection
    assert list(again.documents()) == docs
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("not cached"))
    assert list(open_corpus("pydocs", cache_dir=pydocs_cache).documents())[:3] == docs[:3]
