"""Model in, records out: what the generator did to a text, and what the discriminator thinks.

Every view and ``minielectra viz --json`` read the same records, one per word piece::

    {"position": 3, "word": 2, "token": "dog", "original": "cat", "replaced": True,
     "masked": True, "hand": False, "p_replaced": 0.91,
     "top_k": [{"token": "cat", "p": 0.41}, {"token": "dog", "p": 0.12}, ...]}

``position`` counts word pieces from 1 (``[CLS]`` is scored, not reported), ``word`` words from 0;
a generator sample equal to the original is not replaced (paper section 2); ``top_k`` is the
generator's ``softmax(logits / temperature)`` where it predicted. A text is corrupted by sampling
(exactly ``model(ids, generator=torch.Generator().manual_seed(seed))`` in eval mode) or by hand
(``replace={position: word}``). A checkpoint knows only its training length (32 for ``bundled``),
so a longer text is cut into windows of that length, scored as one batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..data.tokenizer import WordPieceTokenizer
from ..model.electra import Electra
from ..model.hubmodels import owner_hint
from ..model.storage import resolve_bundled
from ..objectives.compute import DISCRIMINATIVE
from ..training.device import autocast, check_precision
from ..training.evaluate import run_config_for
from ..training.opening import open_checkpoint


# ------------------------------------------------------------------------ 1. the checkpoint
@dataclass
class Checkpoint:
    """A loaded model with what scoring needs to know about it."""

    model: Electra  # in eval mode, with .tokenizer
    path: Path
    window: int  # tokens per sequence, [CLS] and [SEP] included: the run's data.max_seq_len
    name: str  # as the user gave it: "bundled", a directory
    precision: str = "fp32"  # fp32, or bf16 autocast (training.device.check_precision)

    def autocast(self):
        """The number format this checkpoint scores in (:func:`training.device.autocast`)."""
        return autocast(next(self.model.parameters()).device, self.precision)

    @property
    def tokenizer(self) -> WordPieceTokenizer:
        return self.model.tokenizer


def load_checkpoint(spec: str | Path = "bundled", *, precision: str = "fp32") -> Checkpoint:
    """``"bundled"``, a checkpoint directory (minielectra or transformers), or a run directory
    (its latest checkpoint), loaded for scoring in ``precision`` (fp32, or bf16 where the
    machine has it)."""
    check_precision(torch.device("cpu"), precision)
    if not resolve_bundled(spec).is_dir():
        raise FileNotFoundError(f"checkpoint {spec}: no such directory{owner_hint(spec)}")
    model, path = open_checkpoint(spec)  # a run still pruning: its newest complete one
    model.eval()
    if model.objective.name not in DISCRIMINATIVE:
        raise ValueError(f"checkpoint {spec} was pre-trained with the {model.objective.name!r} "
                         "objective: it has no discriminator to show")
    if model.tokenizer is None:
        raise FileNotFoundError(f"checkpoint {spec}: no vocab.txt to tokenize text with")
    window = run_config_for(path, model).data.final_seq_len()  # as `evaluate` reads it
    return Checkpoint(model, path, window, str(spec), precision)


# ------------------------------------------------------------------------- 2. text -> windows
@dataclass
class Encoded:
    """Texts cut into windows of ``[CLS] pieces [SEP]``, and where each piece went."""

    input_ids: torch.Tensor  # (w, n), padded
    attention_mask: torch.Tensor  # (w, n)
    token_type_ids: torch.Tensor  # (w, n), all 0: one segment
    rows: torch.Tensor  # (t,) the window of each piece, all texts one after the other
    cols: torch.Tensor  # (t,) its column
    words: list[int]  # (t,) the index of its word within its text
    offsets: list[int]  # text i is pieces offsets[i]:offsets[i + 1]


def encode_texts(tokenizer: WordPieceTokenizer, texts: list[str], *, window: int) -> Encoded:
    """Tokenize ``texts`` and cut each into near-equal windows of at most ``window`` tokens."""
    per = window - 2  # room for [CLS] and [SEP]
    windows, rows, cols, words, offsets = [], [], [], [], [0]
    for text in texts:
        pieces = tokenizer.encode(text) if text.strip() else []
        if not pieces:
            raise ValueError(f"the text {text!r} is empty (no tokens to score)")
        for chunk in np.array_split(np.asarray(pieces), -(-len(pieces) // per)):
            rows += [len(windows)] * len(chunk)
            cols += range(1, len(chunk) + 1)
            windows.append([tokenizer.cls_id, *chunk.tolist(), tokenizer.sep_id])
        tokens = tokenizer.convert_ids_to_tokens(pieces)
        words.extend(np.cumsum([not t.startswith("##") for t in tokens]).clip(1) - 1)
        offsets.append(len(rows))
    n = max(len(w) for w in windows)
    ids = torch.full((len(windows), n), tokenizer.pad_id, dtype=torch.long)
    for i, w in enumerate(windows):
        ids[i, :len(w)] = torch.tensor(w)
    mask = (ids != tokenizer.pad_id).long()
    return Encoded(ids, mask, torch.zeros_like(ids), torch.tensor(rows), torch.tensor(cols),
                   [int(x) for x in words], offsets)


# ----------------------------------------------------------------------------- 3. corrupting
@dataclass
class Corruption:
    """What the generator saw, what the discriminator sees, and the labels; all ``(w, n)``."""

    masked_ids: torch.Tensor  # the generator's input ([MASK] at most masked positions)
    corrupted_ids: torch.Tensor  # the discriminator's input
    is_replaced: torch.Tensor  # bool: corrupted != original
    masked: torch.Tensor  # bool: the generator predicted this position
    hand: torch.Tensor  # bool: replaced by hand


@torch.no_grad()
def sample_corruption(model: Electra, enc: Encoded, *, seed: int = 0) -> Corruption:
    """Mask and sample exactly as ``model(...)`` does (:meth:`Electra.corrupt`), seeded."""
    rng = torch.Generator(device=enc.input_ids.device).manual_seed(seed)
    c = model.corrupt(enc.input_ids, enc.attention_mask, enc.token_type_ids, generator=rng)
    m = c.masked
    # amax, not a plain scatter: with replacement, an unused slot may repeat a used position.
    masked = torch.zeros(enc.input_ids.shape).scatter_reduce(1, m.positions, m.weights,
                                                             reduce="amax") > 0
    return Corruption(m.input_ids, c.corrupted_ids, c.is_replaced, masked,
                      torch.zeros_like(masked))


def word_id(tokenizer: WordPieceTokenizer, word: str) -> int:
    """The id of ``word`` as one vocabulary entry (lower-cased for an uncased vocabulary)."""
    key = word.strip().lower() if tokenizer.lowercase else word.strip()
    try:
        i = tokenizer.token_to_id(key)
    except KeyError:
        i = None
    if i is None or i in tokenizer.special_ids:
        raise ValueError(f"{word!r} is not a word of the vocabulary ({tokenizer.vocab_size} word "
                         "pieces; a replacement must be one piece, e.g. a common word)")
    return i


def hand_corruption(tokenizer: WordPieceTokenizer, enc: Encoded,
                    replace: dict[int, str]) -> Corruption:
    """Put ``replace[position] = word`` into the text; positions count word pieces from 1."""
    t = len(enc.rows)
    corrupted, masked_ids = enc.input_ids.clone(), enc.input_ids.clone()
    hand = torch.zeros(enc.input_ids.shape, dtype=torch.bool)
    for pos, word in sorted(replace.items()):
        if not 1 <= pos <= t:
            raise ValueError(f"position {pos} is outside the text: it has {t} word pieces, "
                             f"positions 1..{t} (hover over a piece to see its position)")
        r, c = int(enc.rows[pos - 1]), int(enc.cols[pos - 1])
        corrupted[r, c] = word_id(tokenizer, word)
        masked_ids[r, c] = tokenizer.mask_id  # what the generator would have seen there
        hand[r, c] = True
    is_replaced = (corrupted != enc.input_ids) & enc.attention_mask.bool()
    return Corruption(masked_ids, corrupted, is_replaced, hand.clone(), hand)


# ------------------------------------------------------------------------------- 4. scoring
@dataclass
class Scores:
    p_replaced: torch.Tensor  # (w, n) the discriminator's sigmoid(logit)
    top_p: torch.Tensor  # (m, k) the generator's top-k probabilities at the m masked positions
    top_ids: torch.Tensor  # (m, k) and their ids (masked positions in row-major order)


@torch.no_grad()
def score(model: Electra, enc: Encoded, corruption: Corruption, *, top_k: int = 5) -> Scores:
    """The discriminator on ``corrupted_ids``; the generator's top-k where it predicted."""
    mask, types = enc.attention_mask, enc.token_type_ids
    logits = model.discriminator(corruption.corrupted_ids, mask, types)  # (w, n)
    gen = model.generator  # every model shown has one (load_checkpoint refuses the MLM ones)
    hidden = gen.encoder(corruption.masked_ids, mask, types)  # (w, n, d_g)
    gen_logits = gen.mlm_logits(hidden[corruption.masked])  # (m, v)
    probs = torch.softmax(gen_logits.float() / model.objective.temperature, dim=-1)
    top = probs.topk(min(top_k, probs.shape[-1]), dim=-1)
    return Scores(torch.sigmoid(logits.float()), top.values, top.indices)


def records(tokenizer: WordPieceTokenizer, enc: Encoded, corruption: Corruption,
            scores: Scores) -> list[list[dict]]:
    """One list of records per text."""
    slot = torch.full(enc.input_ids.shape, -1, dtype=torch.long)
    slot[corruption.masked] = torch.arange(int(corruption.masked.sum()))
    vocab = tokenizer.tokens
    out = []
    for start, end in zip(enc.offsets, enc.offsets[1:]):
        text = []
        for i in range(start, end):
            r, c = int(enc.rows[i]), int(enc.cols[i])
            s = int(slot[r, c])
            top = [] if s < 0 else [{"token": vocab[int(j)], "p": float(p)} for j, p in
                                    zip(scores.top_ids[s], scores.top_p[s])]
            text.append({
                "position": i - start + 1, "word": enc.words[i],
                "token": vocab[int(corruption.corrupted_ids[r, c])],
                "original": vocab[int(enc.input_ids[r, c])],
                "replaced": bool(corruption.is_replaced[r, c]), "masked": s >= 0,
                "hand": bool(corruption.hand[r, c]),
                "p_replaced": float(scores.p_replaced[r, c]), "top_k": top})
        out.append(text)
    return out


# ------------------------------------------------------------------------- 5. the front door
def corrupt_text(ckpt: Checkpoint, text: str, *, replace: dict[int, str] | None = None,
                 seed: int = 0) -> tuple[Encoded, Corruption]:
    """Encode ``text`` and corrupt it: by hand when ``replace`` is given, else sampled."""
    enc = encode_texts(ckpt.tokenizer, [text], window=ckpt.window)
    if replace:
        return enc, hand_corruption(ckpt.tokenizer, enc, replace)
    with ckpt.autocast():
        return enc, sample_corruption(ckpt.model, enc, seed=seed)


def score_text(ckpt: Checkpoint, text: str, *, replace: dict[int, str] | None = None,
               seed: int = 0, top_k: int = 5) -> list[dict]:
    """The records of one text, corrupted by hand (``replace``) or sampled with ``seed``."""
    enc, corruption = corrupt_text(ckpt, text, replace=replace, seed=seed)
    with ckpt.autocast():
        scores = score(ckpt.model, enc, corruption, top_k=top_k)
    return records(ckpt.tokenizer, enc, corruption, scores)[0]


def score_texts(ckpt: Checkpoint, texts: list[str], *, seed: int = 0,
                top_k: int = 5) -> list[list[dict]]:
    """Several texts sampled in one batch (one ``model(...)`` call): a list of records each."""
    enc = encode_texts(ckpt.tokenizer, texts, window=ckpt.window)
    with ckpt.autocast():
        corruption = sample_corruption(ckpt.model, enc, seed=seed)
        scores = score(ckpt.model, enc, corruption, top_k=top_k)
    return records(ckpt.tokenizer, enc, corruption, scores)


def parse_replacements(items: list[str], *, name: str = "--replace") -> dict[int, str]:
    """``["3=dog", "5=ran"]`` -> ``{3: "dog", 5: "ran"}``; ``name`` is what errors call it."""
    out = {}
    for item in items:
        pos, sep, word = item.partition("=")
        if not sep or not pos.strip().lstrip("-").isdigit() or not word.strip():
            raise ValueError(f"{name} {item!r}: expected POS=WORD, e.g. 3=dog")
        if int(pos) in out:
            raise ValueError(f"{name}: position {int(pos)} is given twice")
        out[int(pos)] = word.strip()
    return out
