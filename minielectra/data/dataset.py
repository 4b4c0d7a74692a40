"""The pre-training dataset: a corpus through the example builder into memory-mapped arrays, then
batches.

:func:`build_dataset` tokenises a corpus in chunks of whole documents (in worker processes for
large corpora) and caches three ``.npy`` arrays and ``metadata.json`` in a folder named by
everything the examples depend on. :func:`batch_iterator` serves shuffled batches and resumes at
any batch index. Axis letters: b batch, n sequence.
"""

from __future__ import annotations

import collections
import hashlib
import itertools
import json
import logging
import multiprocessing
import os
import queue
import shutil
import signal
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Iterator

import numpy as np
import torch

from ..safeio import remove_stale_builds
from .corpus import default_cache_dir, open_corpus
from .documents import Corpus
from .examples import BuildSettings, id_dtype, build_chunk
from .files import first_damaged, sha256_sums
from .tokenizer import WordPieceTokenizer

log = logging.getLogger(__name__)

FORMAT_VERSION = 1  # bump when the builder's output changes, so old caches are rebuilt
# Documents are grouped into chunks of about this many characters. Each chunk is tokenised and
# built on its own with its own random stream, so the output does not depend on num_workers.
CHUNK_CHARS = 1 << 20
ARRAYS = ("input_ids.npy", "token_type_ids.npy", "lengths.npy")


# ------------------------------------------------------------------------- chunks in workers
def _init_worker(tokenizer: WordPieceTokenizer, settings: BuildSettings) -> None:
    global _WORKER
    # A forked worker inherits the command's SIGTERM handler (safeio.sigterm_raises), but the
    # pool ends its workers with SIGTERM when it closes: with that handler each would print a
    # Terminated traceback on the way out. The default action ends them quietly.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _WORKER = (tokenizer, settings)


def _build_chunk_in_worker(job):
    return build_chunk(job[0], job[1], *_WORKER)


def text_chunks(documents, chunk_chars: int) -> Iterator[list[list[str]]]:
    chunk, size = [], 0
    for doc in documents:
        chunk.append(doc)
        size += sum(map(len, doc))
        if size >= chunk_chars:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


def _start_pool(workers: int, tokenizer: WordPieceTokenizer, settings: BuildSettings):
    # fork (Linux) starts workers in milliseconds and hands them the tokenizer without pickling.
    # TOKENIZERS_PARALLELISM=false in the children: each worker is one core, and the Rust library
    # would otherwise warn about forking after its thread pool started.
    context = multiprocessing.get_context("fork" if sys.platform == "linux" else "spawn")
    saved = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        return context.Pool(workers, initializer=_init_worker, initargs=(tokenizer, settings))
    finally:
        if saved is None:
            del os.environ["TOKENIZERS_PARALLELISM"]
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = saved


def map_chunks(chunks, tokenizer, settings, workers: int, start: int = 0):
    """``build_chunk`` over the chunks, results in order. With several workers a process pool
    gets at most two chunks per worker at a time, so a streamed corpus is never held whole.
    ``start`` is the index of the first chunk (a resumed ``prepare`` skips finished ones)."""
    jobs = enumerate(chunks, start)
    first = next(jobs, None)
    if first is None:
        return
    # The first chunk is built here, before any fork: the tokenizer's word cache it fills is
    # inherited by the workers, which then tokenise only the words that chunk did not have.
    yield build_chunk(*first, tokenizer, settings)
    second = next(jobs, None)
    if workers <= 1 or second is None:  # nothing left to share out
        for index, docs in itertools.chain([second] if second else [], jobs):
            yield build_chunk(index, docs, tokenizer, settings)
        return
    with _start_pool(workers, tokenizer, settings) as pool:
        pending = collections.deque()
        for job in itertools.chain([second], jobs):
            pending.append(pool.apply_async(_build_chunk_in_worker, (job,)))
            if len(pending) >= 2 * workers:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()


# ------------------------------------------------------------------------------ on disk
class _NpyAppender:
    """A .npy file written row block by row block, its length unknown until the end: a header of
    fixed size is reserved and rewritten with the final shape on close."""

    HEADER_BYTES = 128  # numpy pads a 2-D header to exactly this (checked in close)

    def __init__(self, path: Path, dtype, row_shape: tuple[int, ...]):
        self.path, self.dtype, self.row_shape, self.rows = path, np.dtype(dtype), row_shape, 0
        self.file = open(path, "wb")
        self.file.write(b"\0" * self.HEADER_BYTES)

    def append(self, block: np.ndarray) -> None:
        self.file.write(np.ascontiguousarray(block, self.dtype).tobytes())
        self.rows += len(block)

    def close(self) -> None:
        self.file.seek(0)
        header = {"descr": np.lib.format.dtype_to_descr(self.dtype), "fortran_order": False,
                  "shape": (self.rows, *self.row_shape)}
        np.lib.format.write_array_header_1_0(self.file, header)
        if self.file.tell() != self.HEADER_BYTES:
            raise RuntimeError(f"{self.path}: .npy header is {self.file.tell()} bytes, "
                               f"expected {self.HEADER_BYTES}")
        self.file.close()


class PretrainingDataset:
    """Examples memory-mapped from a folder written by :func:`build_dataset`."""

    def __init__(self, directory):
        self.directory = Path(directory)
        self.metadata: dict = json.loads((self.directory / "metadata.json").read_text())
        self.input_ids = np.load(self.directory / "input_ids.npy", mmap_mode="r")  # (N, n)
        self.token_type_ids = np.load(self.directory / "token_type_ids.npy", mmap_mode="r")
        self.lengths = np.load(self.directory / "lengths.npy", mmap_mode="r")  # (N,)
        if not (len(self.input_ids) == len(self.token_type_ids) == len(self.lengths)
                == self.metadata["num_examples"]):
            raise ValueError(f"{self.directory}: arrays and metadata.json disagree on the size")

    def __len__(self) -> int:
        return len(self.lengths)

    def __getitem__(self, i) -> dict[str, torch.Tensor]:
        return {k: v[0] for k, v in collate(self, np.array([i])).items()}

    def __repr__(self) -> str:
        return (f"PretrainingDataset({len(self)} examples x {self.input_ids.shape[1]} tokens, "
                f"corpus={self.metadata['corpus']!r}, split={self.metadata['split']!r})")


def collate(dataset: PretrainingDataset, rows: np.ndarray, pin: bool = False):
    """The examples ``rows`` of a dataset as one batch of int64 tensors, (b, n) each."""
    lengths = np.asarray(dataset.lengths[rows], np.int64)
    n = dataset.input_ids.shape[1]
    batch = {  # (b, n) each
        "input_ids": torch.from_numpy(dataset.input_ids[rows].astype(np.int64)),
        "attention_mask": torch.from_numpy((np.arange(n) < lengths[:, None]).astype(np.int64)),
        "token_type_ids": torch.from_numpy(dataset.token_type_ids[rows].astype(np.int64)),
    }
    return {k: v.pin_memory() for k, v in batch.items()} if pin else batch


# ------------------------------------------------------------------------------ build + cache
def _cache_key(corpus: Corpus, tokenizer: WordPieceTokenizer, settings: BuildSettings,
               split: str, held_out_fraction: float) -> dict:
    """Everything the examples depend on; a cached folder is reused only when all of it matches."""
    return {"format": FORMAT_VERSION, "corpus": corpus.fingerprint, "split": split,
            "held_out_fraction": held_out_fraction if split != "all" else None,
            "tokenizer": tokenizer.settings, "chunk_chars": CHUNK_CHARS, **asdict(settings)}


def _select_split(corpus: Corpus, split: str, held_out_fraction: float) -> Corpus:
    if split == "all":
        return corpus
    if split not in ("train", "heldout"):
        raise ValueError(f"split must be 'train', 'heldout' or 'all', got {split!r}")
    train, heldout = corpus.split(held_out_fraction)
    return train if split == "train" else heldout


def build_dataset(corpus: "str | Corpus", tokenizer: WordPieceTokenizer, *, max_seq_len: int = 128,
                  split: str = "train", held_out_fraction: float = 0.02, seed: int = 0,
                  short_seq_prob: float = 0.05, single_segment_prob: float = 0.1, cache_dir=None,
                  num_workers: int = 0, progress: bool = True, data_dir=None) -> PretrainingDataset:
    """Examples of ``split`` of ``corpus``, built once and cached (``num_workers`` 0 = all cores)."""
    if max_seq_len < 5:
        raise ValueError(f"max_seq_len must be at least 5, got {max_seq_len}")
    if isinstance(corpus, str):
        corpus = open_corpus(corpus, data_dir=data_dir, cache_dir=cache_dir)
    part = _select_split(corpus, split, held_out_fraction)
    settings = BuildSettings(max_seq_len, short_seq_prob, single_segment_prob, seed)
    key = _cache_key(corpus, tokenizer, settings, split, held_out_fraction)
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    name = "".join(c if c.isalnum() or c in "-+." else "_" for c in corpus.name)[:60]
    directory = default_cache_dir(cache_dir) / "examples" / f"{name}-{split}-{max_seq_len}-{digest}"
    cached = _load_cached(directory, key)
    if cached is not None:
        return cached
    workers = num_workers or os.cpu_count() or 1
    remove_stale_builds(directory.parent)  # a killed build's leftovers
    tmp = directory.with_name(f"{directory.name}.tmp{os.getpid()}")
    try:
        _write_examples(part, tokenizer, settings, tmp, key=key, workers=workers,
                        progress=progress)
        shutil.rmtree(directory, ignore_errors=True)  # a stale or foreign cache
        try:
            os.replace(tmp, directory)  # atomic: a crash never leaves a half-written cache
        except OSError:  # another process finished the same build first: use theirs
            pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return PretrainingDataset(directory)


def _load_cached(directory: Path, key: dict) -> PretrainingDataset | None:
    meta_path = directory / "metadata.json"
    if not meta_path.is_file():
        return None
    try:
        meta = json.loads(meta_path.read_text())
        stored = meta.get("key")
        if stored == key:
            problem = _damage(directory, meta)
            if problem is None:
                dataset = PretrainingDataset(directory)
                log.info("examples: reusing %s (%d examples)", directory, len(dataset))
                return dataset
            log.warning("examples: cache %s is damaged (%s); rebuilding", directory, problem)
            return None
        changed = sorted(k for k in set(key) | set(stored or {})
                         if (stored or {}).get(k) != key.get(k))
        log.warning("examples: cache %s was written by other settings (%s differ); rebuilding",
                    directory, ", ".join(changed))
    except (ValueError, OSError, KeyError) as e:
        log.warning("examples: cache %s is unreadable (%s); rebuilding", directory, e)
    return None


def _damage(directory: Path, meta: dict) -> str | None:
    """What is wrong with a cache whose key matches: a file that differs from its recorded
    sha256, or (caches written before the sums were) an id outside the vocabulary."""
    if meta.get("sha256"):
        return first_damaged(directory, meta["sha256"])
    ids = np.load(directory / "input_ids.npy", mmap_mode="r")
    if ids.size and int(ids.max()) >= meta["vocab_size"]:
        return f"input_ids.npy holds id {int(ids.max())}, vocabulary size {meta['vocab_size']}"
    return None


def _write_examples(corpus: Corpus, tokenizer: WordPieceTokenizer, settings: BuildSettings,
                    directory: Path, *, key: dict, workers: int, progress: bool) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    n = settings.max_seq_len
    log.info("examples: building %s with %d worker(s) into %s", corpus.name, workers, directory)
    start, documents = time.perf_counter(), 0

    def counted(docs):
        nonlocal documents
        for doc in docs:
            documents += 1
            yield doc

    chunks = text_chunks(counted(corpus.documents()), CHUNK_CHARS)
    from ..progress import progress_bar  # tqdm: only where examples are built
    with progress_bar(desc=f"examples {corpus.name}", unit="char", unit_scale=True,
              disable=not progress) as bar:
        c = write_arrays(directory, map_chunks(chunks, tokenizer, settings, workers),
                         vocab_size=tokenizer.vocab_size, max_seq_len=n, on_chunk=bar.update)
    if c["num_examples"] == 0:
        raise ValueError(_empty_message(corpus, documents, key["held_out_fraction"]))
    metadata = {
        "key": key, "corpus": corpus.name, "split": key["split"], "max_seq_len": n,
        "vocab_size": tokenizer.vocab_size, "num_examples": c["num_examples"],
        "num_documents": documents, "num_chars": c["num_chars"],
        "text_tokens": c["text_tokens"], "example_tokens": c["example_tokens"],
        "kept_text_tokens": c["kept_text_tokens"],
        "seconds": round(time.perf_counter() - start, 3), "read_stats": corpus.stats.as_dict(),
        "sha256": sha256_sums(directory, ARRAYS)}  # checked before every reuse
    (directory / "metadata.json").write_text(json.dumps(metadata, indent=2) + "\n")
    log.info("examples: %d examples from %d documents (%.1f MB of text) in %.1f s",
             metadata["num_examples"], documents, c["num_chars"] / 1e6, metadata["seconds"])
    _warn_if_text_lost(corpus.name, c["kept_text_tokens"], c["text_tokens"], n)


def write_arrays(directory: Path, results, *, vocab_size: int, max_seq_len: int,
                 on_chunk=None) -> dict[str, int]:
    """Append built chunks (``build_chunk``'s results) to ``directory``'s three ``.npy`` files;
    returns their counts (``kept_text_tokens``: the text's tokens that made it into an example)."""
    n = max_seq_len
    writers = [_NpyAppender(directory / "input_ids.npy", id_dtype(vocab_size), (n,)),
               _NpyAppender(directory / "token_type_ids.npy", np.uint8, (n,)),
               _NpyAppender(directory / "lengths.npy", np.int32, ())]
    c = dict.fromkeys(("chunks", "num_chars", "text_tokens", "kept_text_tokens",
                       "example_tokens"), 0)
    try:
        for arrays, chunk_chars, chunk_tokens in results:
            for writer, array in zip(writers, arrays):
                writer.append(array)
            c["chunks"] += 1
            c["num_chars"] += chunk_chars
            c["text_tokens"] += chunk_tokens
            c["kept_text_tokens"] += _text_tokens_in(*arrays)
            c["example_tokens"] += int(np.asarray(arrays[2], np.int64).sum())
            if on_chunk is not None:
                on_chunk(chunk_chars)
    finally:
        for writer in writers:
            writer.close()
    return {"num_examples": writers[0].rows, **c}


def _text_tokens_in(input_ids: np.ndarray, token_type_ids: np.ndarray, lengths: np.ndarray) -> int:
    """Text tokens in packed rows: each row's length less [CLS], [SEP] and B's [SEP]."""
    return int(lengths.sum()) - 2 * len(lengths) - int(token_type_ids.any(axis=1).sum())


LOW_SURVIVAL = 0.25  # warn when less of the text than this reaches the examples


def _warn_if_text_lost(name: str, kept: int, total: int, max_len: int) -> None:
    """The official builder cuts an example's last sentence at max_len and drops the rest. With
    a sentence per line that loses little; a long paragraph per line loses most of itself."""
    if total and kept < LOW_SURVIVAL * total:
        log.warning("examples: only %.0f%% of the %d text tokens of %s are in an example; the "
                    "rest were cut at max_seq_len=%d (official behaviour). Lines are probably "
                    "paragraphs, not sentences: split them into sentences, or raise max_seq_len.",
                    100 * kept / total, total, name, max_len)


def _empty_message(corpus: Corpus, documents: int, held_out_fraction: float) -> str:
    message = f"corpus {corpus.name!r} is empty: {documents} documents, no tokens to make examples of"
    if "[heldout" in corpus.name:
        message += (f"; no document fell into the held-out fraction {held_out_fraction} "
                    "(use a larger corpus or held_out_fraction)")
    skipped = corpus.stats.skipped
    if skipped:
        message += f"; skipped files: {skipped}"
    return message


# ----------------------------------------------------------------------------------- batches
def batch_iterator(dataset: PretrainingDataset, batch_size: int, *, seed: int = 0, start: int = 0,
                   device: str | torch.device = "cpu", shuffle: bool = True, loop: bool = True,
                   rank: int = 0, world_size: int = 1) -> Iterator[dict[str, torch.Tensor]]:
    """Batches of ``input_ids``, ``attention_mask``, ``token_type_ids`` (b, n) int64.

    ``start`` batches already consumed: a resumed run continues with exactly the batch it would
    have seen. Each epoch is a permutation drawn from (seed, epoch), its last incomplete batch
    dropped; pinned on a cuda ``device``. With ``world_size`` > 1 each rank reads only its
    ``rank``-th slice of every global batch of ``batch_size`` (data-parallel training).
    """
    if world_size < 1 or not 0 <= rank < world_size or batch_size % world_size:
        raise ValueError(f"batch_size {batch_size} must split evenly over world_size "
                         f"{world_size} (rank {rank})")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    if len(dataset) < batch_size:
        raise ValueError(f"{dataset!r} ({dataset.directory}) has {len(dataset)} examples, fewer "
                         f"than one batch of {batch_size}: use a larger corpus or a smaller "
                         "batch_size")
    if start < 0:
        raise ValueError(f"start must be >= 0, got {start}")
    pin = torch.device(device).type == "cuda" and torch.cuda.is_available()
    per_epoch = len(dataset) // batch_size
    epoch, first = divmod(start, per_epoch)
    while loop or epoch == 0:
        order = (np.random.default_rng([seed, epoch]).permutation(len(dataset)) if shuffle
                 else np.arange(len(dataset)))
        part = batch_size // world_size
        for b in range(first, per_epoch):
            begin = b * batch_size + rank * part
            yield collate(dataset, order[begin:begin + part], pin)
        epoch, first = epoch + 1, 0


def prefetch(batches: Iterator[dict], depth: int = 2) -> Iterator[dict]:
    """``batches``, assembled ``depth`` ahead in a background thread: the gather from the
    memory-mapped arrays and the copy into pinned memory overlap the GPU's step (numpy and torch
    release the GIL while they copy). Same batches, same order; an error is raised here."""
    done, ready = object(), queue.Queue(depth)

    def work():
        try:
            for batch in batches:
                ready.put(batch)
        except Exception as e:  # handed to the consumer
            ready.put(e)
        ready.put(done)
    threading.Thread(target=work, daemon=True, name="prefetch").start()
    while (item := ready.get()) is not done:
        if isinstance(item, Exception):
            raise item
        yield item

