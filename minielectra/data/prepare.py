"""``minielectra prepare``: a corpus streamed once into shards that ``pretrain --data`` reads.

The builder of :func:`.dataset.build_dataset`, written as shards of ``chunks_per_shard`` chunks:
an interrupted run keeps its finished shards and redoes the one it was writing, and since a
chunk's examples depend only on (seed, chunk index) the result is byte for byte the
uninterrupted one. Layout of ``--out DIR`` (locked while written; :mod:`minielectra.ownership`)::

    prepare.json              the settings and each split's totals
    vocab.txt, tokenizer_config.json      the tokenizer
    train/shard_00000/        input_ids.npy, token_type_ids.npy, lengths.npy, metadata.json
    heldout/shard_00000/      the documents held out by hash (``held_out_fraction``)
"""

from __future__ import annotations

import errno
import itertools
import json
import logging
import os
import shutil
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from ..outputs import output_folder
from ..ownership import Layout
from ..safeio import check_out_dir, read_json, write_file
from .corpus import open_corpus
from .dataset import (CHUNK_CHARS, FORMAT_VERSION, PretrainingDataset, text_chunks, map_chunks,
                      write_arrays)
from ..progress import counted, progress_bar
from .examples import BuildSettings
from .tokenizer import WordPieceTokenizer, bert_uncased

log = logging.getLogger(__name__)

SPLITS = ("train", "heldout")
# 64 chunks of ~1 MB of text: ~250k examples of 128 tokens, ~64 MB of uint16 ids per shard;
# an interruption loses at most one shard's work.
CHUNKS_PER_SHARD = 64
BERT_NAMES = ("bert-base-uncased", "bert-uncased")
PREPARED = Layout("prepare", ("prepare.json", "vocab.txt", "tokenizer_config.json", *SPLITS),
                  lambda folder: "key" in read_json(folder / "prepare.json"))
PREPARED_FILES = ("prepare.json", "vocab.txt", "tokenizer_config.json", *(f"{s}/" for s in SPLITS))


# ------------------------------------------------------------------------------ the tokenizer
def load_tokenizer(spec: str, *, data_dir=None) -> WordPieceTokenizer:
    """``bert-base-uncased`` (the data dir's BERT vocabulary), a vocab.txt, or a tokenizer dir."""
    if spec in BERT_NAMES:
        return bert_uncased(f"--tokenizer {spec}", data_dir)
    path = Path(spec)
    if path.is_dir():
        return WordPieceTokenizer.load(path)
    if path.is_file():
        return WordPieceTokenizer.from_vocab_file(path)
    raise FileNotFoundError(f"--tokenizer {spec}: not bert-base-uncased, a vocab.txt or a "
                            "tokenizer directory")


# ------------------------------------------------------------------------------ writing shards
def _shard_dir(root: Path, index: int) -> Path:
    return root / f"shard_{index:05d}"


def _finished_shards(root: Path, chunks_per_shard: int) -> int:
    """How many shards at the start of ``root`` are complete and full (a short last shard is
    only complete when the whole split is, and the split's ``done.json`` says so)."""
    done = 0
    while (meta := _shard_dir(root, done) / "metadata.json").is_file():
        if json.loads(meta.read_text()).get("chunks") != chunks_per_shard:
            break
        done += 1
    return done


def _write_shard(root: Path, index: int, results, *, first_chunk: int, tokenizer, split: str,
                 n: int) -> dict:
    """Write the built chunks of one shard into a temporary dir, then rename it into place."""
    final = _shard_dir(root, index)
    tmp = final.with_name(final.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        c = write_arrays(tmp, results, vocab_size=tokenizer.vocab_size, max_seq_len=n)
    except OSError as e:  # a full disk: a buffered write names no file, so name the shard
        if e.filename or e.errno != errno.ENOSPC:
            raise
        raise OSError(e.errno, e.strerror, str(final)) from None
    meta = {"split": split, "corpus": f"shard {index} of {split}", "max_seq_len": n,
            "vocab_size": tokenizer.vocab_size, "num_examples": c["num_examples"],
            "first_chunk": first_chunk, "chunks": c["chunks"], "num_chars": c["num_chars"],
            "text_tokens": c["text_tokens"], "kept_text_tokens": c["kept_text_tokens"],
            "example_tokens": c["example_tokens"],
            "bytes": sum(f.stat().st_size for f in tmp.iterdir())}
    write_file(tmp / "metadata.json", json.dumps(meta, indent=2) + "\n")
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    return meta


def _prepare_split(corpus, tokenizer, settings: BuildSettings, root: Path, *, split: str,
                   chunks_per_shard: int, workers: int, progress: bool) -> dict:
    """Build one split's shards, keeping the full shards an earlier run finished."""
    done_path = root / "done.json"
    if done_path.is_file():
        return json.loads(done_path.read_text())
    root.mkdir(parents=True, exist_ok=True)
    kept = _finished_shards(root, chunks_per_shard)
    for stale in sorted(root.glob("shard_*"))[kept:]:  # a short or half-written shard: redo it
        shutil.rmtree(stale)
    skip = kept * chunks_per_shard
    chunks = text_chunks(corpus.documents(), CHUNK_CHARS)
    skipped_chars = sum(sum(map(len, doc)) for chunk in itertools.islice(chunks, skip)
                        for doc in chunk)
    if kept:
        log.info("prepare %s: resuming after %d finished shard(s) (%d chunks)", split, kept, skip)
    results = map_chunks(chunks, tokenizer, settings, workers, start=skip)
    index = kept
    with progress_bar(desc=f"prepare {split}", unit="char", unit_scale=True, initial=skipped_chars,
              disable=not progress) as bar:
        while True:
            group = list(counted(itertools.islice(results, chunks_per_shard), bar,
                                 size=lambda result: result[1]))
            if not group and index > 0:
                break
            _write_shard(root, index, group, first_chunk=index * chunks_per_shard,
                         tokenizer=tokenizer, split=split, n=settings.max_seq_len)
            index += 1
            if len(group) < chunks_per_shard:
                break
    shards = [json.loads((_shard_dir(root, i) / "metadata.json").read_text())
              for i in range(index)]
    totals = {k: sum(s[k] for s in shards) for k in
              ("num_examples", "num_chars", "text_tokens", "kept_text_tokens", "example_tokens",
               "bytes")}
    if totals["num_examples"] == 0:
        raise ValueError(f"prepare: the {split} split of {corpus.name!r} gave no examples")
    summary = {"split": split, "shards": index, **totals}
    write_file(done_path, json.dumps(summary, indent=2) + "\n")
    return summary


def prepare(corpus: str, *, out, tokenizer: str = "bert-base-uncased", max_seq_len: int = 128,
            held_out_fraction: float = 0.02, seed: int = 0, short_seq_prob: float = 0.05,
            single_segment_prob: float = 0.1, chunks_per_shard: int = CHUNKS_PER_SHARD,
            num_workers: int = 0, progress: bool = True, data_dir=None, cache_dir=None) -> dict:
    """Stream ``corpus`` into train and held-out shards under ``out``; run again with the same
    arguments, it resumes, and with others it refuses, naming what differs."""
    if max_seq_len < 5 or chunks_per_shard < 1:
        raise ValueError("max_seq_len must be >= 5 and chunks_per_shard >= 1")
    check_out_dir(out)  # a file, or a folder that cannot be written: said before any work
    parts = [corpus] if Path(corpus).exists() else corpus.split("+")
    inputs = [*(("--corpus", part) for part in parts), ("--tokenizer", tokenizer)]
    out = Path(out)
    # none in the way but prepare's own; a second prepare here is refused
    with output_folder(out, PREPARED, files=PREPARED_FILES, inputs=inputs, what="prepare"):
        start = time.perf_counter()
        source = open_corpus(corpus, data_dir=data_dir, cache_dir=cache_dir)
        tok = load_tokenizer(tokenizer, data_dir=data_dir)
        settings = BuildSettings(max_seq_len, short_seq_prob, single_segment_prob, seed)
        key = {"format": FORMAT_VERSION, "corpus": source.fingerprint,
               "held_out_fraction": held_out_fraction, "tokenizer": tok.settings,
               "chunk_chars": CHUNK_CHARS, "chunks_per_shard": chunks_per_shard,
               **asdict(settings)}
        _check_key(out, key)
        tok.save(out)
        parts = dict(zip(SPLITS, source.split(held_out_fraction)))
        workers = num_workers or os.cpu_count() or 1
        splits = {split: _prepare_split(parts[split], tok, settings, out / split, split=split,
                                        chunks_per_shard=chunks_per_shard, workers=workers,
                                        progress=progress) for split in SPLITS}
        manifest = {"key": key, "corpus": source.name, "tokenizer": tokenizer, "splits": splits,
                    "seconds": round(time.perf_counter() - start, 1)}
        write_file(out / "prepare.json", json.dumps(manifest, indent=2) + "\n")
    return {"out": str(out), "corpus": source.name, **{s: splits[s] for s in SPLITS},
            "bytes_per_example": splits["train"]["bytes"] / splits["train"]["num_examples"]}


def _check_key(out: Path, key: dict) -> None:
    """Refuse an ``out`` prepared with other settings; a new one gets its ``prepare.json``."""
    path = out / "prepare.json"
    if path.is_file():
        stored = read_json(path).get("key", {})
        changed = sorted(k for k in key.keys() | stored.keys() if stored.get(k) != key.get(k))
        if changed:
            raise ValueError(f"{out} was prepared with other settings ({', '.join(changed)} "
                             "differ): delete it or choose another --out")
        return
    write_file(path, json.dumps({"key": key}, indent=2) + "\n")


# ------------------------------------------------------------------------------ reading shards
class _Rows:
    """Row-indexable concatenation of memory-mapped arrays (only the rows asked for are read)."""

    def __init__(self, parts: list[np.ndarray]):
        self.parts = parts
        self.offsets = np.cumsum([0] + [len(p) for p in parts])
        self.shape = (int(self.offsets[-1]), *parts[0].shape[1:])
        self.dtype = parts[0].dtype

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, rows) -> np.ndarray:
        rows = np.asarray(rows, np.int64)
        out = np.empty((len(rows), *self.shape[1:]), self.dtype)
        which = np.searchsorted(self.offsets, rows, side="right") - 1
        for s in np.unique(which):
            here = which == s
            out[here] = self.parts[s][rows[here] - self.offsets[s]]
        return out


class ShardedDataset:
    """A prepared split's shards as one dataset (the interface of ``PretrainingDataset``)."""

    def __init__(self, directory):
        self.directory = Path(directory)
        if not (self.directory / "done.json").is_file():
            raise FileNotFoundError(f"{self.directory}: not a finished prepared split (run "
                                    "`minielectra prepare` again to finish it)")
        self.metadata = json.loads((self.directory / "done.json").read_text())
        shards = [PretrainingDataset(p) for p in sorted(self.directory.glob("shard_*"))
                  if p.is_dir() and not p.name.endswith(".tmp")]
        shards = [s for s in shards if len(s)] or shards[:1]
        self.input_ids = _Rows([s.input_ids for s in shards])  # (N, n)
        self.token_type_ids = _Rows([s.token_type_ids for s in shards])
        self.lengths = _Rows([s.lengths for s in shards])  # (N,)
        if len(self.lengths) != self.metadata["num_examples"]:
            raise ValueError(f"{self.directory}: shards and done.json disagree on the size")

    def __len__(self) -> int:
        return len(self.lengths)

    def __repr__(self) -> str:
        return (f"ShardedDataset({len(self)} examples x {self.input_ids.shape[1]} tokens, "
                f"{self.metadata['shards']} shards, {self.directory})")


def load_prepared(directory, *, max_seq_len: int | None = None):
    """(tokenizer, train, held-out) of a ``prepare`` output; refuses another ``max_seq_len``."""
    directory = Path(directory)
    manifest_path = directory / "prepare.json"
    if not manifest_path.is_file():
        raise FileNotFoundError(f"--data {directory}: no prepare.json (run `minielectra prepare "
                                f"--out {directory}` first)")
    key = json.loads(manifest_path.read_text())["key"]
    if max_seq_len is not None and key["max_seq_len"] != max_seq_len:
        raise ValueError(f"--data {directory} holds examples of {key['max_seq_len']} tokens, but "
                         f"data.max_seq_len is {max_seq_len}: train on them with --set "
                         f"data.max_seq_len={key['max_seq_len']}, or prepare again with "
                         f"--max-seq-len {max_seq_len}")
    tokenizer = WordPieceTokenizer.load(directory)
    return tokenizer, ShardedDataset(directory / "train"), ShardedDataset(directory / "heldout")
