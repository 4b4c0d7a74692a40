"""Corpora: file formats, path kinds, data dir and hub lookup, held-out split, pydocs, bad input."""

import gzip
import itertools
import json
import logging
import math
import random
import re
import subprocess
import types

import pytest

from minielectra.data import documents as data_documents
from minielectra.data import hub as data_hub
from minielectra.data.corpus import open_corpus
from minielectra.data.documents import Corpus
from minielectra.data.hub import HubSpec, hub_documents, parse_hub_spec

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
    original = data_documents._line_blocks
    monkeypatch.setattr(data_documents, "_line_blocks", lambda f: original(f, size=block))
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
    monkeypatch.setattr(data_hub, "hub_corpus", lambda *a, **k: pytest.fail("hub used"))
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


def test_wikitext_data_dir_uses_the_train_file_when_it_is_there(tmp_path, caplog):
    """The hub's wikitext-2 is its train split; a data dir with wiki.train.raw answers the same."""
    folder = tmp_path / "data" / "wikitext-2-raw"
    write(folder / "wiki.valid.raw.gz", " = V = \n valid . \n")
    write(folder / "wiki.test.raw.gz", " = T = \n test . \n")
    with caplog.at_level(logging.INFO, logger="minielectra"):
        assert list(open_corpus("wikitext-2", data_dir=tmp_path / "data").documents()) == [
            ["T", "test ."], ["V", "valid ."]]  # no train file (as in shared/data): what is there
    assert "no wiki.train.raw" in caplog.text
    write(folder / "wiki.train.raw", " = A = \n train . \n")
    assert list(open_corpus("wikitext-2", data_dir=tmp_path / "data").documents()) == [
        ["A", "train ."]]
    # a path names files, not a corpus: all of them
    assert len(list(open_corpus(str(folder)).documents())) == 3


# -------------------------------------------------------------------------------- hub specs
@pytest.mark.parametrize("spec, expected", [
    ("hf:someone/books", HubSpec("someone/books")),
    ("hf:someone/books:en", HubSpec("someone/books", "en")),
    ("hf:wikitext:wikitext-103-raw-v1:rows=wikitext",
     HubSpec("wikitext", "wikitext-103-raw-v1", rows="wikitext")),
    ("hf:someone/books:rows=lines:column=body:revision=abc",
     HubSpec("someone/books", rows="lines", column="body", revision="abc")),
])
def test_hub_specs_are_parsed(spec, expected):
    assert parse_hub_spec(spec) == expected


@pytest.mark.parametrize("spec, message", [
    ("hf:", "''"),
    ("hf:a:b:c", "3 name parts"),
    ("hf:a:rows=paragraphs", "rows='paragraphs' is not one of documents, lines, wikitext"),
    ("hf:a:colum=text", "unknown option 'colum'"),
    ("hf:a:column=", "'column' is empty"),
    ("hf:a:rows=lines:rows=lines", "'rows' is empty or given twice"),
    ("hf:a:rows=lines:en", "'en' is not where a name or config goes"),
])
def test_bad_hub_specs_name_the_part(spec, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        open_corpus(spec)


@pytest.fixture
def local_hub(monkeypatch, tmp_path):
    """The hub answered by files: load_dataset / load_dataset_builder forward to the real
    ``json`` loader of ``datasets`` over local files (no network, no download), so the hub code
    meets real ``datasets`` objects and errors. ``files``: hub path -> {split: file}."""
    datasets = pytest.importorskip("datasets")
    real_load, real_builder = datasets.load_dataset, datasets.load_dataset_builder
    files, calls, cache = {}, [], str(tmp_path / "hf-cache")

    def load_dataset(path, config=None, **kwargs):
        calls.append((path, config, kwargs))
        kwargs.pop("revision")
        return real_load("json", data_files=files[path], cache_dir=cache, **kwargs)

    def load_dataset_builder(path, config=None, *, revision=None):
        return real_builder("json", data_files=files[path], cache_dir=cache)
    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    monkeypatch.setattr(datasets, "load_dataset_builder", load_dataset_builder)
    return files, calls


def jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


DOC_ROWS = [{"title": "Title 1", "text": "para one.\n\npara two.\n"}, {"title": "", "text": " \n"},
            {"title": "Title 3", "text": "p3"}]
LINE_ROWS = [{"text": "s1"}, {"text": " s2 \n"}, {"text": ""}, {"text": ""}, {"text": "s3\ns4"}]


@pytest.mark.parametrize("spec, rows, expected", [
    ("hf:site/docs", DOC_ROWS, [["para one.", "para two."], ["p3"]]),
    ("hf:site/docs:column=title", DOC_ROWS, [["Title 1"], ["Title 3"]]),
    ("hf:site/docs:rows=lines", LINE_ROWS, [["s1", "s2"], ["s3", "s4"]]),
    ("hf:site/docs:rows=documents", LINE_ROWS, [["s1"], ["s2"], ["s3", "s4"]]),
])
def test_hub_rows_become_documents(local_hub, tmp_path, spec, rows, expected):
    files, calls = local_hub
    files["site/docs"] = {"train": jsonl(tmp_path / "d.jsonl", rows)}
    corpus = open_corpus(spec)
    assert corpus.streamed and list(corpus.documents()) == expected
    assert [(p, c, k["split"], k["streaming"]) for p, c, k in calls] == [
        ("site/docs", None, "train", True)]


def test_hub_wikitext_rows_and_named_corpora(local_hub, tmp_path):
    files, calls = local_hub
    rows = [{"text": " = A = \n"}, {"text": " a1 . \n"}, {"text": ""}, {"text": " = B = \n"},
            {"text": " b1 . \n"}]
    files["wikitext"] = {"train": jsonl(tmp_path / "w.jsonl", rows)}
    for name in ("wikitext-2", "wikitext-103"):
        assert list(open_corpus(name, data_dir=tmp_path).documents()) == [["A", "a1 ."], ["B", "b1 ."]]
    assert [(c, k["streaming"]) for _, c, k in calls] == [
        ("wikitext-2-raw-v1", False), ("wikitext-103-raw-v1", True)]
    # the same rows as a local datasets object, in memory and streamed
    datasets = pytest.importorskip("datasets")
    table = datasets.Dataset.from_list(rows)
    for rows_of in (table, table.to_iterable_dataset()):
        assert list(hub_documents(rows_of, "w", rows_are="wikitext")) == [["A", "a1 ."], ["B", "b1 ."]]


def test_hub_column_errors_name_the_column(local_hub, tmp_path):
    files, _ = local_hub
    files["site/docs"] = {"train": jsonl(tmp_path / "d.jsonl", [{"id": 1, "body": "x"}])}
    with pytest.raises(ValueError, match=r"column 'text' is missing \(columns: \['body', 'id'\]\)"):
        list(open_corpus("hf:site/docs:column=text").documents())
    with pytest.raises(ValueError, match="column 'id' is int, not text"):
        list(open_corpus("hf:site/docs:column=id").documents())
    files["site/nums"] = {"train": jsonl(tmp_path / "n.jsonl", [{"id": 1}])}
    with pytest.raises(ValueError, match="no text column.*:column=NAME"):
        list(open_corpus("hf:site/nums").documents())


@pytest.mark.parametrize("spec", ["hf:site/eval-only", "wikitext-2"])
def test_hub_dataset_without_a_train_split_is_its_own_error(local_hub, tmp_path, spec):
    """The real `datasets` error for a missing split (streamed and not) becomes a clear one."""
    files, _ = local_hub
    only_test = {"test": jsonl(tmp_path / "t.jsonl", [{"text": "x"}])}
    files["site/eval-only"] = files["wikitext"] = only_test
    with pytest.raises(ValueError, match=r"has no 'train' split .*test"):
        list(open_corpus(spec, data_dir=tmp_path).documents())


def test_hub_revision_is_resolved_once_pinned_and_in_the_fingerprint(monkeypatch):
    datasets = pytest.importorskip("datasets")
    commits, loads = ["a" * 40, "b" * 40], []

    class Builder:  # what load_dataset_builder returns for a hub dataset: hash = its commit
        def __init__(self):
            self.hash, self.info = commits[0], types.SimpleNamespace(splits=None)
    monkeypatch.setattr(datasets, "load_dataset_builder", lambda *a, **k: Builder())
    monkeypatch.setattr(datasets, "load_dataset",
                        lambda *a, **k: loads.append(k["revision"]) or iter([{"text": "t"}]))
    corpus = open_corpus("hf:someone/books")
    first = corpus.fingerprint
    assert first.endswith("@" + "a" * 40) and "rows=documents" in first
    commits.pop(0)  # the hub moves on: an opened corpus keeps its commit, a new one sees it
    assert list(corpus.documents()) == [["t"]] and loads == ["a" * 40]
    assert open_corpus("hf:someone/books").fingerprint.endswith("@" + "b" * 40)
    assert open_corpus("hf:someone/books:rows=lines").fingerprint != first


@pytest.mark.parametrize("probe", [None, "no connection to huggingface.co:443: test"])
def test_hub_unreachable_is_a_clear_error(monkeypatch, tmp_path, probe):
    """No download: the builder lookup fails as it does offline. The probe (a TCP connect, once
    per process) either found the hub, and the error is the loader's, or did not, and the error
    says so up front."""
    datasets = pytest.importorskip("datasets")
    from minielectra.data import hub

    def offline(path, config=None, **kwargs):
        raise ConnectionError("hub unreachable")
    monkeypatch.setattr(hub, "_PROBED", [probe])
    monkeypatch.setattr(datasets, "load_dataset_builder", offline)
    monkeypatch.setattr(datasets, "load_dataset", offline)
    why = "hub unreachable" if probe is None else r"hub is unreachable \(no connection"
    for name in ("wikitext-103", "hf:someone/books:en"):
        corpus = open_corpus(name, data_dir=tmp_path)  # opening reads nothing
        with pytest.raises(RuntimeError, match=f"{name}.*{why}.*MINIELECTRA_DATA_DIR"):
            corpus.fingerprint


# ------------------------------------------------------------------- streamed corpora, capped
STREAMED_CAP = 20_000


def endless_corpus(counter):
    """A streamed corpus that never ends; ``counter[0]`` counts the documents read from it."""
    def documents():
        for i in itertools.count():
            counter[0] += 1
            if counter[0] > 10 * STREAMED_CAP:  # fail, instead of hanging, if nothing caps it
                raise AssertionError("the whole stream is being read")
            yield [f"sentence {i} of an endless stream.", f"and its second line {i}."]
    return Corpus("endless", documents, fingerprint="endless", streamed=True)


def test_held_out_part_of_a_streamed_corpus_is_capped(monkeypatch, tmp_path):
    monkeypatch.setattr(data_documents, "STREAMED_HELD_OUT_SCAN", STREAMED_CAP)
    read = [0]
    train, heldout = endless_corpus(read).split(0.05)
    held = list(heldout.documents())  # ends, although the stream does not
    assert read[0] == 20_000
    # binomial(20000, 0.05): mean 1000, sd 30.8; 5 sd either side
    assert abs(len(held) - 1000) < 5 * math.sqrt(20_000 * 0.05 * 0.95)
    assert "first 20000" in heldout.fingerprint and heldout.fingerprint != train.fingerprint
    # the train part reads on, and never has a held-out document
    held_set = {d[0] for d in held}
    first_train = list(itertools.islice(train.documents(), 25_000))
    assert not held_set & {d[0] for d in first_train} and train.streamed
    # a corpus of files is not streamed: its held-out part is not capped
    files = open_corpus(str(write(tmp_path / "a.txt", "\n\n".join(map(str, range(30_000))))))
    assert not files.streamed and "first" not in files.split(0.05)[1].fingerprint
    assert len(list(files.split(0.05)[1].documents())) > 1300  # 1500 expected, sd 38


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
