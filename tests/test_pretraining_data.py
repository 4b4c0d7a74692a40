"""The example builder against the official code and its rules; caching; batches; bad input."""

import functools
import gzip
import itertools
import json
import logging
import math
import random
import signal
import tracemalloc
import types

import numpy as np
import pytest
import torch

from minielectra.data import dataset as data_dataset
from minielectra.data import documents as data_documents
from minielectra.data import examples as data_examples
from minielectra.data import tokenizer as data_tokenizer
from minielectra.data.corpus import open_corpus
from minielectra.data.dataset import batch_iterator, build_dataset
from minielectra.data.documents import Corpus
from minielectra.data.examples import ExampleBuilder, pack_examples
from minielectra.data.tokenizer import SPECIAL_TOKENS, WordPieceTokenizer
from minielectra.safeio import sigterm_raises

CLS, SEP = 2, 3  # ids in the synthetic vocabulary below (specials first)


class OfficialExampleBuilder:
    """google-research/electra build_pretraining_dataset.py ExampleBuilder, transcribed line by
    line; the only changes: token ids come in already tokenised and ``random`` is an instance."""

    def __init__(self, rng, max_length, short_seq_prob=0.05, single_segment_prob=0.1):
        self.rng, self._max_length = rng, max_length
        self.short, self.single = short_seq_prob, single_segment_prob
        self._current_sentences, self._current_length = [], 0
        self._target_length = max_length

    def add_line(self, bert_tokids, blank):
        if blank and self._current_length != 0:  # empty lines separate docs
            return self._create_example()
        self._current_sentences.append(bert_tokids)
        self._current_length += len(bert_tokids)
        if self._current_length >= self._target_length:
            return self._create_example()
        return None

    def _create_example(self):
        if self.rng.random() < self.single:
            first_segment_target_length = 100000
        else:
            first_segment_target_length = (self._target_length - 3) // 2
        first_segment, second_segment = [], []
        for sentence in self._current_sentences:
            if (len(first_segment) == 0 or
                    len(first_segment) + len(sentence) < first_segment_target_length or
                    (len(second_segment) == 0 and
                     len(first_segment) < first_segment_target_length and
                     self.rng.random() < 0.5)):
                first_segment += sentence
            else:
                second_segment += sentence
        first_segment = first_segment[:self._max_length - 2]
        second_segment = second_segment[:max(0, self._max_length - len(first_segment) - 3)]
        self._current_sentences, self._current_length = [], 0
        if self.rng.random() < self.short:
            self._target_length = self.rng.randint(5, self._max_length)
        else:
            self._target_length = self._max_length
        return self._make_example(first_segment, second_segment)

    def _make_example(self, first_segment, second_segment):
        input_ids = [CLS] + first_segment + [SEP]
        segment_ids = [0] * len(input_ids)
        if second_segment:
            input_ids += second_segment + [SEP]
            segment_ids += [1] * (len(second_segment) + 1)
        input_ids += [0] * (self._max_length - len(input_ids))
        segment_ids += [0] * (self._max_length - len(segment_ids))
        return input_ids, segment_ids


# ------------------------------------------------------------------- the official reference
@pytest.mark.parametrize("max_len, short, single", [(128, 0.05, 0.1), (16, 0.3, 0.3), (40, 0.0, 0.0)])
def test_builder_makes_the_official_examples(max_len, short, single):
    """Random documents (sentences of 0..2*max_len tokens); same random stream -> same rows."""
    rng = random.Random(1)
    docs = [[[rng.randrange(5, 999) for _ in range(rng.choice([0, 1, 3, 8, 20, 2 * max_len]))]
             for _ in range(rng.randint(1, 30))] for _ in range(60)]
    official = OfficialExampleBuilder(random.Random(7), max_len, short, single)
    expected = []
    for doc in docs:
        for sentence in doc + [None]:  # None: the blank line after each document
            example = official.add_line(sentence or [], blank=sentence is None)
            if example:
                expected.append(example)

    sentences = [s for doc in docs for s in doc]
    lengths = np.array([len(s) for s in sentences])
    tokens = np.array([t for s in sentences for t in s], np.int32)
    builder = ExampleBuilder(random.Random(7), max_len=max_len, short_seq_prob=short,
                             single_segment_prob=single)
    examples, first = [], 0
    for doc in docs:
        examples += builder.add_document(zip(range(first, first + len(doc)),
                                             lengths[first:first + len(doc)].tolist()))
        first += len(doc)
    ids, types, n = pack_examples(examples, tokens, np.cumsum(lengths) - lengths, lengths,
                                  max_len=max_len, cls_id=CLS, sep_id=SEP)
    assert len(expected) > 100
    assert ids.tolist() == [e[0] for e in expected]
    assert types.tolist() == [e[1] for e in expected]
    assert n.tolist() == [sum(1 for t in e[0] if t) for e in expected]


# ------------------------------------------------------------- statistics of the official rules
# A synthetic corpus whose tokens say where they came from: each sentence is
# "d<doc> p<k> p<k+1> p<k+2> p<k+3>", 5 tokens, k counting through the document.
N_DOCS, SENTENCES_PER_DOC = 300, 300


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    root = tmp_path_factory.mktemp("synthetic")
    positions = 4 * SENTENCES_PER_DOC
    tokens = [*SPECIAL_TOKENS] + [f"d{i}" for i in range(N_DOCS)] + [f"p{k}" for k in range(positions)]
    (root / "vocab.txt").write_text("\n".join(tokens) + "\n")
    docs = ["\n".join(f"d{i} " + " ".join(f"p{4 * s + j}" for j in range(4))
                      for s in range(SENTENCES_PER_DOC)) for i in range(N_DOCS)]
    (root / "corpus.txt").write_text("\n\n".join(docs) + "\n")
    return root, WordPieceTokenizer.from_vocab_file(root / "vocab.txt")


def decode_positions(tokenizer, ids):
    """(document ids, positions) of the content tokens of one row."""
    words = tokenizer.convert_ids_to_tokens(ids)
    return ({int(w[1:]) for w in words if w.startswith("d")},
            [int(w[1:]) for w in words if w.startswith("p")])


def build(synthetic, cache, **kwargs):
    root, tokenizer = synthetic
    kwargs = {"split": "all", "progress": False, "num_workers": 1, **kwargs}
    return build_dataset(str(root / "corpus.txt"), tokenizer, cache_dir=cache, **kwargs)


def test_layout_segments_and_document_boundaries(synthetic, tmp_path):
    tokenizer = synthetic[1]
    ds = build(synthetic, tmp_path)
    for ids, types, n in zip(ds.input_ids, ds.token_type_ids, ds.lengths):
        seps = np.flatnonzero(ids[:n] == SEP)
        assert ids[0] == CLS and ids[n - 1] == SEP and len(seps) in (1, 2)
        assert not ids[n:].any() and not types[n:].any()  # padding only after the example
        assert not types[:seps[0] + 1].any() and types[seps[0] + 1:n].all()  # 0s, then 1s for B
        documents, positions = decode_positions(tokenizer, ids[:n])
        assert len(documents) == 1  # never two documents in one example
        a = positions[:np.sum(types[:n] == 0) - 2]
        assert a == list(range(a[0], a[0] + len(a)))  # A is a contiguous run of its document


def test_shards_on_disk_are_the_official_examples(synthetic, tmp_path, monkeypatch):
    """One chunk: the rows equal the official ExampleBuilder (transcribed above) run over each
    line tokenised whole by the Rust tokenizer (no word cache), with chunk 0's random stream;
    the files are plain .npy arrays of the declared dtypes and sizes, and metadata.json agrees."""
    root, tokenizer = synthetic
    monkeypatch.setattr(data_dataset, "CHUNK_CHARS", 1 << 30)
    ds = build(synthetic, tmp_path, max_seq_len=48, seed=5)
    official = OfficialExampleBuilder(random.Random("5:0"), 48)  # (seed, chunk index)
    expected = []
    for line in (root / "corpus.txt").read_text().split("\n"):
        ids = tokenizer._tokenizer.encode(line, add_special_tokens=False).ids if line else []
        example = official.add_line(ids, blank=not line)
        if example:
            expected.append(example)
    assert len(expected) > 1000
    assert np.asarray(ds.input_ids).tolist() == [e[0] for e in expected]
    assert np.asarray(ds.token_type_ids).tolist() == [e[1] for e in expected]
    assert np.asarray(ds.lengths).tolist() == [sum(1 for t in e[0] if t) for e in expected]
    n_rows = len(expected)
    for name, dtype, shape in [("input_ids", np.uint16, (n_rows, 48)),
                               ("token_type_ids", np.uint8, (n_rows, 48)),
                               ("lengths", np.int32, (n_rows,))]:
        path = ds.directory / f"{name}.npy"
        whole = np.load(path)  # an ordinary .npy, no mmap
        assert whole.dtype == dtype and whole.shape == shape
        assert path.stat().st_size == 128 + whole.nbytes  # a 128-byte header, then the rows
        assert isinstance(getattr(ds, name), np.memmap)
        assert np.array_equal(getattr(ds, name), whole)
    meta = json.loads((ds.directory / "metadata.json").read_text())
    text = (root / "corpus.txt").read_text()
    assert meta["num_examples"] == n_rows and meta["num_documents"] == N_DOCS
    assert meta["num_chars"] == sum(len(line) for line in text.split("\n"))
    assert meta["text_tokens"] == 5 * N_DOCS * SENTENCES_PER_DOC
    assert meta["example_tokens"] == int(np.asarray(ds.lengths).sum())
    content = np.isin(np.asarray(ds.input_ids), [0, CLS, SEP], invert=True).sum()
    assert meta["kept_text_tokens"] == content
    assert meta["key"]["tokenizer"] == tokenizer.settings
    assert sorted(p.name for p in ds.directory.iterdir()) == [
        "input_ids.npy", "lengths.npy", "metadata.json", "token_type_ids.npy"]


def test_single_segment_and_split_rates_are_the_official_ones(synthetic, tmp_path):
    """With short_seq_prob=0 every full example gathers 26 sentences (130 tokens): one segment
    with probability 0.1; otherwise A holds 12 sentences (60 tokens) and the 13th joins A on a
    coin flip (65 tokens), B takes the rest."""
    ds = build(synthetic, tmp_path, short_seq_prob=0.0)
    full = np.asarray(ds.lengths) == 128
    assert full.sum() > 2000
    segments = np.asarray(ds.token_type_ids)[full].any(axis=1)  # has a B segment
    single = 1 - segments.mean()
    assert abs(single - 0.1) < 5 * math.sqrt(0.1 * 0.9 / full.sum())
    a_len = (np.asarray(ds.token_type_ids)[full][segments] == 0).sum(axis=1) - 2 - (
        np.asarray(ds.input_ids)[full][segments] == 0).sum(axis=1)
    assert set(a_len.tolist()) == {60, 65}
    assert abs((a_len == 65).mean() - 0.5) < 5 * math.sqrt(0.25 / len(a_len))


def test_short_target_rate(synthetic, tmp_path):
    """A short target t ~ U[5, 128] gathers ceil(t/5) sentences; for t <= 120 the example has
    at most 120 + 3 tokens. Documents' last examples are short anyway and are left out."""
    tokenizer = synthetic[1]
    ds = build(synthetic, tmp_path, short_seq_prob=0.05)
    rows = np.asarray(ds.input_ids)
    doc_of = [min(decode_positions(tokenizer, r[:3])[0]) for r in rows]
    not_last = np.array([doc_of[i] == doc_of[i + 1] for i in range(len(rows) - 1)] + [False])
    short = np.asarray(ds.lengths)[not_last] <= 123
    expected = 0.05 * (120 - 5 + 1) / (128 - 5 + 1)
    assert abs(short.mean() - expected) < 5 * math.sqrt(expected * (1 - expected) / len(short))


def test_workers_and_chunks_do_not_change_the_examples(synthetic, tmp_path, monkeypatch):
    monkeypatch.setattr(data_dataset, "CHUNK_CHARS", 50_000)  # ~20 chunks: the pool really runs
    one = build(synthetic, tmp_path / "one", num_workers=1)
    two = build(synthetic, tmp_path / "two", num_workers=2)
    assert len(one) > 0 and np.array_equal(one.input_ids, two.input_ids)
    assert np.array_equal(one.token_type_ids, two.token_type_ids)
    again = build(synthetic, tmp_path / "three", num_workers=1, seed=1)
    assert not np.array_equal(one.input_ids[:len(again)], again.input_ids[:len(one)])


# ------------------------------------------------------------------------------------ caching
def test_second_build_reuses_the_cache(synthetic, tmp_path, monkeypatch):
    first = build(synthetic, tmp_path)
    monkeypatch.setattr(data_dataset, "build_chunk", lambda *a: pytest.fail("rebuilt a valid cache"))
    assert build(synthetic, tmp_path).directory == first.directory
    monkeypatch.undo()
    other = build(synthetic, tmp_path, max_seq_len=64)
    assert other.directory != first.directory and other.input_ids.shape[1] == 64


@pytest.mark.parametrize("path, stale", [
    (("seed",), 99),
    (("tokenizer", "tokenizers"), "0.0.1"),  # written by another `tokenizers` release
    (("tokenizer", "version"), 0),  # by another version of minielectra's tokenizer
    (("tokenizer", "lowercase"), False),
    (("corpus",), "hub:someone/books:None:train:rows=documents:column=None@" + "0" * 40),
])
def test_a_cache_written_by_other_settings_is_rebuilt(synthetic, tmp_path, caplog, path, stale):
    """A folder whose metadata names other settings (copied by hand, older version, ...)."""
    first = build(synthetic, tmp_path)
    first_ids = np.array(first.input_ids)
    meta = json.loads((first.directory / "metadata.json").read_text())
    functools.reduce(dict.get, path[:-1], meta["key"])[path[-1]] = stale
    (first.directory / "metadata.json").write_text(json.dumps(meta))
    with caplog.at_level(logging.WARNING, logger="minielectra"):
        rebuilt = build(synthetic, tmp_path)
    assert f"other settings ({path[0]} differ)" in caplog.text
    assert rebuilt.metadata["key"] != meta["key"] and np.array_equal(rebuilt.input_ids, first_ids)


def test_other_tokenizer_settings_or_versions_build_anew(synthetic, tmp_path, monkeypatch):
    built = []
    original = data_examples.build_chunk
    monkeypatch.setattr(data_dataset, "build_chunk", lambda *a: built.append(1) or original(*a))
    root, tokenizer = synthetic
    first = build(synthetic, tmp_path)
    assert built
    for change in (lambda: monkeypatch.setattr(data_tokenizer.tokenizers, "__version__", "0.0.1"),
                   lambda: monkeypatch.setattr(data_tokenizer, "TOKENIZER_VERSION", 99)):
        built.clear()
        change()
        again = build(synthetic, tmp_path)
        assert built and again.directory != first.directory  # built, not reused
    cased = WordPieceTokenizer(tokenizer.tokens, lowercase=False)
    built.clear()
    assert build_dataset(str(root / "corpus.txt"), cased, split="all", cache_dir=tmp_path,
                         progress=False, num_workers=1).directory != first.directory and built


def test_a_new_hub_revision_builds_anew(tmp_path, synthetic, monkeypatch):
    """Rows from a local ``datasets.Dataset``; only the revision lookup is stubbed."""
    datasets = pytest.importorskip("datasets")
    commit = ["a" * 40]
    rows = datasets.Dataset.from_list([{"text": "d0 p0 p1\nd0 p2 p3"}, {"text": "d1 p4"}])
    monkeypatch.setattr(datasets, "load_dataset_builder", lambda *a, **k: types.SimpleNamespace(
        hash=commit[0], info=types.SimpleNamespace(splits=None)))
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: rows)
    kwargs = {"split": "all", "cache_dir": tmp_path, "progress": False}
    first = build_dataset("hf:someone/books", synthetic[1], **kwargs)
    assert first.metadata["key"]["corpus"].endswith("@" + "a" * 40) and len(first) == 2
    assert build_dataset("hf:someone/books", synthetic[1], **kwargs).directory == first.directory
    commit[0] = "b" * 40
    assert build_dataset("hf:someone/books", synthetic[1], **kwargs).directory != first.directory


@pytest.mark.parametrize("damage", ["truncated", "altered in range", "out of range, no sums"])
def test_a_damaged_cache_is_rebuilt(synthetic, tmp_path, caplog, damage):
    first = build(synthetic, tmp_path)
    first_ids = np.array(first.input_ids)
    path = first.directory / "input_ids.npy"
    if damage == "truncated":  # e.g. a full disk
        path.write_bytes(path.read_bytes()[:1000])
    else:
        ids = np.load(path).copy()
        ids[0, 1] = ids[0, 2] if damage == "altered in range" else 60_000
        np.save(path, ids)
    if damage == "out of range, no sums":  # a cache written before the sums were recorded
        meta = json.loads((first.directory / "metadata.json").read_text())
        del meta["sha256"]
        (first.directory / "metadata.json").write_text(json.dumps(meta))
    del first
    with caplog.at_level(logging.WARNING, logger="minielectra"):
        rebuilt = build(synthetic, tmp_path)
    assert "is damaged" in caplog.text and "input_ids.npy" in caplog.text
    assert np.array_equal(rebuilt.input_ids, first_ids)


# ------------------------------------------------------------------------- streams and memory
WORDS = "the of and to in a is was for on as with by he at from his an were are which".split()


def test_memory_stays_bounded_on_an_endless_stream(tmp_path, monkeypatch):
    """Held-out examples of a stream that never ends: it is read up to the cap only, and the
    build's peak Python memory is a few chunks, far below the text that went through it."""
    monkeypatch.setattr(data_dataset, "CHUNK_CHARS", 1 << 14)
    monkeypatch.setattr(data_documents, "STREAMED_HELD_OUT_SCAN", 20_000)
    read, chars = [0], [0]

    def documents():
        rng = random.Random(0)
        for _ in itertools.count():
            doc = [" ".join(rng.choices(WORDS, k=12)) for _ in range(8)]
            read[0] += 1
            if read[0] > 100_000:  # fail, instead of hanging, if nothing caps the stream
                raise AssertionError("the whole stream is being read")
            chars[0] += sum(map(len, doc))
            yield doc
    endless = Corpus("endless", documents, fingerprint="endless", streamed=True)
    tokenizer = WordPieceTokenizer.train([" ".join(WORDS)] * 10, vocab_size=100)
    tracemalloc.start()
    try:
        ds = build_dataset(endless, tokenizer, split="heldout", held_out_fraction=0.5,
                           cache_dir=tmp_path, progress=False, num_workers=1)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert read[0] == 20_000  # the cap, not the end of the stream
    built = ds.metadata["num_chars"]
    assert abs(ds.metadata["num_documents"] - 10_000) < 5 * math.sqrt(20_000 * 0.5 * 0.5)
    # A str costs at least a byte a character: holding the text that was built (~3.5 MB) or read
    # (~7 MB) would pass this bound; one 16 KB chunk in flight (~50 bytes a character while it
    # is tokenised and packed) does not. Measured: ~0.8 MB, the same for 5x the text.
    assert built > 3_000_000 and peak < 0.5 * built, (peak, built, chars[0])


def test_parallel_build_reads_a_stream_only_a_few_chunks_ahead(synthetic):
    """The pool holds at most two chunks per worker, so an endless stream is read just ahead."""
    read = [0]

    def chunks():
        while True:
            read[0] += 1
            if read[0] > 200:  # fail, instead of hanging, if the pool swallows the stream
                raise AssertionError("the stream was read without bound")
            yield [["d0 p0 p1 p2 p3"] * 50]
    results = data_dataset.map_chunks(chunks(), synthetic[1], data_examples.BuildSettings(max_seq_len=32), workers=2)
    try:
        for k in range(1, 16):
            arrays, _, _ = next(results)
            assert len(arrays[0]) == 8  # 50 sentences of 5 tokens, targets of 32 -> 8 examples
            assert read[0] <= k + 2 * 2 + 1
    finally:
        results.close()


# ------------------------------------------------------------------------------------ batches
def test_batches_shapes_resume_and_epochs(synthetic, tmp_path):
    ds = build(synthetic, tmp_path)
    per_epoch = len(ds) // 32
    batches = batch_iterator(ds, 32, seed=3)
    first = [next(batches) for _ in range(per_epoch + 5)]
    b = first[0]
    assert set(b) == {"input_ids", "attention_mask", "token_type_ids"}
    assert all(v.shape == (32, 128) and v.dtype == torch.int64 for v in b.values())
    assert torch.equal(b["attention_mask"].sum(1), (b["input_ids"] != 0).sum(1))
    resumed = batch_iterator(ds, 32, seed=3, start=per_epoch - 2)
    for expected in first[per_epoch - 2:]:  # across the epoch boundary
        assert torch.equal(next(resumed)["input_ids"], expected["input_ids"])
    # an epoch visits distinct examples; the next epoch has another order
    assert len({tuple(r.tolist()) for x in first[:per_epoch] for r in x["input_ids"]}) == per_epoch * 32
    assert not torch.equal(first[0]["input_ids"], first[per_epoch]["input_ids"])
    in_order = list(batch_iterator(ds, 32, shuffle=False, loop=False))
    assert len(in_order) == per_epoch
    assert torch.equal(in_order[1]["input_ids"], torch.from_numpy(ds.input_ids[32:64].astype(np.int64)))
    item = ds[5]
    assert item["input_ids"].shape == (128,) and int(item["attention_mask"].sum()) == ds.lengths[5]


def test_a_corpus_too_small_for_one_batch(tmp_path, synthetic):
    (tmp_path / "tiny.txt").write_text("d0 p0 p1\n\nd1 p2\n")
    ds = build_dataset(str(tmp_path / "tiny.txt"), synthetic[1], split="all", cache_dir=tmp_path,
                       progress=False)
    assert len(ds) == 2
    with pytest.raises(ValueError, match=r"tiny.txt.*has 2 examples, fewer than one batch of 32"):
        next(batch_iterator(ds, 32))


# ------------------------------------------------------------------------------------ bad input
def test_empty_corpus_and_empty_held_out_split(tmp_path, synthetic):
    (tmp_path / "blank.txt").write_text("\n   \n\n")
    with pytest.raises(ValueError, match=r"corpus '.*blank.txt.*' is empty"):
        build_dataset(str(tmp_path / "blank.txt"), synthetic[1], cache_dir=tmp_path, progress=False)
    (tmp_path / "one.txt").write_text("d0 p0\n")
    with pytest.raises(ValueError, match="held-out fraction 0.02"):
        build_dataset(str(tmp_path / "one.txt"), synthetic[1], split="heldout", cache_dir=tmp_path,
                      progress=False)
    with pytest.raises(ValueError, match="split must be"):
        build_dataset(str(tmp_path / "one.txt"), synthetic[1], split="test", cache_dir=tmp_path)


def test_skipped_and_repaired_files_are_reported_in_the_metadata(tmp_path, synthetic):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.txt").write_bytes(b"d0 p0 p1 \xff\xfe p2\n")
    (tmp_path / "d" / "b.txt").write_bytes(b"\x00\x01\x02binary")
    ds = build_dataset(str(tmp_path / "d"), synthetic[1], split="all", cache_dir=tmp_path,
                       progress=False)
    stats = ds.metadata["read_stats"]
    assert stats["replaced_sequences"] == 2 and list(stats["skipped_files"]) == [
        str(tmp_path / "d" / "b.txt")]
    # U+FFFD is dropped by BERT's normaliser: the rest of the line survives
    assert synthetic[1].convert_ids_to_tokens(ds.input_ids[0][1:5]) == ["d0", "p0", "p1", "p2"]


def test_a_warning_when_most_of_the_text_is_cut(tmp_path, synthetic, caplog):
    """Paragraph lines of 80 tokens with max_seq_len 16: an example keeps 14 of them (17.5%);
    lines of 4 tokens (sentences) lose only what the official cut at max_len takes (~20% here)."""
    paragraph = " ".join(["d0"] + [f"p{k}" for k in range(79)])
    (tmp_path / "paragraphs.txt").write_text((paragraph + "\n") * 50)
    kwargs = {"split": "all", "cache_dir": tmp_path, "progress": False, "max_seq_len": 16}
    with caplog.at_level(logging.WARNING, logger="minielectra"):
        ds = build_dataset(str(tmp_path / "paragraphs.txt"), synthetic[1], **kwargs)
    kept = ds.metadata["kept_text_tokens"] / ds.metadata["text_tokens"]
    assert kept == 14 / 80 and "only 18%" in caplog.text and "paragraphs" in caplog.text
    caplog.clear()
    (tmp_path / "sentences.txt").write_text("d0 p0 p1 p2\n" * 2000)
    with caplog.at_level(logging.WARNING, logger="minielectra"):
        ds = build_dataset(str(tmp_path / "sentences.txt"), synthetic[1], **kwargs)
    assert ds.metadata["kept_text_tokens"] / ds.metadata["text_tokens"] > 0.7
    assert "only" not in caplog.text


def test_bad_sizes_are_clear_errors(tmp_path, synthetic):
    with pytest.raises(ValueError, match="max_seq_len must be at least 5, got 4"):
        build(synthetic, tmp_path, max_seq_len=4)
    ds = build(synthetic, tmp_path)
    with pytest.raises(ValueError, match="batch_size must be at least 1, got 0"):
        next(batch_iterator(ds, 0))
    with pytest.raises(ValueError, match="start must be >= 0"):
        next(batch_iterator(ds, 8, start=-1))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="pinned memory needs CUDA")
def test_batches_for_a_gpu_are_pinned(synthetic, tmp_path):
    ds = build(synthetic, tmp_path)
    batch = next(batch_iterator(ds, 8, device="cuda"))
    assert all(v.is_pinned() for v in batch.values())
    assert not next(batch_iterator(ds, 8))["input_ids"].is_pinned()


# ------------------------------------------------------------------ same text, same examples
def test_data_dir_and_path_corpora_give_identical_examples(tmp_path, synthetic, monkeypatch):
    text = (synthetic[0] / "corpus.txt").read_text()
    with gzip.open(tmp_path / "copy.txt.gz", "wt") as f:
        f.write(text)
    (tmp_path / "data" / "pretrain-en").mkdir(parents=True)
    (tmp_path / "copy.txt.gz").rename(tmp_path / "data" / "pretrain-en" / "part.txt.gz")
    monkeypatch.setenv("MINIELECTRA_DATA_DIR", str(tmp_path / "data"))
    named = build_dataset("pretrain-en", synthetic[1], cache_dir=tmp_path / "c", progress=False)
    path = build_dataset(str(synthetic[0] / "corpus.txt"), synthetic[1], cache_dir=tmp_path / "c",
                         progress=False)
    assert named.directory != path.directory and len(named) > 100
    assert np.array_equal(named.input_ids, path.input_ids)


@pytest.mark.integration
def test_real_data_dir_and_path_give_identical_examples(data_dir, tmp_path):
    """wikitext-2 by name (data dir) and the same files by glob; BERT vocabulary."""
    tokenizer = WordPieceTokenizer.from_vocab_file(data_dir / "vocab" / "bert-base-uncased-vocab.txt")
    named = build_dataset("wikitext-2", tokenizer, data_dir=data_dir, cache_dir=tmp_path,
                          progress=False, num_workers=1)
    files = str(data_dir / "wikitext-2-raw" / "wiki.*.raw.gz")
    path = build_dataset(files, tokenizer, cache_dir=tmp_path, progress=False, num_workers=1)
    assert len(named) > 1000 and np.array_equal(named.input_ids, path.input_ids)
    ids = np.asarray(named.input_ids)
    assert (ids[:, 0] == tokenizer.cls_id).all()
    assert ((ids == tokenizer.sep_id).sum(1) >= 1).all() and (np.asarray(named.lengths) <= 128).all()
    heldout = build_dataset(open_corpus("wikitext-2", data_dir=data_dir), tokenizer, split="heldout",
                            cache_dir=tmp_path, progress=False, num_workers=1)
    assert 0 < len(heldout) < 0.1 * len(named)



def test_pool_workers_leave_sigterm_to_its_default(synthetic):
    """Commands run inside sigterm_raises, whose handler a forked worker inherits; the pool ends
    its workers with SIGTERM when it closes, and with that handler each worker printed a
    Terminated traceback on the way out (seen on every `pretrain` that built its examples)."""
    with sigterm_raises():
        with data_dataset._start_pool(2, synthetic[1], data_examples.BuildSettings(max_seq_len=32)) as pool:
            handlers = pool.map(signal.getsignal, [signal.SIGTERM] * 4)
    assert handlers == [signal.SIG_DFL] * 4
