"""The ELECTRA objective: masking, sampling, replacement, losses, gradients and tying."""

import math

import pytest
import torch

from minielectra.config import ModelConfig, ObjectiveConfig, preset
from minielectra.model.electra import (Electra, gumbel_max_sample, mask_tokens, max_predictions,
                                       replace_tokens)

CLS, SEP, MASK, PAD = 2, 3, 4, 0


def tiny_config(**kw) -> ModelConfig:
    base = dict(vocab_size=64, embedding_size=16, hidden_size=32, num_layers=2, num_heads=4,
                intermediate_size=64, max_position_embeddings=64, dropout=0.0,
                attention_dropout=0.0, generator_size=0.5, pad_token_id=PAD,
                cls_token_id=CLS, sep_token_id=SEP, mask_token_id=MASK)
    base.update(kw)
    return ModelConfig(**base)


def batch(b=8, n=32, vocab=64, seed=0, pad_from=None):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (b, n), generator=g)
    ids[:, 0] = CLS
    ids[:, n // 2] = SEP
    ids[:, -1] = SEP
    am = torch.ones_like(ids)
    if pad_from is not None:
        ids[: b // 2, pad_from:] = PAD
        ids[: b // 2, pad_from - 1] = SEP
        am[: b // 2, pad_from:] = 0
    return ids, am


# ------------------------------------------------------------------------------------ masking

def test_max_predictions_matches_official():
    assert max_predictions(128, 0.15) == 19
    assert max_predictions(512, 0.15) == 79


@pytest.mark.parametrize("sampling", ["without_replacement", "with_replacement"])
def test_masking_never_selects_special_or_padding(sampling):
    cfg = tiny_config()
    obj = ObjectiveConfig(mask_sampling=sampling)
    ids, am = batch(b=64, n=32, pad_from=20)
    ids[:, 5] = MASK  # an existing [MASK] is not a candidate either
    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        m = mask_tokens(ids, am, cfg, obj, generator=g)
        used_pos = m.positions[m.weights.bool()]
        rows = torch.arange(64)[:, None].expand_as(m.positions)[m.weights.bool()]
        orig = ids[rows, used_pos]
        assert not torch.isin(orig, torch.tensor([CLS, SEP, MASK, PAD])).any()
        assert am[rows, used_pos].all()
        changed = m.input_ids != ids
        assert not (changed & ~am.bool()).any()
        assert (ids[changed] != MASK).all()


def test_masking_rate_and_85_15_0_split():
    """Closed form: round(0.15 * tokens) distinct positions; 85% [MASK], 15% kept, 0% random."""
    cfg = tiny_config()
    obj = ObjectiveConfig()
    n = 128
    ids, am = batch(b=256, n=n, vocab=64, seed=1)
    g = torch.Generator().manual_seed(1)
    masked = kept = random = used = 0
    for _ in range(8):
        m = mask_tokens(ids, am, cfg, obj, generator=g)
        w = m.weights.bool()
        # exactly round(0.15 * 128) = 19 distinct positions per sequence without replacement
        assert (m.weights.sum(-1) == round(0.15 * n)).all()
        new = m.input_ids.gather(1, m.positions)[w]
        tgt = m.targets[w]
        masked += (new == MASK).sum().item()
        kept += (new == tgt).sum().item()
        random += ((new != MASK) & (new != tgt)).sum().item()
        used += w.sum().item()
    p_mask = masked / used
    sd = math.sqrt(0.85 * 0.15 / used)
    assert abs(p_mask - 0.85) < 5 * sd, p_mask
    assert random == 0
    assert masked + kept == used


def test_bert_style_random_tokens_when_asked():
    cfg = tiny_config()
    obj = ObjectiveConfig(mask_token_prob=0.8, random_token_prob=0.1)
    ids, am = batch(b=256, n=64, seed=2)
    m = mask_tokens(ids, am, cfg, obj, generator=torch.Generator().manual_seed(0))
    w = m.weights.bool()
    new = m.input_ids.gather(1, m.positions)[w]
    frac_mask = (new == MASK).float().mean().item()
    frac_diff = ((new != MASK) & (new != m.targets[w])).float().mean().item()
    n = w.sum().item()
    assert abs(frac_mask - 0.8) < 5 * math.sqrt(0.16 / n)
    # a random token equals the original 1/64 of the time
    assert abs(frac_diff - 0.1 * 63 / 64) < 5 * math.sqrt(0.09 / n)


@pytest.mark.parametrize("sampling", ["without_replacement", "with_replacement"])
def test_per_row_count_follows_each_rows_length(sampling):
    """round(0.15 * real tokens) slots a row, at least 1, at most 19 (n=128), [CLS]/[SEP] counted.

    Without replacement the slots are distinct positions; with replacement (official) they are
    draws, so a row may mask fewer distinct positions than it has slots.
    """
    cfg = tiny_config(max_position_embeddings=128)
    n = 128
    lengths = [3, 12, 40, 100, 128]  # 3 = [CLS] x [SEP]: one candidate, one slot
    ids = torch.randint(5, 64, (len(lengths), n), generator=torch.Generator().manual_seed(0))
    am = torch.zeros_like(ids)
    for row, length in enumerate(lengths):
        ids[row, 0], ids[row, length - 1], ids[row, length:] = CLS, SEP, PAD
        am[row, :length] = 1
    expected = [1, 2, 6, 15, 19]  # round(0.45)->1 (floor 1), 1.8, 6.0, 15.0, 19.2 (cap 19)
    m = mask_tokens(ids, am, cfg, ObjectiveConfig(mask_sampling=sampling),
                    generator=torch.Generator().manual_seed(0))
    assert m.weights.sum(-1).long().tolist() == expected
    for row, length in enumerate(lengths):
        used = m.positions[row][m.weights[row].bool()].tolist()
        assert all(0 < pos < length - 1 for pos in used)
        if sampling == "without_replacement":
            assert len(set(used)) == len(used)
        changed = (m.input_ids[row] != ids[row]).sum().item()
        assert changed <= len(set(used))


def test_with_replacement_reproduces_official_duplicates():
    """Drawing 19 of ~126 candidates with replacement repeats one in ~77% of sequences."""
    cfg = tiny_config(vocab_size=64)
    obj = ObjectiveConfig(mask_sampling="with_replacement")
    ids, am = batch(b=2000, n=128, seed=3)
    m = mask_tokens(ids, am, cfg, obj, generator=torch.Generator().manual_seed(0))
    distinct = torch.tensor([len(set(row.tolist())) for row in m.positions])
    has_dup = (distinct < 19).float().mean().item()
    c = 125  # candidates: 128 minus [CLS] and two [SEP]
    p_no_dup = math.prod((c - i) / c for i in range(19))
    assert abs(has_dup - (1 - p_no_dup)) < 0.04, (has_dup, 1 - p_no_dup)
    expected_distinct = c * (1 - (1 - 1 / c) ** 19)
    assert abs(distinct.float().mean().item() - expected_distinct) < 0.1


def test_same_seed_same_mask():
    cfg, obj = tiny_config(), ObjectiveConfig()
    ids, am = batch()
    m1 = mask_tokens(ids, am, cfg, obj, generator=torch.Generator().manual_seed(7))
    m2 = mask_tokens(ids, am, cfg, obj, generator=torch.Generator().manual_seed(7))
    m3 = mask_tokens(ids, am, cfg, obj, generator=torch.Generator().manual_seed(8))
    assert torch.equal(m1.input_ids, m2.input_ids) and torch.equal(m1.positions, m2.positions)
    assert not torch.equal(m1.input_ids, m3.input_ids)


# ----------------------------------------------------------------------------------- sampling

def test_gumbel_max_follows_softmax():
    """Chi-square goodness of fit of 200k Gumbel-max draws against softmax(logits / T)."""
    logits = torch.tensor([2.0, 1.0, 0.0, -1.0, 0.5, -3.0])
    for temperature in (1.0, 0.5):
        draws = 200_000
        g = torch.Generator().manual_seed(0)
        s = gumbel_max_sample(logits.expand(draws, -1), temperature=temperature, generator=g)
        counts = torch.bincount(s, minlength=6).double()
        expected = torch.softmax(logits.double() / temperature, -1) * draws
        chi2 = ((counts - expected) ** 2 / expected).sum().item()
        assert chi2 < 20.5, chi2  # chi-square 5 dof, p = 0.001


def test_sampling_draws_what_torch_multinomial_draws():
    """Two-sample chi-square: 200k draws of ours against 200k of ``torch.multinomial`` from the
    same softmax, per token (tokens with few expected draws pooled), over a long-tailed
    vocabulary of 300 with large tokens at both ends of the running sum, at two temperatures;
    tokens with a ``-inf`` logit are never drawn."""
    from scipy.stats import chi2
    g = torch.Generator().manual_seed(0)
    v, draws = 300, 200_000
    logits = torch.randn(v, generator=g) * 3  # probabilities from ~0.2 down to ~1e-10
    logits[[0, v - 1]] = logits.max() + 1.0
    logits[[5, 17]] = float("-inf")
    for temperature in (1.0, 0.7):
        ours = gumbel_max_sample(logits.expand(draws, -1), temperature=temperature, generator=g)
        probs = torch.softmax(logits.double() / temperature, -1)
        ref = torch.multinomial(probs.expand(4, -1), draws // 4, replacement=True, generator=g)
        a, b = (torch.bincount(s.flatten(), minlength=v).double() for s in (ours, ref))
        assert a[[5, 17]].sum() == 0
        common = probs * draws >= 20  # the rest pooled into one bin
        a = torch.cat([a[common], a[~common].sum()[None]])
        b = torch.cat([b[common], b[~common].sum()[None]])
        stat = ((a - b) ** 2 / (a + b).clamp_min(1)).sum().item()
        assert stat < chi2.ppf(0.999, len(a) - 1), (temperature, stat, len(a))


def test_sampling_reaches_a_rare_token_at_its_rate():
    """A token of probability 1e-4 beside one of 0.9999 is drawn at its rate."""
    logits = torch.tensor([0.0, math.log(1e-4 / (1 - 1e-4))])
    draws = 2_000_000
    s = gumbel_max_sample(logits.expand(draws, -1), generator=torch.Generator().manual_seed(3))
    expected = 1e-4 * draws  # 200
    assert abs((s == 1).sum().item() - expected) < 5 * math.sqrt(expected)


def test_gumbel_sampling_runs_in_float32_for_half_logits():
    """bf16 logits draw exactly what the same values in float32 draw: noise and sum are fp32.

    With the noise or the sum in bf16 (8 mantissa bits) many rows tie or round the other way,
    and a token 7 nats below the best (p ~ 1e-3) is drawn at the wrong rate.
    """
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(50_000, 8, generator=g).to(torch.bfloat16)
    logits[:, 0] = 4.0
    logits[:, 7] = -3.0
    logits.requires_grad_(True)
    s_half = gumbel_max_sample(logits, generator=torch.Generator().manual_seed(1))
    s_full = gumbel_max_sample(logits.detach().float(), generator=torch.Generator().manual_seed(1))
    assert s_half.dtype == torch.int64 and not s_half.requires_grad
    assert torch.equal(s_half, s_full)
    rare = torch.softmax(logits.detach().double(), -1)[:, 7].sum().item()  # expected count
    assert abs((s_half == 7).sum().item() - rare) < 5 * math.sqrt(rare), rare


def test_sample_equal_to_original_is_labelled_original():
    cfg, obj = tiny_config(), ObjectiveConfig()
    ids, am = batch(b=4, n=16)
    m = mask_tokens(ids, am, cfg, obj, generator=torch.Generator().manual_seed(0))
    sampled = m.targets.clone()
    sampled[:, 0] = (m.targets[:, 0] + 1) % 64  # one real replacement per row (slot 0 is used)
    corrupted, is_replaced = replace_tokens(ids, am, m, sampled)
    assert torch.equal(is_replaced.sum(-1), torch.ones(4, dtype=torch.long))
    assert torch.equal(corrupted[is_replaced], sampled[:, 0])
    assert torch.equal(corrupted[~is_replaced], ids[~is_replaced])


# ------------------------------------------------------------------------------ the objective

def test_loss_is_mlm_plus_50_bce_over_every_real_token():
    torch.manual_seed(0)
    model = Electra(tiny_config()).eval()
    ids, am = batch(pad_from=20)
    out = model(ids, am, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(out.loss, out.gen_loss + 50 * out.disc_loss)
    # recompute the discriminator loss by hand over non-padding tokens, [CLS]/[SEP] included
    logits = model.discriminator(out.corrupted_ids, am)
    y = out.is_replaced.float()
    bce = -(y * torch.log(torch.sigmoid(logits)) + (1 - y) * torch.log(1 - torch.sigmoid(logits)))
    torch.testing.assert_close(out.disc_loss, bce[am.bool()].mean(), rtol=1e-5, atol=1e-6)
    # the generator loss: cross-entropy of the full-position generator at the used slots
    full = model.generator(out.masked.input_ids, am)  # (b, n, v)
    w = out.masked.weights.bool()
    rows = torch.arange(ids.shape[0])[:, None].expand_as(out.masked.positions)
    picked = full[rows[w], out.masked.positions[w]]
    ce = torch.nn.functional.cross_entropy(picked, out.masked.targets[w])
    torch.testing.assert_close(out.gen_loss, ce, rtol=1e-5, atol=1e-6)


def test_metrics_match_a_count_by_hand():
    """Every metric recomputed with Python loops over the tokens the forward pass returned."""
    torch.manual_seed(0)
    model = Electra(tiny_config()).eval()
    ids, am = batch(vocab=8, pad_from=20)  # words 5, 6, 7 ...
    with torch.no_grad():
        model.generator.output_bias[5] = 10.0  # ... and a generator that always says 5
    out = model(ids, am, generator=torch.Generator().manual_seed(0))
    gen_hits = gen_used = 0
    for row in range(ids.shape[0]):
        for slot in range(out.masked.positions.shape[1]):
            if out.masked.weights[row, slot]:
                gen_used += 1
                gen_hits += int(out.gen_logits[row, slot].argmax() == out.masked.targets[row, slot])
    real = correct = predicted = replaced = hits = 0
    for row in range(ids.shape[0]):
        for pos in range(ids.shape[1]):
            if not am[row, pos]:
                continue
            says = bool(out.disc_logits[row, pos] > 0)
            truth = bool(out.corrupted_ids[row, pos] != ids[row, pos])
            real += 1
            correct += says == truth
            predicted += says
            replaced += truth
            hits += says and truth
    assert replaced > 0 and predicted > 0 and gen_hits > 0  # no ratio is a trivial 0/0 here
    expected = {"gen_accuracy": gen_hits / gen_used, "disc_accuracy": correct / real,
                "disc_precision": hits / predicted, "disc_recall": hits / replaced,
                "replaced_fraction": replaced / real, "masked_fraction": gen_used / real}
    assert {k: round(float(v), 6) for k, v in out.metrics.items()} == \
        {k: round(v, 6) for k, v in expected.items()}


def generator_only_params(model):
    disc = {id(p) for p in model.discriminator.parameters()}
    return [(n, p) for n, p in model.generator.named_parameters() if id(p) not in disc]


def test_discriminator_loss_puts_no_gradient_on_the_generator():
    torch.manual_seed(0)
    model = Electra(tiny_config())
    ids, am = batch()
    out = model(ids, am, generator=torch.Generator().manual_seed(0))
    out.disc_loss.backward()
    gen_only = generator_only_params(model)
    assert gen_only, "the generator has parameters of its own"
    for name, p in gen_only:
        assert p.grad is None or p.grad.abs().max() == 0, name
    assert model.discriminator.head_out.weight.grad.abs().max() > 0


def test_shared_embeddings_receive_both_losses():
    """Word, position and segment embeddings and their LayerNorm: a gradient from each loss."""
    torch.manual_seed(0)
    model = Electra(tiny_config())
    ids, am = batch()
    types = torch.zeros_like(ids)
    types[:, ids.shape[1] // 2:] = 1  # both segment rows are used
    shared = dict(model.discriminator.encoder.embeddings.named_parameters())
    assert set(shared) == {"word.weight", "position.weight", "segment.weight", "norm.weight",
                           "norm.bias"}
    for name in ("gen_loss", "disc_loss"):
        model.zero_grad()
        out = model(ids, am, types, generator=torch.Generator().manual_seed(0))
        getattr(out, name).backward()
        for pname, p in shared.items():
            assert p.grad is not None and p.grad.abs().sum() > 0, (name, pname)
        assert shared["segment.weight"].grad.abs().sum(-1).gt(0).all(), name  # both rows


@pytest.mark.parametrize("tying", ["none", "embeddings", "all"])
def test_tying_options(tying):
    cfg = tiny_config(tying=tying, generator_size=1.0 if tying == "all" else 0.5)
    model = Electra(cfg)
    g, d = model.generator.encoder, model.discriminator.encoder
    same_emb = g.embeddings.word.weight is d.embeddings.word.weight
    assert same_emb == (tying != "none")
    if tying != "none":
        for a, b in zip(g.embeddings.parameters(), d.embeddings.parameters()):
            assert a is b  # word, position, segment and the embedding LayerNorm
    assert (g.layers[0].attn.qkv.weight is d.layers[0].attn.qkv.weight) == (tying == "all")
    if tying == "embeddings":
        assert g.embed_proj is not d.embed_proj  # each keeps its own projection
    # the generator's output layer is its word-embedding matrix
    h = torch.randn(2, cfg.generator().hidden_size)
    gen = model.generator
    manual = gen.head_norm(torch.nn.functional.gelu(gen.head_dense(h))) @ g.embeddings.word.weight.T
    torch.testing.assert_close(gen.mlm_logits(h), manual + gen.output_bias)


def test_tying_all_needs_equal_sizes():
    with pytest.raises(ValueError, match="generator_size=1.0"):
        Electra(tiny_config(tying="all", generator_size=0.25))


def test_generator_is_scaled_at_the_same_depth():
    cfg = preset("small").model
    g = cfg.generator()
    assert (g.hidden_size, g.num_heads, g.intermediate_size, g.num_layers) == (64, 1, 256, 12)


def test_api_shapes():
    model = Electra(tiny_config()).eval()
    ids, am = batch(b=2, n=10)
    assert model.discriminator(ids).shape == (2, 10)
    assert model.generator(ids, am).shape == (2, 10, 64)
    assert model.discriminator(ids, am, torch.zeros_like(ids)).shape == (2, 10)


def test_tiny_batch_is_overfit():
    torch.manual_seed(0)
    model = Electra(tiny_config())
    ids, am = batch(b=4, n=16)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    first = None
    for step in range(150):
        # a fixed seed each step: the same mask and samples, so the batch can be memorised
        out = model(ids, am, generator=torch.Generator().manual_seed(0))
        first = first if first is not None else out.loss.item()
        opt.zero_grad()
        out.loss.backward()
        opt.step()
    assert out.loss.item() < 0.1 * first, (first, out.loss.item())
    assert float(out.metrics["disc_accuracy"]) == 1.0


def test_sequence_longer_than_positions_is_refused():
    model = Electra(tiny_config(max_position_embeddings=8))
    with pytest.raises(ValueError, match="max_position_embeddings"):
        model.discriminator(torch.ones(1, 9, dtype=torch.long))


# --------------------------------------------------------------------- position initialisation

def test_sinusoids_depend_on_the_offset_only():
    from minielectra.model.transformer import sinusoids
    table = sinusoids(40, 16)  # (n, d)
    assert table.shape == (40, 16)
    torch.testing.assert_close(table[0, 0::2], torch.zeros(8))  # sin(0)
    torch.testing.assert_close(table[0, 1::2], torch.ones(8))  # cos(0)
    gram = table @ table.T  # (n, n)
    for offset in (1, 3, 7):
        diagonal = torch.diagonal(gram, offset)
        torch.testing.assert_close(diagonal, diagonal[0].expand_as(diagonal), atol=1e-4, rtol=0)
    # at a model's width, nearer positions are more alike than far ones
    wide = sinusoids(40, 128) @ sinusoids(40, 128).T
    assert wide[10, 10] > wide[10, 11] > wide[10, 13] > wide[10, 20] > wide[10, 35]
    assert sinusoids(5, 7).shape == (5, 7)  # an odd width keeps its last sine


@pytest.mark.parametrize("tying", ["none", "embeddings"])
def test_sinusoidal_position_init_every_table_same_std(tying):
    from minielectra.model.transformer import sinusoids
    torch.manual_seed(0)
    model = Electra(tiny_config(position_init="sinusoidal", tying=tying))
    tables = [m.position.weight for m in model.modules()
              if type(m).__name__ == "Embeddings"]
    assert len(tables) == (2 if tying == "none" else 1)
    expected = sinusoids(64, 16)
    for table in tables:
        assert abs(float(table.detach().std()) - 0.02) < 1e-4  # the other weights' std
        torch.testing.assert_close(table / table.std(), expected / expected.std())
    # the default is the official one: the normal init, no structure over positions
    torch.manual_seed(0)
    plain = Electra(tiny_config(tying=tying))
    first = [m.position.weight for m in plain.modules() if type(m).__name__ == "Embeddings"][0]
    assert not torch.allclose(first / first.std(), expected / expected.std(), atol=0.1)
    # the word tables are drawn exactly as without the option
    torch.testing.assert_close(model.discriminator.encoder.embeddings.word.weight,
                               plain.discriminator.encoder.embeddings.word.weight)


def test_position_init_is_checked():
    with pytest.raises(ValueError, match="position_init"):
        Electra(tiny_config(position_init="rope"))

