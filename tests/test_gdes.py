"""model.tying=gdes: the discriminator reads stop-gradient(generator's tables) + its own residual.

References: a naive re-computation of the embedding layer, autograd's gradients, and transformers'
ELECTRA for the export.
"""

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from minielectra import Electra, ModelConfig
from minielectra.model.gdes import ResidualEmbeddings, plain_state_dict, word_embeddings
from minielectra.model.transformer import Encoder

V = 50


def config(**kw) -> ModelConfig:
    base = dict(vocab_size=V, embedding_size=16, hidden_size=32, num_layers=2, num_heads=4,
                intermediate_size=64, max_position_embeddings=24, dropout=0.0,
                attention_dropout=0.0, generator_size=0.5, tying="gdes",
                cls_token_id=2, sep_token_id=3, mask_token_id=4)
    base.update(kw)
    return ModelConfig(**base)


def batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, V, (3, 10), generator=g)
    ids[:, 0] = 2
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    types = torch.zeros_like(ids)
    types[:, 5:] = 1
    return ids, mask, types


def perturbed(seed=0) -> Electra:
    """A gdes model with every parameter off its init (a zero residual would hide a bug)."""
    torch.manual_seed(seed)
    model = Electra(config())
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=g))
    return model.eval()


def test_structure_and_zero_residual_at_init():
    torch.manual_seed(0)
    model = Electra(config())
    emb = model.discriminator.encoder.embeddings
    assert isinstance(emb, ResidualEmbeddings)
    assert emb.base is model.generator.encoder.embeddings  # the generator owns the tables
    assert emb.norm is not emb.base.norm  # the discriminator's own LayerNorm
    for t in ("word", "position", "segment"):
        assert torch.count_nonzero(getattr(emb, f"{t}_delta")) == 0
    ids, _, types = batch()
    # At init the discriminator's input is exactly the generator's embedding layer output.
    torch.testing.assert_close(emb(ids, types), emb.base(ids, types), rtol=0, atol=0)


def test_forward_matches_naive_sum_of_tables():
    emb = perturbed().discriminator.encoder.embeddings
    ids, _, types = batch()
    b = emb.base
    x = (F.embedding(ids, b.word.weight + emb.word_delta)
         + (b.position.weight + emb.position_delta)[:ids.shape[1]]
         + F.embedding(types, b.segment.weight + emb.segment_delta))
    expected = F.layer_norm(x, (16,), emb.norm.weight, emb.norm.bias, emb.norm.eps)
    torch.testing.assert_close(emb(ids, types), expected)
    torch.testing.assert_close(emb(ids), emb(ids, torch.zeros_like(ids)))


def test_gradients_are_disentangled():
    model = perturbed().train()
    ids, mask, types = batch()
    emb = model.discriminator.encoder.embeddings
    out = model(ids, mask, types, generator=torch.Generator().manual_seed(0))
    out.disc_loss.backward(retain_graph=True)
    for t in ("word", "position", "segment"):
        assert getattr(emb.base, t).weight.grad is None  # stop-gradient: nothing from RTD
        assert getattr(emb, f"{t}_delta").grad.abs().sum() > 0
    model.zero_grad(set_to_none=True)
    out.gen_loss.backward()
    assert emb.base.word.weight.grad.abs().sum() > 0  # the MLM trains the shared tables
    assert emb.word_delta.grad is None


def test_folded_state_loads_into_a_plain_encoder():
    model = perturbed()
    ids, mask, types = batch()
    plain = Encoder(model.config).eval()
    plain.load_state_dict(plain_state_dict(model.discriminator.encoder))  # strict: same keys
    with torch.no_grad():
        torch.testing.assert_close(plain(ids, mask, types),
                                   model.discriminator.encoder(ids, mask, types))
    emb = model.discriminator.encoder.embeddings
    torch.testing.assert_close(word_embeddings(emb), emb.base.word.weight + emb.word_delta)


def test_other_tyings_state_dict_unchanged():
    torch.manual_seed(0)
    model = Electra(config(tying="embeddings"))
    state = model.discriminator.state_dict()
    assert plain_state_dict(model.discriminator).keys() == state.keys()
    assert all(plain_state_dict(model.discriminator)[k] is state[k] or
               torch.equal(plain_state_dict(model.discriminator)[k], state[k]) for k in state)


def test_checkpoint_round_trip_keeps_the_sharing(tmp_path):
    model = perturbed()
    model.save_pretrained(tmp_path / "ckpt")
    back = Electra.from_pretrained(tmp_path / "ckpt").eval()
    assert back.discriminator.encoder.embeddings.base is back.generator.encoder.embeddings
    ids, mask, types = batch()
    with torch.no_grad():
        torch.testing.assert_close(back.discriminator(ids, mask, types),
                                   model.discriminator(ids, mask, types), rtol=0, atol=0)


def test_finetuning_classifier_gets_the_folded_encoder():
    from minielectra.finetune.classifier import FinetuneConfig, build_classifier
    from minielectra.finetune.glue.data import get_task
    model = perturbed()
    clf = build_classifier(model, get_task("sst2"), FinetuneConfig(encoder_dropout=0.0)).eval()
    ids, mask, types = batch()
    with torch.no_grad():
        torch.testing.assert_close(clf.encoder(ids, mask, types),
                                   model.discriminator.encoder(ids, mask, types))


def test_squad_span_model_gets_the_folded_encoder():
    from minielectra.finetune.classifier import FinetuneConfig
    from minielectra.finetune.squad.model import build_span_qa
    model = perturbed()
    qa = build_span_qa(model, FinetuneConfig(encoder_dropout=0.0)).eval()
    ids, mask, types = batch()
    with torch.no_grad():
        torch.testing.assert_close(qa.encoder(ids, mask, types),
                                   model.discriminator.encoder(ids, mask, types))


def test_export_to_transformers_folds_the_residual(tmp_path):
    transformers = pytest.importorskip("transformers")
    from minielectra.model import hf
    model = perturbed()
    hf.export(model, tmp_path / "hf")
    disc = transformers.ElectraForPreTraining.from_pretrained(tmp_path / "hf" / "discriminator")
    gen = transformers.ElectraForMaskedLM.from_pretrained(tmp_path / "hf" / "generator")
    ids, mask, types = batch()
    with torch.no_grad():
        torch.testing.assert_close(disc.eval()(ids, mask, types).logits,
                                   model.discriminator(ids, mask, types), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(gen.eval()(ids, mask, types).logits,
                                   model.generator(ids, mask, types), rtol=1e-5, atol=1e-5)
    back = hf.load(tmp_path / "hf", Electra)  # two plain embedding sets: read back as untied
    assert back.config.tying == "none"


def test_config_checks():
    with pytest.raises(ValueError, match="none|embeddings|all|gdes"):
        Electra(config(tying="shared"))
    from minielectra.config import RunConfig
    cfg = RunConfig(model=config(generator_size=1.0))
    cfg.objective = dataclasses.replace(cfg.objective, procedure="two-stage")
    with pytest.raises(ValueError, match="two-stage"):
        cfg.validate()
