"""The checks of lessons 01-04 and 06-08: each compares the learner's function with the library's
piece on small seeded inputs (lesson 05's training step has its own module, :mod:`.step`)."""

from __future__ import annotations

import math
import random
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

from ..config import ModelConfig
from ..data.examples import ExampleBuilder
from ..model.attention import reference_attention
from ..model.electra import gumbel_max_sample
from ..objectives.flops import encoder_flops
from ..viz.heldout import calibration_bins
from .judge import NotYet, judge_exercise


# ------------------------------------------------------------- 01 pairing sentences into A and B


class _Script:
    """A stand-in for ``random.Random`` that returns the coin flips it was given."""

    def __init__(self, values):
        self.values = list(values)

    def random(self):
        return self.values.pop(0)


def library_split(lengths: list[int], target_len: int, coin: Callable[[], float]):
    """The official builder's A/B split of one example's sentences (no single-segment draw)."""
    flips = [coin() for _ in lengths]  # at most one flip per sentence is used
    # 1.0 first: the builder's single-segment draw (never, at probability 0)
    builder = ExampleBuilder(_Script([1.0] + flips + [1.0]), max_len=target_len,
                             single_segment_prob=0.0, short_seq_prob=0.0)
    builder._sentences = list(enumerate(lengths))
    return builder._create_example()


def _coin(seed):
    rng = random.Random(seed)
    return rng.random


def _split_cases():
    lengths = [[5, 7, 3, 9, 2], [30, 4, 4, 4], [10, 10, 10, 10, 10, 10], [3, 60, 2, 1],
               [14, 14, 14, 1], [20]]
    tails = lambda: 0.9  # noqa: E731  a coin that always says B: the quirk below shows
    return [(ls, 64, _coin(i)) for i, ls in enumerate(lengths)] + [
        ([8, 8, 8, 8], 38, _coin(9)), ([20, 15, 5, 3], 64, tails)]


def _split(lengths, target_len, coin, *, first_target, fits, flip=True, back=True):
    a, b, la, lb = [], [], 0, 0
    flips = [coin() for _ in lengths]
    for i, n in enumerate(lengths):
        if la == 0 or (fits(la + n, first_target) and (back or not b)) or (
                flip and lb == 0 and la < first_target and flips.pop(0) < 0.5):
            a.append(i)
            la += n
        else:
            b.append(i)
            lb += n
    return a, b


def check_pairing(split: Callable) -> Callable:
    """Lesson 01: ``split(lengths, target_len, coin) -> (a, b)``, sentence indices of A and B."""
    lt = lambda x, t: x < t  # noqa: E731
    mistakes = {
        "segment A should aim at (target_len - 3) // 2 tokens: [CLS] and two [SEP] are added "
        "later, so leave room for those 3.":
            lambda ls, t, c: _split(ls, t, c, first_target=t // 2, fits=lt),
        "a sentence goes to A only while A stays strictly shorter than its target "
        "(`len_a + length < first_target`, not `<=`).":
            lambda ls, t, c: _split(ls, t, c, first_target=(t - 3) // 2,
                                    fits=lambda x, tt: x <= tt),
        "when a sentence would overshoot A and B is still empty, the official builder flips a "
        "coin (`coin() < 0.5`) to keep it in A.":
            lambda ls, t, c: _split(ls, t, c, first_target=(t - 3) // 2, fits=lt, flip=False),
        "a later short sentence that still fits goes back to A even after B has started "
        "(the official builder's quirk), A does not close for good.":
            lambda ls, t, c: _split(ls, t, c, first_target=(t - 3) // 2, fits=lt, back=False),
    }
    return judge_exercise("split", split, library_split, library_split, mistakes, _split_cases,
                          "its A and B differ from the official builder's on some sentences.")


# ------------------------------------------------------------- 02 scaled dot-product attention


def _attention_cases():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 8, generator=g) for _ in range(3))
    mask = torch.ones(2, 1, 1, 5, dtype=torch.bool)
    mask[0, ..., 3:] = False
    return [(q, k, v, None), (q, k, v, mask), (q * 4, k, v, mask)]


def check_attention(attention: Callable) -> Callable:
    """Lesson 02: ``attention(q, k, v, mask) -> (b, h, n, e)``; mask ``(b, 1, 1, m)``, True =
    attend."""
    def scores(q, k, scale):
        return torch.einsum("bhne,bhme->bhnm", q, k) * scale

    def after(q, k, v, mask):
        p = scores(q, k, q.shape[-1] ** -0.5).softmax(-1)
        return (p if mask is None else p * mask) @ v

    mistakes = {
        "the scores are not divided by sqrt(d_head): without it large dot products saturate "
        "the softmax.": lambda q, k, v, m: _masked_softmax(scores(q, k, 1.0), m) @ v,
        "the scores are divided by d_head, not by its square root.":
            lambda q, k, v, m: _masked_softmax(scores(q, k, 1 / q.shape[-1]), m) @ v,
        "the mask is applied after the softmax: masked keys must be set to a very negative "
        "score before it, so the remaining weights still sum to 1.": after,
        "the softmax runs over the queries (dim -2); each query's weights over the keys "
        "(dim -1) must sum to 1.":
            lambda q, k, v, m: _masked_softmax(scores(q, k, q.shape[-1] ** -0.5), m, dim=-2) @ v,
    }
    return judge_exercise("attention", attention, reference_attention,
                          lambda q, k, v, m: reference_attention(q, k, v, m), mistakes,
                          _attention_cases, "its output differs from softmax(q k^T / sqrt(d)) v.")


def _masked_softmax(s, mask, dim=-1):
    if mask is not None:
        s = s.masked_fill(~mask, torch.finfo(s.dtype).min)
    return s.softmax(dim)


# ------------------------------------------------------------- 03 the generator's loss


def library_generator_loss(logits, input_ids, is_masked):
    """Cross-entropy against the original token, averaged over the masked positions only."""
    ce = F.cross_entropy(logits.transpose(1, 2), input_ids, reduction="none")  # (b, n)
    return (ce * is_masked).sum() / is_masked.sum()


def _generator_cases():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(2, 7, 11, generator=g) * 2
    ids = torch.randint(0, 11, (2, 7), generator=g)
    m = torch.zeros(2, 7, dtype=torch.bool)
    m[0, [1, 4]] = True
    m[1, [2]] = True
    return [(logits, ids, m), (logits[:1], ids[:1], m[:1])]


def check_generator_loss(generator_loss: Callable) -> Callable:
    """Lesson 03: ``generator_loss(logits (b, n, v), input_ids (b, n), is_masked (b, n))``."""
    ce = lambda lg, ids: F.cross_entropy(lg.transpose(1, 2), ids, reduction="none")  # noqa
    mistakes = {
        "the loss covers every token; the generator is scored only where a token was masked "
        "(the others it can copy from its input).": lambda lg, ids, m: ce(lg, ids).mean(),
        "the masked tokens' losses are summed; average them over the masked positions.":
            lambda lg, ids, m: (ce(lg, ids) * m).sum(),
        "the masked losses are divided by every position, not by the number of masked ones.":
            lambda lg, ids, m: (ce(lg, ids) * m).sum() / m.numel(),
        "the loss has the wrong sign: it is the negative log-probability of the original "
        "token.": lambda lg, ids, m: -library_generator_loss(lg, ids, m),
    }
    return judge_exercise("generator_loss", generator_loss, library_generator_loss,
                          library_generator_loss, mistakes, _generator_cases,
                          "it differs from the cross-entropy averaged over the masked positions.")


# ------------------------------------------------------------- 04 sampling and the labels


def library_replace(input_ids, positions, logits, generator):
    """Gumbel-max samples at ``positions`` put into ``input_ids``; labels where they differ."""
    sampled = gumbel_max_sample(logits, generator=generator)  # (b, p)
    corrupted = input_ids.scatter(1, positions, sampled)
    return corrupted, corrupted != input_ids


def _replace_cases():
    ids = torch.tensor([[5, 1, 2, 3, 4, 6]] * 256)
    positions = torch.tensor([[1, 3]] * 256)
    logits = torch.log(torch.tensor([0.05, 0.6, 0.05, 0.3] + [0.0] * 3) + 1e-12)
    logits = logits.expand(256, 2, 7).clone()  # slot 1 often keeps its original (1); slot 3 not
    return [(ids, positions, logits)]


def check_replace(replace: Callable) -> Callable:
    """Lesson 04: ``replace(input_ids, positions, logits, generator) -> (corrupted,
    is_replaced)``. Checked in distribution: the samples, and the labels against them."""
    try:
        (ids, pos, logits), = _replace_cases()
        corrupted, labels = replace(ids, pos, logits, torch.Generator().manual_seed(0))
    except NotImplementedError:
        print("`replace` is not written yet: fill in its stub above and run this cell again. "
              "The lesson goes on with the library's version.")
        return library_replace
    sampled = corrupted.gather(1, pos)  # (b, p)
    if not torch.equal(corrupted.scatter(1, pos, ids.gather(1, pos)), ids):
        raise NotYet("`replace` is not right yet: tokens outside the masked positions changed; "
                     "put the samples only at `positions`.")
    if (sampled == sampled[0]).all():
        raise NotYet("`replace` is not right yet: every row drew the same token: that is an "
                     "argmax, not a sample; add Gumbel noise -log(-log(u)) before the argmax.")
    share = torch.stack([(sampled == t).float().mean(0) for t in range(4)], 1)  # (p, 4)
    if not torch.allclose(share, torch.tensor([0.05, 0.6, 0.05, 0.3]).expand(2, 4), atol=0.1):
        raise NotYet("`replace` is not right yet: the samples do not follow softmax(logits) "
                     f"(token shares {share[0].tolist()} where 0.05, 0.6, 0.05, 0.3 are "
                     "expected): add -log(-log(u)) noise to the logits, not uniform noise.")
    if torch.equal(labels.bool(), torch.zeros_like(ids, dtype=torch.bool).scatter(1, pos, True)):
        raise NotYet("`replace` is not right yet: a position whose sample equals the original "
                     "is labelled replaced; label only tokens that differ from the original.")
    if not torch.equal(labels.bool(), corrupted != ids):
        raise NotYet("`replace` is not right yet: the labels should be True exactly where the "
                     "corrupted token differs from the original.")
    print("`replace` is right: its samples follow the generator's softmax, and only changed "
          "tokens are labelled replaced.")
    return replace


# ------------------------------------------------------------- 06 a calibration curve


def library_calibration(p, labels, bins):
    """Per equal-width bin of P: the mean P and the share of replaced tokens (NaN if empty)."""
    c = calibration_bins(p, labels, bins=bins)
    return c["mean_p"], c["frac_replaced"]


def _calibration_cases():
    rng = np.random.default_rng(0)
    p = np.concatenate([rng.random(200), [0.0, 1.0, 0.5, 0.1]])
    labels = rng.random(p.size) < p
    return [(p, labels, 10), (p[:50], labels[:50], 4)]


def check_calibration(calibration: Callable) -> Callable:
    """Lesson 06: ``calibration(p, labels, bins) -> (mean_p, frac_replaced)``, arrays of
    ``bins``."""
    def variant(p, labels, bins, *, which=None, frac=None):
        p, labels = np.asarray(p, float), np.asarray(labels, bool)
        w = np.minimum((p * bins).astype(int), bins - 1) if which is None else which(p, bins)
        keep = w < bins
        p, labels, w = p[keep], labels[keep], w[keep]
        count = np.bincount(w, minlength=bins)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.bincount(w, weights=p, minlength=bins) / count
            f = np.bincount(w, weights=labels, minlength=bins)
            return mean, (f / count if frac is None else frac(f, count, labels))

    mistakes = {
        "P = 1.0 falls past the last bin; put it in the last bin (`min(int(p * bins), bins - "
        "1)`).": lambda p, y, b: variant(p, y, b, which=lambda p, b: (p * b).astype(int)),
        "the share of replaced tokens is taken over all tokens, not over the tokens in each "
        "bin.": lambda p, y, b: variant(p, y, b, frac=lambda f, c, y: f / y.size),
        "the share of replaced tokens is divided by all replaced tokens; divide by the bin's "
        "token count.": lambda p, y, b: variant(p, y, b, frac=lambda f, c, y: f / y.sum()),
    }
    return judge_exercise("calibration", calibration, library_calibration, library_calibration,
                          mistakes, _calibration_cases,
                          "its curve differs from the library's calibration_bins.")


# ------------------------------------------------------------- 07 the classifier head and loss


def library_head_loss(hidden, head, labels):
    """The [CLS] vector through the head, cross-entropy summed over the examples (official)."""
    logits = head(hidden[:, 0])  # (b, c)
    return logits, F.cross_entropy(logits, labels, reduction="sum")


def _head_cases():
    g = torch.Generator().manual_seed(2)
    hidden = torch.randn(5, 6, 8, generator=g)
    head = torch.nn.Linear(8, 3)
    with torch.no_grad():
        head.weight.copy_(torch.randn(3, 8, generator=g))
        head.bias.copy_(torch.randn(3, generator=g))
    return [(hidden, head, torch.tensor([0, 2, 1, 1, 0]))]


def check_head_loss(head_loss: Callable) -> Callable:
    """Lesson 07: ``head_loss(hidden (b, n, d), head, labels (b,)) -> (logits, loss)``."""
    ce = lambda lg, y: F.cross_entropy(lg, y, reduction="sum")  # noqa: E731
    mistakes = {
        "the head reads the mean of all tokens; it reads the [CLS] vector, position 0.":
            lambda h, head, y: (lambda lg: (lg, ce(lg, y)))(head(h.mean(1))),
        "the head reads the last token; it reads the [CLS] vector, position 0.":
            lambda h, head, y: (lambda lg: (lg, ce(lg, y)))(head(h[:, -1])),
        "the loss applies softmax twice: F.cross_entropy takes the raw logits.":
            lambda h, head, y: (lambda lg: (lg, ce(lg.softmax(-1), y)))(head(h[:, 0])),
        "the loss is averaged; the official recipe sums it over the batch "
        "(reduction='sum').":
            lambda h, head, y: (lambda lg: (lg, F.cross_entropy(lg, y)))(head(h[:, 0])),
    }
    return judge_exercise("head_loss", head_loss, library_head_loss, library_head_loss, mistakes,
                          _head_cases, "its logits or loss differ from the [CLS] head's.")


# ------------------------------------------------------------- 08 the FLOPs of a forward pass


def _flops_cases():
    small = ModelConfig(hidden_size=256, embedding_size=128, intermediate_size=1024,
                        num_layers=4, num_heads=4)
    equal = ModelConfig(hidden_size=64, embedding_size=64, intermediate_size=256, num_layers=2,
                        num_heads=2)
    return [(small, 8, 128), (equal, 2, 32), (small, 1, 512)]


def check_encoder_flops(flops: Callable) -> Callable:
    """Lesson 08: ``flops(cfg, b, n)``: FLOPs of one encoder forward pass (2 per
    multiply-add), as :func:`~minielectra.objectives.flops.encoder_flops` counts them."""
    def count(cfg, b, n, *, mac=2, attention=True, projection=True, ffn=2):
        d, f, e = cfg.hidden_size, cfg.intermediate_size, cfg.embedding_size
        proj = mac * b * n * e * d if (e != d and projection) else 0
        layer = mac * b * n * d * 4 * d + ffn * mac * b * n * d * f
        layer += 2 * mac * b * n * n * d if attention else 0
        return proj + cfg.num_layers * layer

    mistakes = {
        "a multiply-add is 2 FLOPs: every matrix product of (m, k) by (k, p) costs 2 m k p.":
            lambda c, b, n: count(c, b, n, mac=1),
        "the attention itself is missing: q k^T and the weighted sum of v cost 2 b n^2 d "
        "each per layer.": lambda c, b, n: count(c, b, n, attention=False),
        "the embedding projection (e -> d, when embedding_size differs from hidden_size) is "
        "missing.": lambda c, b, n: count(c, b, n, projection=False),
        "the feed-forward layer has two matrices (d -> f and f -> d); one is missing.":
            lambda c, b, n: count(c, b, n, ffn=1),
    }
    return judge_exercise("flops", flops, encoder_flops, encoder_flops, mistakes, _flops_cases,
                          "its count differs from the library's encoder_flops.")
