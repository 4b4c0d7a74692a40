"""The lessons' exercise checks: each accepts a right answer and rejects, with a sentence that
names the mistake, the wrong versions learners write. The wrong versions below are written as
a learner would write them, independently of the checks' own models of the mistakes."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from minielectra.exercises import checks as ex
from minielectra.exercises.judge import NotYet
from minielectra.exercises.step import check_step
from minielectra.model.electra import (gumbel_max_sample, mask_tokens, masked_lm_loss,
                                       replace_tokens, replaced_bce)
from minielectra.training.optim import lr_at
from minielectra.training.ranks import seed_slice


def accepted(check, fn):
    assert check(fn) is fn


def rejected(check, fn, words):
    with pytest.raises(NotYet) as e:
        check(fn)
    assert words in str(e.value), str(e.value)


def test_an_empty_stub_hands_back_the_library_piece(capsys):
    def attention(q, k, v, mask):
        raise NotImplementedError
    assert ex.check_attention(attention) is ex.reference_attention
    assert "not written yet" in capsys.readouterr().out


# ---------------------------------------------------------------- 01


def split_ok(lengths, target_len, coin, *, target=None, lte=False, flip=True, back=True):
    first = (target_len - 3) // 2 if target is None else target
    a, b, la, lb = [], [], 0, 0
    for i, n in enumerate(lengths):
        fits = la + n <= first if lte else la + n < first
        if la == 0 or (fits and (back or not b)) or (
                flip and lb == 0 and la < first and coin() < 0.5):
            a.append(i)
            la += n
        else:
            b.append(i)
            lb += n
    return a, b


@pytest.mark.parametrize("wrong, words", [
    (lambda ls, t, c: split_ok(ls, t, c, target=t // 2), "leave room for those 3"),
    (lambda ls, t, c: split_ok(ls, t, c, lte=True), "not `<=`"),
    (lambda ls, t, c: split_ok(ls, t, c, flip=False), "flips a coin"),
    (lambda ls, t, c: split_ok(ls, t, c, back=False), "goes back to A"),
    (lambda ls, t, c: (list(range(len(ls))), []), "differ from the official builder"),
])
def test_pairing(wrong, words):
    accepted(ex.check_pairing, lambda ls, t, c: split_ok(ls, t, c))
    rejected(ex.check_pairing, wrong, words)


# ---------------------------------------------------------------- 02


def attention_ok(q, k, v, mask, *, scale=True, by_d=False, after=False, dim=-1):
    s = q @ k.transpose(-1, -2)
    if scale:
        s = s / (q.shape[-1] if by_d else math.sqrt(q.shape[-1]))
    if mask is not None and not after:
        s = s.masked_fill(~mask, -1e9)
    w = s.softmax(dim)
    if mask is not None and after:
        w = w.masked_fill(~mask, 0.0)
    return w @ v


@pytest.mark.parametrize("kw, words", [
    ({"scale": False}, "sqrt(d_head)"), ({"by_d": True}, "not by its square root"),
    ({"after": True}, "after the softmax"), ({"dim": -2}, "over the queries"),
])
def test_attention(kw, words):
    accepted(ex.check_attention, attention_ok)
    rejected(ex.check_attention, lambda *a: attention_ok(*a, **kw), words)


# ---------------------------------------------------------------- 03


def gen_loss_ok(logits, ids, m):
    return F.cross_entropy(logits[m], ids[m])


@pytest.mark.parametrize("wrong, words", [
    (lambda lg, ids, m: F.cross_entropy(lg.reshape(-1, lg.shape[-1]), ids.reshape(-1)),
     "covers every token"),
    (lambda lg, ids, m: F.cross_entropy(lg[m], ids[m], reduction="sum"), "summed"),
    (lambda lg, ids, m: F.cross_entropy(lg[m], ids[m], reduction="sum") / ids.numel(),
     "divided by every position"),
    (lambda lg, ids, m: lg.log_softmax(-1)[m].gather(1, ids[m][:, None]).mean(), "wrong sign"),
])
def test_generator_loss(wrong, words):
    accepted(ex.check_generator_loss, gen_loss_ok)
    rejected(ex.check_generator_loss, wrong, words)


# ---------------------------------------------------------------- 04


def replace_ok(ids, positions, logits, g, *, noise="gumbel", labels="differ"):
    u = torch.rand(logits.shape, generator=g)
    if noise == "gumbel":
        sampled = (logits - torch.log(-torch.log(u))).argmax(-1)
    elif noise == "uniform":
        sampled = (logits + u).argmax(-1)
    else:
        sampled = logits.argmax(-1)
    corrupted = ids.clone()
    corrupted.scatter_(1, positions, sampled)
    if labels == "differ":
        return corrupted, corrupted != ids
    return corrupted, torch.zeros_like(ids, dtype=torch.bool).scatter(1, positions, True)


@pytest.mark.parametrize("kw, words", [
    ({"noise": "none"}, "argmax, not a sample"), ({"noise": "uniform"}, "not uniform noise"),
    ({"labels": "masked"}, "equals the original is labelled replaced"),
])
def test_replace(kw, words):
    accepted(ex.check_replace, replace_ok)
    accepted(ex.check_replace, lambda ids, pos, lg, g: replace_ok(ids, pos, lg, g))
    rejected(ex.check_replace, lambda *a: replace_ok(*a, **kw), words)


def test_replace_rejects_changes_outside_the_slots():
    def shifted(ids, pos, lg, g):
        c, r = replace_ok(ids, pos, lg, g)
        c[:, 0] = 9
        return c, c != ids
    rejected(ex.check_replace, shifted, "outside the masked positions")


def test_replace_accepts_torch_multinomial():
    def multinomial(ids, pos, lg, g):
        b, p, v = lg.shape
        s = torch.multinomial(lg.softmax(-1).reshape(b * p, v), 1, generator=g).view(b, p)
        c = ids.scatter(1, pos, s)
        return c, c != ids
    accepted(ex.check_replace, multinomial)


# ---------------------------------------------------------------- 05


def step_ok(model, opt, batch, step, t, obj, *, zero=True, weight=True, clip=True,
            reseed=True, schedule=True):
    if reseed:
        seed_slice(t.seed, step)
    ids, attn, types = batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]
    masked = mask_tokens(ids, attn, model.config, obj)
    logits = model.generator.slot_logits(masked.input_ids, attn, types, masked.positions)
    gen = masked_lm_loss(logits, masked)
    corrupted, labels = replace_tokens(ids, attn, masked, gumbel_max_sample(logits))
    disc = replaced_bce(model.discriminator(corrupted, attn, types), labels, attn.float())
    loss = gen + (obj.disc_weight if weight else 1.0) * disc
    if schedule:
        for group in opt.param_groups:
            group["lr"] = lr_at(step, t)
    if zero:
        opt.zero_grad()
    loss.backward()
    if clip:
        torch.nn.utils.clip_grad_norm_(model.parameters(), t.grad_clip)
    opt.step()
    return loss


@pytest.mark.parametrize("kw, words", [
    ({"zero": False}, "did you clear them"), ({"weight": False}, "weighted by obj.disc_weight"),
    ({"clip": False}, "clip it"), ({"reseed": False}, "reseed"),
    ({"schedule": False}, "learning rate"),
])
def test_training_step(kw, words):
    accepted(check_step, step_ok)
    rejected(check_step, lambda *a: step_ok(*a, **kw), words)


# ---------------------------------------------------------------- 06


def calibration_ok(p, labels, bins, *, last=True, per="bin"):
    p, labels = np.asarray(p), np.asarray(labels)
    mean, frac = np.full(bins, np.nan), np.full(bins, np.nan)
    for i in range(bins):
        lo, hi = i / bins, (i + 1) / bins
        inside = (p >= lo) & ((p < hi) | (last and i == bins - 1 and p <= hi))
        if inside.any():
            mean[i] = p[inside].mean()
            frac[i] = labels[inside].sum() / {"bin": inside.sum(), "all": labels.size,
                                              "pos": labels.sum()}[per]
    return mean, frac


@pytest.mark.parametrize("kw, words", [
    ({"last": False}, "past the last bin"), ({"per": "all"}, "over all tokens"),
    ({"per": "pos"}, "divided by all replaced"),
])
def test_calibration(kw, words):
    accepted(ex.check_calibration, calibration_ok)
    rejected(ex.check_calibration, lambda *a: calibration_ok(*a, **kw), words)


# ---------------------------------------------------------------- 07


def head_ok(hidden, head, labels, *, read=lambda h: h[:, 0], loss=None):
    logits = head(read(hidden))
    return logits, (loss or (lambda lg, y: F.cross_entropy(lg, y, reduction="sum")))(logits,
                                                                                      labels)


@pytest.mark.parametrize("kw, words", [
    ({"read": lambda h: h.mean(dim=1)}, "mean of all tokens"),
    ({"read": lambda h: h[:, h.shape[1] - 1]}, "last token"),
    ({"loss": lambda lg, y: F.nll_loss(lg.softmax(-1).log_softmax(-1), y, reduction="sum")},
     "softmax twice"),
    ({"loss": lambda lg, y: F.cross_entropy(lg, y)}, "averaged"),
])
def test_head_loss(kw, words):
    accepted(ex.check_head_loss, head_ok)
    rejected(ex.check_head_loss, lambda *a: head_ok(*a, **kw), words)


# ---------------------------------------------------------------- 08


def flops_ok(cfg, b, n, *, mac=2, attn=True, proj=True, ffn=2):
    d, f, e = cfg.hidden_size, cfg.intermediate_size, cfg.embedding_size
    qkv, out = 3 * d * d, d * d
    per_token = qkv + out + ffn * d * f + (2 * n * d if attn else 0)
    total = cfg.num_layers * b * n * per_token + (b * n * e * d if e != d and proj else 0)
    return mac * total


@pytest.mark.parametrize("kw, words", [
    ({"mac": 1}, "2 FLOPs"), ({"attn": False}, "attention itself"),
    ({"proj": False}, "embedding projection"), ({"ffn": 1}, "two matrices"),
])
def test_encoder_flops(kw, words):
    accepted(ex.check_encoder_flops, flops_ok)
    rejected(ex.check_encoder_flops, lambda *a: flops_ok(*a, **kw), words)
