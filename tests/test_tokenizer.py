"""WordPieceTokenizer: BERT agreement, the word cache's exactness, training, storage, bad vocabs."""

import gzip
import hashlib
import json
import logging
import random
import unicodedata

import pytest

from minielectra.config import DataConfig
from minielectra.data import tokenizer as data_tokenizer
from minielectra.data.tokenizer import SPECIAL_TOKENS, WordPieceTokenizer, resolve_tokenizer

TEXT = ["The quick brown fox jumps over the lazy dog.", "Héllo wörld, naïve café!",
        "Don't stop-believing: 3.14159 is π.", "unaffable tokenization [MASK] here"]
# Whitespace and control characters that Python and BERT treat differently, accents, CJK,
# zero-width and replacement characters, special tokens glued to words.
TRICKY_ALPHABET = "aAéÉ zZ\t\x0b\x0c\x1c\x1f\x85\u2028\u3000\u200b中[MASK]!,.'-\ufffd\x00ß\u0301"


def random_strings(n, seed=0):
    rng = random.Random(seed)
    return ["".join(rng.choice(TRICKY_ALPHABET) for _ in range(rng.randint(0, 40))) for _ in range(n)]


@pytest.fixture(scope="module")
def small_tokenizer():
    words = "the quick brown fox jumps over lazy dog tokenization token ##s".split()
    return WordPieceTokenizer.train(TEXT * 20 + [" ".join(words)] * 20, vocab_size=120)


@pytest.fixture(scope="module")
def bert(data_dir):
    return WordPieceTokenizer.from_vocab_file(data_dir / "vocab" / "bert-base-uncased-vocab.txt")


# ------------------------------------------------------------------------------- BERT vocab
@pytest.mark.integration
def test_bert_vocab_special_ids(bert):
    assert bert.vocab_size == 30522
    assert (bert.pad_id, bert.unk_id, bert.cls_id, bert.sep_id, bert.mask_id) == (0, 100, 101, 102, 103)
    assert bert.special_ids == {0, 100, 101, 102, 103}
    assert bert.token_to_id("[MASK]") == 103 and bert.convert_ids_to_tokens([101, 102]) == ["[CLS]", "[SEP]"]


@pytest.mark.integration
def test_agrees_with_transformers_python_bert_tokenizer(bert, data_dir):
    """Reference: transformers' pure-Python BERT tokenizer (a port of google-research/bert)."""
    transformers = pytest.importorskip("transformers")
    legacy = getattr(transformers.models.bert, "BertTokenizerLegacy", transformers.BertTokenizer)
    ref = legacy(str(data_dir / "vocab" / "bert-base-uncased-vocab.txt"), do_lower_case=True)
    with gzip.open(data_dir / "wikitext-2-raw" / "wiki.valid.raw.gz", "rt", encoding="utf-8") as f:
        lines = [ln.strip() for ln in f if ln.strip()][:300]
    texts = lines + TEXT + ["Ünïcödé ÀÉÎÕÜ ﬁ straße 東京 naïve"]
    assert bert.encode_batch(texts) == [ref.encode(t, add_special_tokens=False) for t in texts]
    for a, b in zip(lines[:20], lines[20:40]):  # pairs: longest-first truncation, segment ids
        ids, types = bert.encode_pair(a, b, max_len=64)
        expected = ref(a, b, max_length=64, truncation="longest_first", return_token_type_ids=True)
        assert ids == expected["input_ids"] and types == expected["token_type_ids"]


@pytest.mark.integration
def test_agrees_with_transformers_fast_tokenizer_on_tricky_text(bert, data_dir):
    transformers = pytest.importorskip("transformers")
    ref = transformers.BertTokenizerFast(str(data_dir / "vocab" / "bert-base-uncased-vocab.txt"))
    texts = random_strings(500, seed=1)
    assert bert.encode_batch(texts) == ref(texts, add_special_tokens=False)["input_ids"]


BERT_VOCAB_SHA256 = "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"  # MANIFEST.md


def bert_normalised(text: str) -> str:
    """BERT-uncased normalisation written out with unicodedata (google-research/bert
    tokenization.py: lower case, NFD, drop combining marks), whitespace removed."""
    text = unicodedata.normalize("NFD", text.lower())
    return "".join(c for c in text if unicodedata.category(c) != "Mn" and not c.isspace())


@pytest.mark.integration
def test_round_trip_with_the_real_bert_vocab(bert, data_dir, tmp_path):
    """encode -> decode -> encode gives the same ids; the decoded text is the normalised input
    (up to spaces); the vocab saved with a checkpoint is the released file, byte for byte."""
    with gzip.open(data_dir / "wikitext-2-raw" / "wiki.test.raw.gz", "rt", encoding="utf-8") as f:
        lines = [ln.strip() for ln in f if ln.strip()][:400]
    texts = lines + TEXT + ["Ünïcödé ÀÉÎÕÜ straße naïve café"]
    ids = bert.encode_batch(texts)
    checked = 0
    for text, row in zip(texts, ids):
        decoded = bert.decode(row)
        assert bert.encode(decoded) == row, text
        if not bert.special_ids & set(row):  # [UNK] hides its text; "[MASK]" keeps its case
            assert "".join(decoded.split()) == bert_normalised(text), text
            checked += 1
    assert checked > 350
    bert.save(tmp_path / "ckpt")
    saved = (tmp_path / "ckpt" / "vocab.txt").read_bytes()
    assert hashlib.sha256(saved).hexdigest() == BERT_VOCAB_SHA256
    loaded = WordPieceTokenizer.load(tmp_path / "ckpt")
    assert loaded.settings == bert.settings and loaded.encode_batch(texts) == ids


# ----------------------------------------------------------------------------- word cache
def test_word_cache_equals_whole_line_tokenisation(small_tokenizer, monkeypatch):
    """Reference: the Rust tokenizer run on each whole line (no word cache)."""
    texts = random_strings(3000) + TEXT + ["[MASK][SEP]x", "a[MASK]b", "x" * 150 + " ok", ""]
    reference = [e.ids for e in small_tokenizer._tokenizer.encode_batch(texts, add_special_tokens=False)]
    assert small_tokenizer.encode_batch(texts) == reference
    assert small_tokenizer.encode_batch(texts) == reference  # second pass: from the cache
    monkeypatch.setattr(data_tokenizer, "_MAX_CACHED_WORDS", 50)  # forces cache resets
    fresh = WordPieceTokenizer(small_tokenizer.tokens)
    assert [fresh.encode(t) for t in texts[:200]] == reference[:200]
    assert len(fresh._word_index) <= 50 + 40


# ------------------------------------------------------------------------------- training
def test_train_puts_specials_first_and_learns_frequent_words():
    texts = ["the cat sat on the mat", "the dog sat on the log"] * 50
    tok = WordPieceTokenizer.train(texts, vocab_size=60)
    assert tok.tokens[:5] == list(SPECIAL_TOKENS)
    assert (tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id) == (0, 1, 2, 3, 4)
    assert tok.vocab_size <= 60
    assert tok.convert_ids_to_tokens(tok.encode("the cat sat")) == ["the", "cat", "sat"]
    assert tok.decode(tok.encode("The  CÀT sat")) == "the cat sat"  # lower case, no accents
    assert tok.encode("sat ?") == [tok.token_to_id("sat"), tok.unk_id]  # "?" was never seen
    again = WordPieceTokenizer.train(texts, vocab_size=60)
    assert again.tokens == tok.tokens  # training is deterministic


def test_train_rejects_empty_text_and_tiny_sizes():
    with pytest.raises(ValueError, match="empty"):
        WordPieceTokenizer.train([], vocab_size=100)
    with pytest.raises(ValueError, match="vocab_size"):
        WordPieceTokenizer.train(["a b"], vocab_size=5)


def test_save_load_round_trip(small_tokenizer, tmp_path):
    small_tokenizer.save(tmp_path / "tok")
    assert (tmp_path / "tok" / "vocab.txt").read_text().split("\n")[:5] == list(SPECIAL_TOKENS)
    loaded = WordPieceTokenizer.load(tmp_path / "tok")
    assert loaded.tokens == small_tokenizer.tokens and loaded.vocab_hash == small_tokenizer.vocab_hash
    texts = random_strings(200, seed=3) + TEXT
    assert loaded.encode_batch(texts) == small_tokenizer.encode_batch(texts)
    cased = WordPieceTokenizer(small_tokenizer.tokens, lowercase=False)
    cased.save(tmp_path / "cased")
    assert WordPieceTokenizer.load(tmp_path / "cased").lowercase is False
    assert cased.vocab_hash != small_tokenizer.vocab_hash


def test_decode_round_trip(small_tokenizer):
    for text in TEXT:
        ids = small_tokenizer.encode(text)
        assert small_tokenizer.encode(small_tokenizer.decode(ids)) == ids


# ----------------------------------------------------------------------------- pairs
def official_truncate_seq_pair(a, b, max_tokens):
    """google-research/bert run_classifier.py _truncate_seq_pair, verbatim logic."""
    while len(a) + len(b) > max_tokens:
        if len(a) > len(b):
            a.pop()
        else:
            b.pop()


def test_encode_pair_truncates_longest_first(small_tokenizer):
    rng = random.Random(0)
    words = "the quick brown fox jumps over lazy dog".split()
    for _ in range(200):
        text_a = " ".join(rng.choices(words, k=rng.randint(0, 30)))
        text_b = " ".join(rng.choices(words, k=rng.randint(0, 30)))
        max_len = rng.randint(3, 40)
        a, b = small_tokenizer.encode(text_a), small_tokenizer.encode(text_b)
        official_truncate_seq_pair(a, b, max_len - 3)
        ids, types = small_tokenizer.encode_pair(text_a, text_b, max_len=max_len)
        cls, sep = small_tokenizer.cls_id, small_tokenizer.sep_id
        assert ids == [cls] + a + [sep] + b + [sep]
        assert types == [0] * (len(a) + 2) + [1] * (len(b) + 1)
    ids, types = small_tokenizer.encode_pair("the fox " * 50, max_len=10)
    assert len(ids) == 10 and ids[-1] == small_tokenizer.sep_id and set(types) == {0}


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("content, message", [
    (json.dumps({"version": "1.0", "model": {}}), "line 1"),                 # a tokenizer.json
    ("#version: 0.2\nt h\nth e\n", "not a single token"),                    # BPE merges
    ("[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n", r"\['\[MASK\]'\] missing"),       # no [MASK]
    ("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\nb\na\n", "'a' on lines 6 and 8"),  # duplicate
    ("▁the\t-3.1\n", "not a single token"),                                   # sentencepiece
])
def test_not_a_wordpiece_vocab_is_rejected_with_file_and_line(tmp_path, content, message):
    path = tmp_path / "vocab.txt"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=message) as error:
        WordPieceTokenizer.from_vocab_file(path)
    assert str(path) in str(error.value)


def test_binary_or_missing_vocab_file(tmp_path):
    path = tmp_path / "vocab.bin"
    path.write_bytes(b"\xff\xfe\x00\x01" * 10)
    with pytest.raises(ValueError, match="not UTF-8"):
        WordPieceTokenizer.from_vocab_file(path)
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        WordPieceTokenizer.from_vocab_file(tmp_path / "nope.txt")


@pytest.mark.parametrize("config, message", [
    ("{not json", "is not a tokenizer config"),
    ('{"do_lower_case": "yes"}', "do_lower_case must be true or false, got 'yes'"),
])
def test_bad_tokenizer_config_names_the_file(small_tokenizer, tmp_path, config, message):
    small_tokenizer.save(tmp_path / "tok")
    (tmp_path / "tok" / "tokenizer_config.json").write_text(config)
    with pytest.raises(ValueError, match=message) as error:
        WordPieceTokenizer.load(tmp_path / "tok")
    assert str(tmp_path / "tok" / "tokenizer_config.json") in str(error.value)


def test_unknown_ids_and_tokens_fail_clearly(small_tokenizer):
    with pytest.raises(IndexError, match="99999"):
        small_tokenizer.decode([1, 99999])
    with pytest.raises(KeyError, match="no-such-token"):
        small_tokenizer.token_to_id("no-such-token")


# ----------------------------------------------------------------------------- resolve
def test_resolve_bert_uncased_needs_a_data_dir(tmp_path, monkeypatch):
    monkeypatch.delenv("MINIELECTRA_DATA_DIR", raising=False)
    with pytest.raises(FileNotFoundError, match="MINIELECTRA_DATA_DIR"):
        resolve_tokenizer(DataConfig(vocab="bert-uncased"))
    with pytest.raises(FileNotFoundError, match="bert-base-uncased-vocab.txt"):
        resolve_tokenizer(DataConfig(vocab="bert-uncased"), data_dir=tmp_path)


def test_resolve_vocab_path_and_trained_vocab_is_cached(small_tokenizer, tmp_path, cache_dir,
                                                        monkeypatch):
    small_tokenizer.save(tmp_path / "tok")
    cfg = DataConfig(vocab=str(tmp_path / "tok" / "vocab.txt"))
    assert resolve_tokenizer(cfg).tokens == small_tokenizer.tokens
    (tmp_path / "corpus.txt").write_text("\n".join(TEXT * 30) + "\n")
    cfg = DataConfig(corpus=str(tmp_path / "corpus.txt"), vocab=None, vocab_size=80,
                     held_out_fraction=0.0)
    trained = resolve_tokenizer(cfg)
    assert trained.vocab_size <= 80 and trained.tokens[:5] == list(SPECIAL_TOKENS)

    def no_training(*args, **kwargs):
        raise AssertionError("the cached vocabulary should have been reused")
    with monkeypatch.context() as m:
        m.setattr(WordPieceTokenizer, "train", no_training)
        assert resolve_tokenizer(cfg).tokens == trained.tokens
    assert len(list(cache_dir.glob("tokenizers/*/vocab.txt"))) == 1
    # another `tokenizers` release may learn another vocabulary: trained again, not reused
    monkeypatch.setattr(data_tokenizer.tokenizers, "__version__", "0.0.1")
    assert resolve_tokenizer(cfg).tokens == trained.tokens
    assert len(list(cache_dir.glob("tokenizers/*/vocab.txt"))) == 2


def test_settings_name_everything_the_ids_depend_on(small_tokenizer, monkeypatch):
    settings = small_tokenizer.settings
    assert settings["vocab_hash"] == small_tokenizer.vocab_hash and settings["lowercase"] is True
    assert WordPieceTokenizer(small_tokenizer.tokens, lowercase=False).settings != settings
    assert WordPieceTokenizer(small_tokenizer.tokens[:-1]).settings != settings
    monkeypatch.setattr(data_tokenizer, "TOKENIZER_VERSION", 99)
    assert small_tokenizer.settings != settings
    monkeypatch.undo()
    monkeypatch.setattr(data_tokenizer.tokenizers, "__version__", "0.0.1")
    assert small_tokenizer.settings != settings


def test_a_cached_vocabulary_cut_short_is_trained_again(tmp_path, cache_dir, caplog):
    """A vocab.txt truncated in the cache still loads (as a smaller vocabulary); its sha256,
    recorded when it was trained, is what tells."""
    (tmp_path / "corpus.txt").write_text("\n".join(TEXT * 30) + "\n")
    cfg = DataConfig(corpus=str(tmp_path / "corpus.txt"), vocab=None, vocab_size=80,
                     held_out_fraction=0.0)
    trained = resolve_tokenizer(cfg)
    (vocab,) = cache_dir.glob("tokenizers/*/vocab.txt")
    vocab.write_text("\n".join(trained.tokens[:20]) + "\n")  # still a valid vocab.txt
    assert WordPieceTokenizer.load(vocab.parent).vocab_size == 20
    with caplog.at_level(logging.WARNING, logger="minielectra"):
        again = resolve_tokenizer(cfg)
    assert "is damaged" in caplog.text and "vocab.txt" in caplog.text
    assert again.tokens == trained.tokens and WordPieceTokenizer.load(vocab.parent).tokens == \
        trained.tokens
