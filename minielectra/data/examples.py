"""Pre-training examples: the official ExampleBuilder, packed into fixed-length rows.

ELECTRA's examples are BERT's without next-sentence prediction (google-research/electra
``build_pretraining_dataset.py``; paper section 3.1): sentences accumulate up to a target length
(random in [5, max_len] with probability 0.05), split into segments A and B (one segment with
probability 0.1), laid out ``[CLS] A [SEP] B [SEP]``. Axis letters: b batch, n sequence.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from .tokenizer import WordPieceTokenizer


# ----------------------------------------------------------------------------- example builder
class ExampleBuilder:
    """The official ExampleBuilder, on sentence *lengths*: an example is two lists of sentence
    indices (segment A, segment B). Random draws happen in the official order, so a port that
    works on token lists with the same ``random.Random`` makes the same examples."""

    def __init__(self, rng: random.Random, *, max_len: int = 128, short_seq_prob: float = 0.05,
                 single_segment_prob: float = 0.1):
        self.rng = rng
        self.max_len = max_len
        self.short_seq_prob = short_seq_prob
        self.single_segment_prob = single_segment_prob
        self.target_len = max_len
        self._sentences: list[tuple[int, int]] = []  # (sentence index, number of tokens)
        self._length = 0

    def add_document(self, sentences) -> list[tuple[list[int], list[int]]]:
        """Feed one document's ``(index, length)`` sentences; returns the finished examples."""
        examples = []
        for index, length in sentences:
            self._sentences.append((index, length))
            self._length += length
            if self._length >= self.target_len:
                examples.append(self._create_example())
        if self._length > 0:  # the end of a document ends an example: none spans two documents
            examples.append(self._create_example())
        self._sentences, self._length = [], 0
        return examples

    def _create_example(self) -> tuple[list[int], list[int]]:
        rng = self.rng
        if rng.random() < self.single_segment_prob:  # like single-sentence fine-tuning tasks
            first_target = 100000
        else:
            first_target = (self.target_len - 3) // 2  # -3: [CLS], [SEP], [SEP] come later
        a, b, len_a, len_b = [], [], 0, 0
        for index, length in self._sentences:
            # A takes the sentence if A is empty, if it still fits, or on a coin flip when it
            # would overshoot and B is still empty. (Official quirk: a later short sentence can
            # go back to A after B has started, so A and B may interleave in the text.)
            if (len_a == 0 or len_a + length < first_target or
                    (len_b == 0 and len_a < first_target and rng.random() < 0.5)):
                a.append(index)
                len_a += length
            else:
                b.append(index)
                len_b += length
        self._sentences, self._length = [], 0
        if rng.random() < self.short_seq_prob:  # some short inputs, as fine-tuning will have
            self.target_len = rng.randint(5, self.max_len)
        else:
            self.target_len = self.max_len
        return a, b


def pack_examples(examples, tokens: np.ndarray, starts: np.ndarray, lengths: np.ndarray, *,
                  max_len: int, cls_id: int, sep_id: int, dtype=np.int32):
    """``[CLS] A [SEP] B [SEP]`` rows (n_examples, n) from sentence-index examples, the official
    way: A is cut to max_len - 2 tokens, B to what is left (an emptied B makes one segment).
    Like the official code, this drops the tokens of the last sentence that do not fit."""
    input_ids = np.zeros((len(examples), max_len), dtype)
    token_type_ids = np.zeros((len(examples), max_len), np.uint8)
    example_lengths = np.zeros(len(examples), np.int32)
    empty = np.zeros(0, tokens.dtype)

    def segment(indices):
        parts = [tokens[starts[i]:starts[i] + lengths[i]] for i in indices]
        return np.concatenate(parts) if parts else empty

    for e, (a_indices, b_indices) in enumerate(examples):
        a = segment(a_indices)[:max_len - 2]
        b = segment(b_indices)[:max(0, max_len - len(a) - 3)]
        row = input_ids[e]
        row[0], row[1:1 + len(a)], row[1 + len(a)] = cls_id, a, sep_id
        n = len(a) + 2
        if len(b):
            row[n:n + len(b)], row[n + len(b)] = b, sep_id
            token_type_ids[e, n:n + len(b) + 1] = 1
            n += len(b) + 1
        example_lengths[e] = n
    return input_ids, token_type_ids, example_lengths


@dataclass(frozen=True)
class BuildSettings:
    max_seq_len: int = 128
    short_seq_prob: float = 0.05
    single_segment_prob: float = 0.1
    seed: int = 0


def build_chunk(index: int, documents: list[list[str]], tokenizer: WordPieceTokenizer,
                settings: BuildSettings):
    """Tokenise and pack one chunk of documents; its random stream depends only on (seed, index)."""
    lines = [line for doc in documents for line in doc]
    tokens, lengths = tokenizer.encode_ragged(lines)
    starts = np.cumsum(lengths) - lengths
    # Deliberate difference from the official builder, which runs one ExampleBuilder over the
    # whole corpus: each chunk restarts it, with its own random stream and a full target length.
    # The only state the official builder carries across documents is that random stream and a
    # pending short target, so the examples follow the same rules and statistics, and the output
    # no longer depends on how many processes built it.
    builder = ExampleBuilder(random.Random(f"{settings.seed}:{index}"),
                             max_len=settings.max_seq_len, short_seq_prob=settings.short_seq_prob,
                             single_segment_prob=settings.single_segment_prob)
    examples, first = [], 0
    for doc in documents:
        sentence_ids = range(first, first + len(doc))
        examples += builder.add_document(zip(sentence_ids, lengths[first:first + len(doc)].tolist()))
        first += len(doc)
    arrays = pack_examples(examples, tokens, starts, lengths, max_len=settings.max_seq_len,
                           cls_id=tokenizer.cls_id, sep_id=tokenizer.sep_id,
                           dtype=id_dtype(tokenizer.vocab_size))
    return arrays, sum(map(len, lines)), len(tokens)


def id_dtype(vocab_size: int):
    return np.uint16 if vocab_size <= 1 << 16 else np.int32  # uint16 halves the disk and I/O
