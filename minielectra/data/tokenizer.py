"""WordPiece tokenisation with BERT-uncased normalisation, through the Rust `tokenizers` library.

:class:`WordPieceTokenizer` loads a ``vocab.txt`` (line number = id, as in google-research/bert)
or trains one on a corpus; it is saved with every checkpoint. Real text repeats its words (Zipf),
so :meth:`WordPieceTokenizer.encode_batch` tokenises each distinct word once and reuses the ids:
exact, because BERT's pre-tokeniser never joins pieces across whitespace (``_SPLIT_UNSAFE``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

import numpy as np
import tokenizers
from tokenizers import (AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers,
                        trainers)

from ..safeio import remove_stale_builds, write_file
from .alphabet import continuation_symbols
from .files import first_damaged, sha256_sums

if TYPE_CHECKING:
    from ..config import DataConfig
    from .corpus import Corpus

log = logging.getLogger(__name__)

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
# Characters that Python's str.split() treats as whitespace but BERT's normaliser deletes as
# control characters ("a\x0cb" is one word to BERT). Deleting them first makes the split exact.
# NUL too (BERT deletes it): then no text contains _END, which marks the ends of texts.
_SPLIT_UNSAFE = re.compile("[\x00\x0b\x0c\x1c-\x1f\x85]")
_END = "\x00"
_MAX_CACHED_WORDS = 1_000_000  # bounds the word cache's memory (~100 MB) on endless streams
# Cap on the text used to train a vocabulary from a corpus: enough for stable statistics, and
# it keeps streamed web-scale corpora from being read whole.
TRAIN_VOCAB_MAX_CHARS = 200_000_000
MAX_INPUT_CHARS_PER_WORD = 100  # BERT's: a longer word is one [UNK]
# Bump when this module's encoding or training changes; with the `tokenizers` version it is part
# of every cache key, so ids made by another version of the code are rebuilt, never reused.
TOKENIZER_VERSION = 2


def _bert_tokenizer(vocab: dict[str, int] | None, lowercase: bool) -> Tokenizer:
    """A `tokenizers.Tokenizer` configured exactly like BERT's BasicTokenizer + WordpieceTokenizer
    (``vocab=None``: empty, to be trained)."""
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]",
                                     max_input_chars_per_word=MAX_INPUT_CHARS_PER_WORD))
    tok.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=lowercase, lowercase=lowercase)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    if vocab is not None:  # "[MASK]" in raw text is the mask token, not "[", "mask", "]" (BERT)
        tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    return tok


def _read_vocab_file(path: Path) -> list[str]:
    """The tokens of a WordPiece ``vocab.txt``, checked so that a wrong file fails loudly."""
    if not path.is_file():
        raise FileNotFoundError(f"vocab file {path} does not exist")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path} is not a WordPiece vocab: not UTF-8 text ({e})") from None
    tokens = text.replace("\r\n", "\n").split("\n")
    if tokens and tokens[-1] == "":
        tokens.pop()  # the final newline
    seen: dict[str, int] = {}
    for line_no, token in enumerate(tokens, start=1):
        if not token or any(c.isspace() for c in token):
            raise ValueError(f"{path} is not a WordPiece vocab: line {line_no} {token!r} is not a "
                             "single token (a vocab.txt has one token per line, no spaces)")
        if token in seen:
            raise ValueError(f"{path} is not a WordPiece vocab: token {token!r} on lines "
                             f"{seen[token]} and {line_no}")
        seen[token] = line_no
    missing = [t for t in SPECIAL_TOKENS if t not in seen]
    if missing:
        raise ValueError(f"{path} is not a WordPiece vocab: special token(s) {missing} missing "
                         f"(need all of {list(SPECIAL_TOKENS)})")
    return tokens


class WordPieceTokenizer:
    """BERT-style WordPiece tokenizer; ids are line numbers of its ``vocab.txt``."""

    def __init__(self, tokens: list[str], *, lowercase: bool = True):
        self.tokens = list(tokens)
        self.lowercase = lowercase
        ids = {t: i for i, t in enumerate(self.tokens)}
        self._tokenizer = _bert_tokenizer(ids, lowercase)
        self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id = (
            ids[t] for t in SPECIAL_TOKENS)
        self.special_ids = frozenset(ids[t] for t in SPECIAL_TOKENS)
        self._reset_word_cache()

    # ------------------------------------------------------------------ construction and storage
    @classmethod
    def from_vocab_file(cls, path, *, lowercase: bool = True) -> "WordPieceTokenizer":
        return cls(_read_vocab_file(Path(path)), lowercase=lowercase)

    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int, *, lowercase: bool = True
              ) -> "WordPieceTokenizer":
        """Learn a vocabulary of (at most) ``vocab_size`` tokens; the specials get ids 0..4."""
        if vocab_size <= len(SPECIAL_TOKENS):
            raise ValueError(f"vocab_size must exceed {len(SPECIAL_TOKENS)}, got {vocab_size}")
        tok = _bert_tokenizer(None, lowercase)
        if iter(texts) is texts:  # read twice below: a one-pass iterator is kept in memory
            texts = list(texts)
        # "##c" symbols numbered ahead of training, sorted: a reproducible vocabulary (.alphabet)
        trainer = trainers.WordPieceTrainer(
            vocab_size=vocab_size, show_progress=False, continuing_subword_prefix="##",
            special_tokens=[*SPECIAL_TOKENS, *continuation_symbols(texts, tok.normalizer)])
        tok.train_from_iterator(texts, trainer)
        vocab = tok.get_vocab(with_added_tokens=True)
        if len(vocab) <= len(SPECIAL_TOKENS):
            raise ValueError("cannot train a vocabulary: the training text is empty")
        # The Rust trainer numbers its alphabet in hash-map order (a different order each run);
        # sorting the learnt tokens makes the ids, and everything built on them, reproducible.
        learnt = sorted(t for t in vocab if t not in SPECIAL_TOKENS)
        return cls([*SPECIAL_TOKENS, *learnt], lowercase=lowercase)

    def save(self, directory) -> None:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        write_file(directory / "vocab.txt", "\n".join(self.tokens) + "\n")  # never via a link
        # transformers' BertTokenizer reads this key too, so the folder also loads there.
        config = {"do_lower_case": self.lowercase, "tokenizer_class": "BertTokenizer"}
        write_file(directory / "tokenizer_config.json", json.dumps(config, indent=2) + "\n")

    @classmethod
    def load(cls, directory) -> "WordPieceTokenizer":
        directory = Path(directory)
        config_path = directory / "tokenizer_config.json"
        try:
            config = json.loads(config_path.read_text()) if config_path.is_file() else {}
        except (ValueError, UnicodeDecodeError) as e:
            raise ValueError(f"{config_path} is not a tokenizer config (JSON): {e}") from None
        if not isinstance(config.get("do_lower_case", True), bool):
            raise ValueError(f"{config_path}: do_lower_case must be true or false, got "
                             f"{config['do_lower_case']!r}")
        return cls.from_vocab_file(directory / "vocab.txt",
                                   lowercase=config.get("do_lower_case", True))

    @property
    def vocab_size(self) -> int:
        return len(self.tokens)

    @property
    def vocab_hash(self) -> str:
        """Identifies the vocabulary and normalisation (a cache key for tokenised data)."""
        text = "\n".join(self.tokens) + f"\nlowercase={self.lowercase}"
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

    @property
    def settings(self) -> dict:
        """Everything the ids of a text depend on (the cache key of tokenised data): the
        vocabulary, the normalisation, and the versions of this code and of `tokenizers`."""
        return {"vocab_hash": self.vocab_hash, "lowercase": self.lowercase,
                "strip_accents": self.lowercase,
                "max_input_chars_per_word": MAX_INPUT_CHARS_PER_WORD,
                "version": TOKENIZER_VERSION, "tokenizers": tokenizers.__version__}

    def __getstate__(self):  # pickled into worker processes: the word cache stays behind
        return {"tokens": self.tokens, "lowercase": self.lowercase}

    def __setstate__(self, state):
        self.__init__(state["tokens"], lowercase=state["lowercase"])

    def __repr__(self) -> str:
        return f"WordPieceTokenizer(vocab_size={self.vocab_size}, lowercase={self.lowercase})"

    # ------------------------------------------------------------------------------ encoding
    def encode_ragged(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """The ids of all ``texts`` in one flat array, and each text's number of tokens: each
        distinct word tokenised once, a text's ids then gathered with numpy."""
        if not texts:
            return np.zeros(0, np.int32), np.zeros(0, np.int64)
        if _SPLIT_UNSAFE.search("\n".join(texts)):
            texts = [_SPLIT_UNSAFE.sub("", t) for t in texts]
        # One split of everything is 3x faster than one per text; the NUL "word" (no text has
        # one any more, and it has no tokens) marks where each text ends.
        words = f" {_END} ".join(texts).split()
        new = [w for w in set(words) if w not in self._word_index]
        if len(self._word_index) + len(new) > _MAX_CACHED_WORDS:
            self._reset_word_cache()
            new = [w for w in set(words) if w not in self._word_index]
        if new:
            self._add_words(new)
        word_ids = np.fromiter(map(self._word_index.__getitem__, words), np.int64, len(words))
        counts = self._word_count[word_ids]
        ids = self._word_pieces[_ragged_positions(self._word_start[word_ids], counts)]
        tokens_before = np.concatenate([[0], np.cumsum(counts)])
        text_ends = np.flatnonzero(word_ids == 0)  # _END has word id 0
        return ids, np.diff(tokens_before[np.concatenate([[0], text_ends, [len(words)]])])

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        """Token ids of each text, without special tokens."""
        ids, lengths = self.encode_ragged(texts)
        return [part.tolist() for part in np.split(ids, np.cumsum(lengths)[:-1])] if texts else []

    def _reset_word_cache(self) -> None:
        self._word_index: dict[str, int] = {_END: 0}
        self._word_start = np.zeros(1, np.int64)  # where word k's ids begin in _word_pieces
        self._word_count = np.zeros(1, np.int64)  # how many ids word k has (_END: none)
        self._word_pieces = np.zeros(0, np.int32)

    def _add_words(self, words: list[str]) -> None:
        pieces, counts = self._tokenize_words(words)
        n = len(self._word_index)
        self._word_index.update(zip(words, range(n, n + len(words))))
        starts = len(self._word_pieces) + np.cumsum(counts) - counts
        self._word_start = np.concatenate([self._word_start, starts])
        self._word_count = np.concatenate([self._word_count, counts])
        self._word_pieces = np.concatenate([self._word_pieces, pieces])

    def _tokenize_words(self, words: list[str], group: int = 64) -> tuple[np.ndarray, np.ndarray]:
        """Ids of distinct words, and how many each has; 64 words share one string because
        one Rust call per word costs more than the tokenisation itself. Token offsets tell
        which word a token came from."""
        pieces, counts = [], []
        groups = [words[i:i + group] for i in range(0, len(words), group)]
        encodings = self._tokenizer.encode_batch([" ".join(g) for g in groups],
                                                 add_special_tokens=False)
        for g, enc in zip(groups, encodings):
            word_starts = np.cumsum([0] + [len(w) + 1 for w in g[:-1]])
            token_starts = np.array([start for start, _ in enc.offsets], np.int64)
            word_of_token = np.searchsorted(word_starts, token_starts, side="right") - 1
            counts.append(np.bincount(word_of_token, minlength=len(g)))
            pieces.append(np.array(enc.ids, np.int32))
        return np.concatenate(pieces), np.concatenate(counts).astype(np.int64)

    def encode(self, text: str) -> list[int]:
        return self.encode_batch([text])[0]

    def encode_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """Ids of ``text`` (no specials) and each token's ``(start, end)`` character span in the
        original ``text``, accents and case included (question answering cuts answers by them)."""
        enc = self._tokenizer.encode(text, add_special_tokens=False)
        return list(enc.ids), [tuple(o) for o in enc.offsets]

    def encode_pair(self, text_a: str, text_b: str | None = None, *, max_len: int = 128
                    ) -> tuple[list[int], list[int]]:
        """``[CLS] A [SEP] (B [SEP])`` and its segment ids, truncated longest-first to max_len."""
        a = self.encode(text_a)
        b = self.encode(text_b) if text_b is not None else []
        budget = max_len - (3 if text_b is not None else 2)
        if budget < 0:
            raise ValueError(f"max_len {max_len} leaves no room for [CLS]/[SEP]")
        # Official BERT/ELECTRA _truncate_seq_pair: drop the last token of the longer segment
        # (of B on ties) until the pair fits, so a short question survives a long passage.
        while len(a) + len(b) > budget:
            (a if len(a) > len(b) else b).pop()
        ids = [self.cls_id] + a + [self.sep_id]
        types = [0] * len(ids)
        if text_b is not None:
            ids += b + [self.sep_id]
            types += [1] * (len(b) + 1)
        return ids, types

    # ------------------------------------------------------------------------------ decoding
    def convert_ids_to_tokens(self, ids) -> list[str]:
        tokens = []
        for i in ids:
            i = int(i)
            if not 0 <= i < self.vocab_size:
                raise IndexError(f"token id {i} outside the vocabulary (size {self.vocab_size})")
            tokens.append(self.tokens[i])
        return tokens

    def token_to_id(self, token: str) -> int:
        i = self._tokenizer.token_to_id(token)
        if i is None:
            raise KeyError(f"token {token!r} is not in the vocabulary (size {self.vocab_size})")
        return i

    def decode(self, ids, *, skip_special_tokens: bool = False) -> str:
        self.convert_ids_to_tokens(ids)  # range check with a clear error
        return self._tokenizer.decode([int(i) for i in ids],
                                      skip_special_tokens=skip_special_tokens)


# ------------------------------------------------------------------------------ from the config
def bert_uncased(what: str, data_dir=None) -> WordPieceTokenizer:
    """BERT's uncased vocabulary from the data dir; ``what`` names the setting that asked."""
    from .corpus import find_data_dir
    root = find_data_dir(data_dir)
    path = root / "vocab" / "bert-base-uncased-vocab.txt" if root else None
    if path is None or not path.is_file():
        raise FileNotFoundError(
            f"{what} needs {path or '<data dir>/vocab/bert-base-uncased-vocab.txt'}; set "
            "MINIELECTRA_DATA_DIR to a data dir that has it, or give a vocab.txt instead")
    return WordPieceTokenizer.from_vocab_file(path)


def resolve_tokenizer(data_cfg: "DataConfig", corpus: "Corpus | None" = None, *, data_dir=None
                      ) -> WordPieceTokenizer:
    """The tokenizer ``data_cfg.vocab`` names: a vocab.txt path, "bert-uncased", or None: trained
    on ``corpus`` (default: the train split of ``data_cfg.corpus``) and cached."""
    from .corpus import default_cache_dir, open_corpus

    if data_cfg.vocab == "bert-uncased":
        return bert_uncased("data.vocab='bert-uncased'", data_dir)
    if data_cfg.vocab:
        return WordPieceTokenizer.from_vocab_file(data_cfg.vocab)
    if corpus is None:
        corpus = open_corpus(data_cfg.corpus, data_dir=data_dir, cache_dir=data_cfg.cache_dir)
        corpus = corpus.split(data_cfg.held_out_fraction)[0]  # never learn from held-out text
    return _train_cached(corpus, data_cfg.vocab_size, default_cache_dir(data_cfg.cache_dir))


def _train_cached(corpus: "Corpus", vocab_size: int, cache_dir: Path) -> WordPieceTokenizer:
    # The learnt vocabulary depends on the trainer's code as well as the text and the size.
    settings = {"corpus": corpus.fingerprint, "vocab_size": vocab_size, "lowercase": True,
                "max_chars": TRAIN_VOCAB_MAX_CHARS, "version": TOKENIZER_VERSION,
                "tokenizers": tokenizers.__version__}
    key = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]
    directory = cache_dir / "tokenizers" / f"{_safe_name(corpus.name)}-{vocab_size}-{key}"
    cached = _load_trained(directory, corpus.name)
    if cached is not None:
        return cached
    log.info("tokenizer: training a %d-token WordPiece vocabulary on %s", vocab_size, corpus.name)
    try:
        tokenizer = WordPieceTokenizer.train(_CappedTexts(corpus), vocab_size)
    except ValueError as e:  # named once: a corpus file's own error names it already
        raise ValueError(str(e) if str(e).startswith("corpus ") else
                         f"corpus {corpus.name!r}: {e}") from None
    remove_stale_builds(directory.parent)  # a killed build's leftovers
    tmp = directory.with_name(f"{directory.name}.tmp{os.getpid()}")
    tokenizer.save(tmp)
    (tmp / TRAINED).write_text(json.dumps({"sha256": sha256_sums(tmp, ["vocab.txt"])}) + "\n")
    shutil.rmtree(directory, ignore_errors=True)  # a damaged one (_load_trained said so)
    try:
        os.replace(tmp, directory)  # atomic: an interrupted run leaves no half-written vocab
    except OSError:  # another process saved the same vocabulary first
        shutil.rmtree(tmp, ignore_errors=True)
    return tokenizer


TRAINED = "trained.json"  # the sha256 of a cached vocab.txt, checked before it is reused


def _load_trained(directory: Path, corpus_name: str) -> WordPieceTokenizer | None:
    """The vocabulary cached in ``directory``, or None: absent, or damaged (a vocab.txt cut short
    still loads, as a smaller vocabulary, and every id after the cut would silently change)."""
    if not (directory / "vocab.txt").is_file():
        return None
    if not (directory / TRAINED).is_file():
        log.info("tokenizer: %s was cached before its sha256 was recorded; training it again",
                 directory)
        return None
    try:
        sums = json.loads((directory / TRAINED).read_text())["sha256"]
        problem = first_damaged(directory, sums)
    except (OSError, ValueError, KeyError, TypeError) as e:
        problem = f"{directory / TRAINED}: unreadable ({e.__class__.__name__})"
    if problem is not None:
        log.warning("tokenizer: cached vocabulary %s is damaged (%s); training it again",
                    directory, problem)
        return None
    log.info("tokenizer: reusing the vocabulary trained on %s in %s", corpus_name, directory)
    return WordPieceTokenizer.load(directory)


def _ragged_positions(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``[s0, s0+1, .., s0+c0-1, s1, ..]``: the positions of runs of lengths ``counts``."""
    run_offsets = np.cumsum(counts) - counts
    return np.repeat(starts - run_offsets, counts) + np.arange(int(counts.sum()))


class _CappedTexts:
    """A corpus's texts up to ``TRAIN_VOCAB_MAX_CHARS``, from the start each time it is read
    (the trainer reads them twice)."""

    def __init__(self, corpus: "Corpus"):
        self.corpus = corpus

    def __iter__(self):
        total = 0
        for t in self.corpus.texts():
            yield t
            total += len(t)
            if total >= TRAIN_VOCAB_MAX_CHARS:
                log.info("tokenizer: vocabulary trained on the first %d characters", total)
                return


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.+-]+", "_", name)[:60]
