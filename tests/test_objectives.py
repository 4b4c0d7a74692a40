"""The pre-training objectives (minielectra.objectives): each loss recomputed by hand on a tiny
batch (what is masked, what is predicted, which positions carry loss), where gradients may and may
not flow, ALBERT-style layer sharing, and the FLOPs count against torch's FlopCounterMode."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from minielectra.config import ModelConfig, ObjectiveConfig, RunConfig
from minielectra.model.electra import Electra
from minielectra.objectives import discriminative, flops, masked_lm
from minielectra.objectives.compute import build_model, compute, load_model

OBJECTIVES = ("electra", "mlm", "electra-15", "replace-mlm", "all-tokens-mlm")


def make(tiny_model_config, name="electra", *, seed=0, **model_kw):
    torch.manual_seed(seed)
    kw = dict(dropout=0.0, attention_dropout=0.0)
    kw.update(model_kw)
    return build_model(tiny_model_config(**kw), ObjectiveConfig(name=name))


def batch(b=3, n=12, vocab=50, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (b, n), generator=g)
    ids[:, 0], ids[:, -1] = 2, 3  # [CLS] ... [SEP]
    mask = torch.ones_like(ids)
    mask[1, -3:] = 0  # a padded row
    ids[1, -3:] = 0
    ids[1, -4] = 3
    return ids, mask


def rng(seed=7):
    return torch.Generator().manual_seed(seed)


def grads_of(model, loss):
    model.zero_grad(set_to_none=True)
    loss.backward(retain_graph=True)
    return {n: p.grad for n, p in model.named_parameters()}


def has_grad(g):
    return g is not None and bool(g.abs().sum() > 0)


# -------------------------------------------------------------------------------- the dispatch


def test_electra_is_exactly_the_model_forward(tiny_model_config):
    model = make(tiny_model_config)
    ids, mask = batch()
    a = model(ids, mask, generator=rng())
    b = compute(model, ids, mask, generator=rng())
    assert torch.equal(a.loss, b.loss) and torch.equal(a.corrupted_ids, b.corrupted_ids)


@pytest.mark.parametrize("name", OBJECTIVES)
def test_every_objective_trains_with_and_without_layer_sharing(tiny_model_config, name):
    for share in (False, True):
        model = make(tiny_model_config, name, share_layers=share)
        ids, mask = batch()
        out = compute(model, ids, mask, generator=rng())
        assert torch.isfinite(out.loss)
        out.loss.backward()
        enc = model.discriminator.encoder
        assert all(has_grad(p.grad) for p in enc.layers.parameters()), name


# --------------------------------------------------------------------------------------- mlm


def test_mlm_masks_like_bert_80_10_10(tiny_model_config):
    model = make(tiny_model_config, "mlm", max_position_embeddings=128)
    ids = torch.randint(5, 50, (400, 128), generator=rng(1))
    ids[:, 0], ids[:, -1] = 2, 3
    out = compute(model, ids, torch.ones_like(ids), generator=rng())
    m = out.masked
    used = m.weights.bool()
    got = m.input_ids.gather(1, m.positions)[used]
    orig = m.targets[used]
    n = used.sum().item()
    assert abs(n / ids.numel() - 0.15) < 0.01  # 15% of the tokens
    frac_mask = (got == 4).float().mean().item()
    frac_kept = (got == orig).float().mean().item()  # includes random draws equal to the original
    assert abs(frac_mask - 0.8) < 4 * math.sqrt(0.16 / n)
    assert abs(frac_kept - (0.1 + 0.1 / 50)) < 4 * math.sqrt(0.09 / n)
    # nothing outside the masked slots changed
    outside = torch.ones_like(ids, dtype=torch.bool).scatter(1, m.positions, ~used)
    assert torch.equal(m.input_ids[outside], ids[outside])


def test_mlm_loss_by_hand_is_the_masked_positions_only(tiny_model_config):
    model = make(tiny_model_config, "mlm")
    ids, mask = batch()
    out = compute(model, ids, mask, generator=rng())
    full = model.disc_mlm(out.masked.input_ids, mask)  # (b, n, v): logits at every position
    losses = []
    for row in range(ids.shape[0]):
        for slot in range(out.masked.positions.shape[1]):
            if out.masked.weights[row, slot]:
                pos = out.masked.positions[row, slot]
                losses.append(F.cross_entropy(full[row, pos], ids[row, pos]))
    assert torch.allclose(out.loss, torch.stack(losses).mean(), atol=1e-5)
    g = grads_of(model, out.loss)  # no generator, no discriminator head
    assert not any(has_grad(v) for k, v in g.items() if k.startswith("generator.")
                   and "embeddings" not in k)
    assert not has_grad(g["discriminator.head_out.weight"])
    assert has_grad(g["disc_mlm.head_dense.weight"])


def test_mlm_checkpoint_fine_tunes_its_own_encoder(tiny_model_config, tmp_path):
    from minielectra.finetune.classifier import FinetuneConfig, build_classifier
    from minielectra.finetune.glue.data import get_task
    model = make(tiny_model_config, "mlm")
    model.save_pretrained(tmp_path / "ckpt")
    loaded = load_model(tmp_path / "ckpt")
    assert loaded.objective.name == "mlm"
    assert loaded.disc_mlm.encoder is loaded.discriminator.encoder
    clf = build_classifier(loaded, get_task("sst2"), FinetuneConfig())
    for k, v in clf.encoder.state_dict().items():
        assert torch.equal(v, model.discriminator.encoder.state_dict()[k])


# -------------------------------------------------------------------------------- electra-15


def test_electra_15_discriminator_loss_only_at_masked_positions(tiny_model_config):
    model = make(tiny_model_config, "electra-15")
    ids, mask = batch()
    out = compute(model, ids, mask, generator=rng())
    full = model(ids, mask, generator=rng())  # same draws: same corruption
    assert torch.equal(out.corrupted_ids, full.corrupted_ids)
    terms = []
    for row in range(ids.shape[0]):
        for slot in range(out.masked.positions.shape[1]):
            if out.masked.weights[row, slot]:
                pos = out.masked.positions[row, slot]
                terms.append(F.binary_cross_entropy_with_logits(
                    full.disc_logits[row, pos], full.is_replaced[row, pos].float()))
    assert torch.allclose(out.disc_loss, torch.stack(terms).mean(), atol=1e-6)
    assert torch.allclose(out.loss, out.gen_loss + 50 * out.disc_loss)
    assert not torch.allclose(out.disc_loss, full.disc_loss)


# ------------------------------------------------------------------------------ replace-mlm


def test_replace_mlm_predicts_originals_from_generator_samples(tiny_model_config):
    model = make(tiny_model_config, "replace-mlm")
    ids, mask = batch()
    out = compute(model, ids, mask, generator=rng())
    m = out.masked
    used = m.weights.bool()
    # the kept network sees the samples, never [MASK]
    assert not (out.corrupted_ids == 4).any()
    assert torch.equal(out.corrupted_ids.gather(1, m.positions)[used], out.sampled_ids[used])
    full = model.disc_mlm(out.corrupted_ids, mask)
    hand = torch.stack([F.cross_entropy(full[r, m.positions[r, s]], ids[r, m.positions[r, s]])
                        for r in range(3) for s in range(m.positions.shape[1]) if used[r, s]])
    assert torch.allclose(out.disc_loss, hand.mean(), atol=1e-5)
    assert torch.allclose(out.loss, out.gen_loss + out.disc_loss)
    # the kept network's loss sends nothing into the generator (the sample is discrete)
    g = grads_of(model, out.disc_loss)
    assert not any(has_grad(v) for k, v in g.items() if k.startswith("generator.")
                   and "embeddings" not in k)


# --------------------------------------------------------------------------- all-tokens-mlm


def test_copy_mechanism_against_the_probabilities_written_out():
    g = rng(3)
    vocab_logits = torch.randn(2, 5, 7, generator=g)
    gate = torch.randn(2, 5, generator=g)
    inputs = torch.randint(7, (2, 5), generator=g)
    targets = torch.where(torch.rand(2, 5, generator=g) < 0.5, inputs,
                          torch.randint(7, (2, 5), generator=g))
    got = masked_lm.copy_log_prob(vocab_logits, gate, inputs, targets)
    for r in range(2):
        for t in range(5):
            d = 1 / (1 + math.exp(-gate[r, t].item()))
            soft = torch.softmax(vocab_logits[r, t].double(), 0)[targets[r, t]].item()
            p = d * (inputs[r, t] == targets[r, t]).item() + (1 - d) * soft
            assert abs(got[r, t].item() - math.log(p)) < 1e-5


def test_all_tokens_mlm_loss_covers_every_real_token(tiny_model_config):
    model = make(tiny_model_config, "all-tokens-mlm")
    ids, mask = batch()
    out = compute(model, ids, mask, generator=rng())
    d = model.discriminator
    hidden = d.encoder(out.corrupted_ids, mask)
    gate = d.head_out(F.gelu(d.head_dense(hidden))).squeeze(-1)
    probs = model.disc_mlm.mlm_logits(hidden).softmax(-1)
    terms = []
    for r in range(3):
        for t in range(ids.shape[1]):
            if mask[r, t]:
                dt = torch.sigmoid(gate[r, t])
                copy = dt * (out.corrupted_ids[r, t] == ids[r, t])
                terms.append(-torch.log(copy + (1 - dt) * probs[r, t, ids[r, t]]))
    assert len(terms) == int(mask.sum())
    assert torch.allclose(out.disc_loss, torch.stack(terms).mean(), atol=1e-5)
    g = grads_of(model, out.disc_loss)
    assert has_grad(g["discriminator.head_out.weight"])  # the copy gate learns
    assert has_grad(g["disc_mlm.head_dense.weight"])


# ------------------------------------------------------------------- training procedures


def two_stage_model(tiny_model_config):
    torch.manual_seed(0)
    obj = ObjectiveConfig(procedure="two-stage", two_stage_fraction=0.5)
    return Electra(tiny_model_config(generator_size=1.0, tying="none", dropout=0.0,
                                     attention_dropout=0.0), obj)


def test_two_stage_trains_generator_then_a_copy_of_it_with_the_generator_frozen(
        tiny_model_config):
    model = two_stage_model(tiny_model_config)
    ids, mask = batch()
    first = compute(model, ids, mask, generator=rng(), step=0, max_steps=10)
    g = grads_of(model, first.loss)
    assert not any(has_grad(v) for k, v in g.items() if k.startswith("discriminator."))
    assert has_grad(g["generator.head_dense.weight"])
    assert not torch.equal(model.discriminator.encoder.layers[0].ffn_in.weight,
                           model.generator.encoder.layers[0].ffn_in.weight)
    second = compute(model, ids, mask, generator=rng(), step=5, max_steps=10)  # the switch
    for k, v in model.generator.encoder.state_dict().items():
        assert torch.equal(v, model.discriminator.encoder.state_dict()[k]), k
    g = grads_of(model, second.loss)
    assert not any(has_grad(v) for k, v in g.items() if k.startswith("generator."))
    assert has_grad(g["discriminator.head_out.weight"])
    model.discriminator.encoder.layers[0].ffn_in.weight.data.add_(1.0)
    compute(model, ids, mask, generator=rng(), step=6, max_steps=10)  # no second copy
    assert not torch.equal(model.discriminator.encoder.layers[0].ffn_in.weight,
                           model.generator.encoder.layers[0].ffn_in.weight)


def test_two_stage_needs_equal_sizes():
    cfg = RunConfig()
    cfg.objective.procedure = "two-stage"
    with pytest.raises(ValueError, match="generator_size=1.0"):
        cfg.validate()
    cfg.objective.name, cfg.model.generator_size = "mlm", 1.0
    with pytest.raises(ValueError, match="needs objective.name='electra'"):
        cfg.objective.validate()


def test_reinforce_loss_by_hand_and_only_into_the_generator(tiny_model_config):
    torch.manual_seed(0)
    model = Electra(tiny_model_config(dropout=0.0, attention_dropout=0.0),
                    ObjectiveConfig(procedure="adversarial"))
    ids, mask = batch()
    out = model(ids, mask, generator=rng())
    adv = discriminative.reinforce_loss(out)
    m, used = out.masked, out.masked.weights.bool()
    rewards, logps = [], []
    for r in range(3):
        for s in range(m.positions.shape[1]):
            if used[r, s]:
                pos = m.positions[r, s]
                p_rep = torch.sigmoid(out.disc_logits[r, pos]).item()
                rewards.append(-math.log(p_rep if out.is_replaced[r, pos] else 1 - p_rep))
                logps.append(torch.log_softmax(out.gen_logits[r, s], -1)[out.sampled_ids[r, s]])
    base = sum(rewards) / len(rewards)
    hand = -sum((rw - base) * lp for rw, lp in zip(rewards, logps)) / len(rewards)
    assert torch.allclose(adv, hand, atol=1e-5)
    g = grads_of(model, adv)
    assert not any(has_grad(v) for k, v in g.items() if k.startswith("discriminator.")
                   and "embeddings" not in k)
    assert has_grad(g["generator.head_dense.weight"])
    full = compute(model, ids, mask, generator=rng())
    assert torch.allclose(full.loss, out.loss + adv, atol=1e-5)


# ------------------------------------------------------------------------------ layer sharing


def test_shared_layers_apply_one_block_num_layers_times(tiny_model_config):
    torch.manual_seed(0)
    cfg = tiny_model_config(num_layers=3, share_layers=True, dropout=0.0, attention_dropout=0.0)
    model = Electra(cfg)
    enc = model.discriminator.encoder
    assert len(enc.layers) == 1
    ids, mask = batch()
    x = enc.embed_proj(enc.embeddings(ids))
    from minielectra.model.attention import padding_mask
    for _ in range(3):
        x = enc.layers[0](x, padding_mask(mask))
    assert torch.allclose(enc(ids, mask), x)
    unshared = Electra(tiny_model_config(num_layers=3))
    block = sum(p.numel() for p in enc.layers[0].parameters())
    n_shared = sum(p.numel() for p in enc.parameters())
    n_full = sum(p.numel() for p in unshared.discriminator.encoder.parameters())
    assert n_full - n_shared == 2 * block


def test_shared_layers_save_load_and_fine_tune(tiny_model_config, tmp_path):
    from minielectra.finetune.classifier import (FinetuneConfig, build_classifier,
                                              layerwise_param_groups)
    from minielectra.finetune.glue.data import get_task
    model = make(tiny_model_config, "electra", num_layers=3, share_layers=True)
    model.save_pretrained(tmp_path / "ckpt")
    loaded = Electra.from_pretrained(tmp_path / "ckpt")
    assert loaded.config.share_layers and len(loaded.discriminator.encoder.layers) == 1
    ids, mask = batch()
    assert torch.equal(loaded.discriminator(ids, mask), model.discriminator(ids, mask))
    clf = build_classifier(loaded, get_task("sst2"), FinetuneConfig())
    groups = layerwise_param_groups(clf, FinetuneConfig())  # every parameter once
    assert sum(p.numel() for g in groups for p in g["params"]) == sum(
        p.numel() for p in clf.parameters())


# ------------------------------------------------------------------------------------- FLOPs


def flop_config(name, **kw):
    cfg = RunConfig()
    cfg.model = ModelConfig(vocab_size=300, embedding_size=16, hidden_size=32, num_layers=2,
                            num_heads=2, intermediate_size=64, max_position_embeddings=64,
                            generator_size=0.5, attention="reference", dropout=0.0,
                            attention_dropout=0.0, pad_token_id=0, cls_token_id=2,
                            sep_token_id=3, mask_token_id=4, **kw)
    cfg.objective.name = name
    cfg.train.batch_size, cfg.data.max_seq_len = 4, 32
    return cfg


def counted(cfg, step=0):
    torch.manual_seed(0)
    model = build_model(cfg.model, cfg.objective)
    ids = torch.randint(5, 300, (4, 32), generator=rng(0))
    ids[:, 0], ids[:, -1] = 2, 3
    with FlopCounterMode(display=False) as fc:
        out = compute(model, ids, torch.ones_like(ids), generator=rng(), step=step, max_steps=10)
        out.loss.backward()
    return fc.get_total_flops()


@pytest.mark.parametrize("name", OBJECTIVES)
def test_flops_per_step_match_torch_flop_counter(name):
    """The reference attention path (explicit einsums); torch counts no FLOPs for the fused CPU
    SDPA kernel, so the count below is the one a GPU's fused kernels also perform."""
    for kw in ({}, {"share_layers": True}):
        cfg = flop_config(name, **kw)
        expected = flops.train_flops_per_step(cfg)
        assert abs(counted(cfg) - expected) <= 0.02 * expected, (name, kw)


def test_flops_of_two_stage_stages():
    cfg = flop_config("electra", tying="none")
    cfg.model.generator_size = 1.0
    cfg.objective.procedure, cfg.train.max_steps = "two-stage", 10
    for stage, step in ((1, 0), (2, 7)):
        expected = flops.train_flops_per_step(cfg, stage=stage)
        assert abs(counted(cfg, step) - expected) <= 0.02 * expected
    assert flops.run_flops(cfg, 10) == 5 * (flops.train_flops_per_step(cfg, stage=1)
                                             + flops.train_flops_per_step(cfg, stage=2))


def test_flops_closed_form_for_one_layer():
    """One encoder layer written out: 24 b n d^2 (+4 b n^2 d) at f = 4d, as in Kaplan et al."""
    cfg = ModelConfig(hidden_size=64, intermediate_size=256, embedding_size=64, num_layers=1)
    b, n = 2, 10
    assert flops.encoder_flops(cfg, b, n) == 24 * b * n * 64 ** 2 + 4 * b * n * n * 64


# What google-research/electra's flops_computation.py prints for its entries (`python
# flops_computation.py`): total pre-training FLOPs = per-step FLOPs x the entry's steps.
OFFICIAL_SCRIPT = {"electra_small": (1.293743798272e18, 1e6),  # 256/64 wide, b 128, n 128
                   "electra_base": (6.424541834277683e19, 766_000),  # 768/256 wide, b 256, n 512
                   "bert_small": (1.4187399146496e18, 1.45e6)}  # BERT-Small, b 128, n 128


@pytest.mark.parametrize("entry, preset_name, objective", [
    ("electra_small", "small", "electra"), ("electra_base", "base", "electra"),
    ("bert_small", "small", "mlm")])
def test_official_flops_match_the_official_scripts_figures(entry, preset_name, objective):
    from minielectra.config import apply_overrides, preset
    cfg = apply_overrides(preset(preset_name), [f"objective.name={objective}"])
    total, steps = OFFICIAL_SCRIPT[entry]
    assert flops.official_train_flops(cfg) * steps == pytest.approx(total, rel=1e-12)


def test_official_flops_differ_from_ours_as_the_tutorial_says():
    """Same matmuls, counted 2x instead of 3x, plus one-hot embeddings and element-wise work."""
    from minielectra.config import preset
    cfg = preset("small")
    ours, official = flops.train_flops_per_step(cfg), flops.official_train_flops(cfg)
    assert round(ours / 1e12, 2) == 1.15 and round(official / 1e12, 2) == 1.29
    untied = preset("small")
    untied.model.tying = "none"  # the generator's embeddings then have its own width, 64
    assert flops.official_train_flops(untied) < official
    with pytest.raises(ValueError, match="electra or mlm"):
        bad = preset("small")
        bad.objective.name = "replace-mlm"
        flops.official_train_flops(bad)


def test_mlm_builds_no_generator(tiny_model_config, tmp_path):
    """BERT's baseline never runs a generator, so it has none, saved or loaded."""
    torch.manual_seed(0)
    mlm = build_model(tiny_model_config(), ObjectiveConfig(name="mlm"))
    torch.manual_seed(0)
    electra = Electra(tiny_model_config(), ObjectiveConfig(name="electra"))
    assert mlm.generator is None and not any(k.startswith("generator.") for k in mlm.state_dict())
    assert any(k.startswith("generator.") for k in electra.state_dict())
    assert sum(p.numel() for p in mlm.parameters()) < sum(p.numel() for p in electra.parameters())
    mlm.save_pretrained(tmp_path / "mlm")
    again = load_model(tmp_path / "mlm")
    assert again.generator is None and again.objective.name == "mlm"
    torch.testing.assert_close(again.state_dict(), mlm.state_dict())
