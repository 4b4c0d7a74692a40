"""What a run trains on: corpus -> WordPiece vocabulary -> train and held-out examples.

Both loops start here: the learner's (:mod:`.minimal`) and the library's (:mod:`.loop`, whose
run directory, resume and model come from :mod:`.setup`). The model takes its vocabulary size and
special ids from the tokenizer (:func:`set_token_ids`).
"""

from __future__ import annotations

import copy

from ..config import RunConfig
from ..data.corpus import open_corpus
from ..data.dataset import build_dataset
from ..data.tokenizer import resolve_tokenizer


def prepare_data(cfg: RunConfig, *, tokenizer=None, progress: bool = True):
    """Corpus -> WordPiece vocabulary (trained unless given) -> train and held-out datasets;
    or a ``prepare`` folder's tokenizer and shards (``data.prepared``)."""
    d = cfg.data
    if d.prepared:
        from ..data.prepare import load_prepared  # here: the learner's loop never reads one
        prepared_tokenizer, train, heldout = load_prepared(d.prepared, max_seq_len=d.max_seq_len)
        if tokenizer is not None and tokenizer.vocab_hash != prepared_tokenizer.vocab_hash:
            raise ValueError(f"--data {d.prepared}: its vocabulary is not the checkpoint's")
        return tokenizer or prepared_tokenizer, train, heldout
    corpus = open_corpus(d.corpus, cache_dir=d.cache_dir)
    if tokenizer is None:  # trained on the training documents only
        tokenizer = resolve_tokenizer(d, corpus.split(d.held_out_fraction)[0])
    common = dict(max_seq_len=d.max_seq_len, held_out_fraction=d.held_out_fraction,
                  seed=cfg.train.seed, short_seq_prob=d.short_seq_prob,
                  single_segment_prob=d.single_segment_prob, cache_dir=d.cache_dir,
                  num_workers=d.num_workers, progress=progress)
    train = build_dataset(corpus, tokenizer, split="train", **common)
    heldout = build_dataset(corpus, tokenizer, split="heldout", **common)
    return tokenizer, train, heldout


def set_token_ids(cfg: RunConfig, tokenizer) -> None:
    """The model's vocabulary and special ids come from the tokenizer, not the preset."""
    cfg.model.vocab_size = tokenizer.vocab_size
    cfg.model.pad_token_id, cfg.model.cls_token_id = tokenizer.pad_id, tokenizer.cls_id
    cfg.model.sep_token_id, cfg.model.mask_token_id = tokenizer.sep_id, tokenizer.mask_id


def long_stage(cfg: RunConfig) -> tuple[int, RunConfig] | None:
    """A two-length run's (``data.long_seq_len``) first long step, and the config its long steps
    read their data by: the long length, and the batch that holds as many tokens."""
    d, t = cfg.data, cfg.train
    if not d.long_seq_len:
        return None
    long = copy.deepcopy(cfg)
    long.data.max_seq_len = d.long_seq_len
    long.train.batch_size = t.batch_size * d.max_seq_len // d.long_seq_len
    return t.max_steps - round(d.long_fraction * t.max_steps), long
