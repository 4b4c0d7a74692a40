"""The word-order probe on real English: has a sentence two neighbouring words swapped?

The GLUE probes ask about meaning, which a few CPU minutes of pre-training barely reach; this asks
about form, the judge of :mod:`.toy_grammar` on real text: held-out SST-2 sentences, every other
one with two neighbouring words swapped, a ridge probe (:func:`.probe.fit_probe`). Chance is 50%.
"""

from __future__ import annotations

import random

from ..finetune.glue import data as glue
from ..finetune.task import Example
from ..finetune.classifier import encode
from .probe import features, fit_probe


def swap_examples(texts: list[str], *, seed: int = 0, min_words: int = 5,
                  max_words: int = 12) -> list[Example]:
    """Sentences of ``min_words``-``max_words`` words, every other one with a neighbouring pair
    swapped (label 0; intact 1). Duplicate sentences are kept once."""
    rng = random.Random(seed)
    seen, out = set(), []
    for text in texts:
        words = text.split()
        if not min_words <= len(words) <= max_words or text in seen:
            continue
        seen.add(text)
        if len(out) % 2 == 0:
            pairs = [j for j in range(len(words) - 1) if words[j] != words[j + 1]]
            j = rng.choice(pairs)
            words[j], words[j + 1] = words[j + 1], words[j]
            out.append(Example(" ".join(words), None, 0))
        else:
            out.append(Example(text, None, 1))
    return out


def swap_probe(encoder, tokenizer, *, train_examples: int = 2000, dev_examples: int = 1000,
               max_seq_len: int = 32, data_dir=None, seed: int = 0) -> dict:
    """Accuracy (%) of the swapped-neighbours probe on ``dev_examples`` held-out sentences."""
    texts = [e.text_a for e in glue.load_split("sst2", "train", data_dir=data_dir)]
    examples = swap_examples(texts, seed=seed)
    if len(examples) < train_examples + dev_examples:  # a small data dir: two thirds to train
        train_examples = 2 * len(examples) // 3
        dev_examples = len(examples) - train_examples
    if dev_examples < 4:
        raise ValueError(f"the swap probe needs SST-2 sentences of 5-12 words; the data dir "
                         f"has {len(examples)}")
    train, dev = examples[:train_examples], examples[train_examples:train_examples + dev_examples]
    feats = [features(encoder, encode(tokenizer, split, max_seq_len), pad_id=tokenizer.pad_id)
             for split in (train, dev)]
    return fit_probe(glue.get_task("sst2"), feats[0], [e.label for e in train], feats[1],
                     [e.label for e in dev], seed=seed)
