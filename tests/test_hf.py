"""transformers interop: logits match ElectraForPreTraining / ElectraForMaskedLM both ways.

Reference: transformers' own modeling_electra.py (a test-only dependency), random weights.
"""

import json
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file, save_file

from minielectra import Electra, ModelConfig
from minielectra.model.storage import CheckpointError

transformers = pytest.importorskip("transformers")
from transformers import ElectraConfig, ElectraForMaskedLM, ElectraForPreTraining  # noqa: E402
from minielectra.model import convert as model_convert
from minielectra.model import hf

V = 100
# (embedding, disc hidden, disc heads, disc ffn, generator fraction)
SHAPES = {
    "emb=hidden": (32, 32, 2, 64, 0.5),  # the generator (hidden 16) still projects 32 -> 16
    "emb<hidden": (16, 64, 4, 128, 0.25),  # ELECTRA-Small's factorised embeddings
    "gen=disc": (32, 32, 2, 64, 1.0),  # Small++/Base: no projection in either network
}


def perturb(module, seed):
    """Every parameter off its init (biases 0, LayerNorm 1 would hide a swapped name)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=g))
    return module.eval()


def inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, V, (3, 12), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0  # padding
    mask[2, 3:] = 0
    types = torch.zeros_like(ids)
    types[:, 6:] = 1
    return dict(input_ids=ids, attention_mask=mask, token_type_ids=types)


def hf_config(emb, hidden, heads, ffn, scale=1.0, **kw):
    return ElectraConfig(vocab_size=V, embedding_size=emb, hidden_size=int(hidden * scale),
                         num_attention_heads=max(1, round(heads * scale)),
                         intermediate_size=int(ffn * scale), num_hidden_layers=2,
                         max_position_embeddings=40, type_vocab_size=2, **kw)


def hf_pair(shape, *, tie=True, seed=0):
    """A random HF discriminator and generator; ``tie`` copies the embeddings like google's."""
    emb, hidden, heads, ffn, frac = SHAPES[shape]
    torch.manual_seed(seed)
    disc = perturb(ElectraForPreTraining(hf_config(emb, hidden, heads, ffn)), seed)
    gen = perturb(ElectraForMaskedLM(hf_config(emb, hidden, heads, ffn, frac)), seed + 1)
    if tie:
        gen.electra.embeddings.load_state_dict(disc.electra.embeddings.state_dict())
    return disc, gen


def ours(shape, tying="embeddings", seed=0):
    emb, hidden, heads, ffn, frac = SHAPES[shape]
    torch.manual_seed(seed)
    cfg = ModelConfig(vocab_size=V, embedding_size=emb, hidden_size=hidden, num_layers=2,
                      num_heads=heads, intermediate_size=ffn, max_position_embeddings=40,
                      generator_size=1.0 if tying == "all" else frac, tying=tying,
                      cls_token_id=2, sep_token_id=3, mask_token_id=4)
    return perturb(Electra(cfg), seed)


def assert_same_logits(model, disc, gen):
    x = inputs()
    with torch.no_grad():
        if disc is not None:
            torch.testing.assert_close(model.discriminator(**x), disc(**x).logits,
                                       rtol=1e-5, atol=1e-5)
        if gen is not None:
            torch.testing.assert_close(model.generator(**x), gen(**x).logits,
                                       rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------------- import


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("tie", [True, False])
def test_import_matches_transformers(tmp_path, shape, tie):
    disc, gen = hf_pair(shape, tie=tie)
    disc.save_pretrained(tmp_path / "d")
    gen.save_pretrained(tmp_path / "g")
    model = Electra.from_pretrained(tmp_path / "d", generator=tmp_path / "g").eval()
    assert model.config.tying == ("embeddings" if tie else "none")
    assert model.config.generator().hidden_size == gen.config.hidden_size
    assert_same_logits(model, disc, gen)


def test_import_subdirs_and_pytorch_model_bin(tmp_path):
    """The export layout (discriminator/, generator/) and an old-style .bin with position_ids
    and without the tied generator_lm_head.weight."""
    disc, gen = hf_pair("emb<hidden")
    disc.save_pretrained(tmp_path / "hf" / "discriminator")
    gen.config.save_pretrained(tmp_path / "hf" / "generator")
    state = dict(gen.state_dict())
    del state["generator_lm_head.weight"]
    state["electra.embeddings.position_ids"] = torch.arange(40)[None]
    torch.save(state, tmp_path / "hf" / "generator" / "pytorch_model.bin")
    model = Electra.from_pretrained(tmp_path / "hf").eval()
    assert model.config.tying == "embeddings"
    assert_same_logits(model, disc, gen)


@pytest.mark.parametrize("role", ["discriminator", "generator"])
def test_one_network_only_warns_and_loads_it(tmp_path, caplog, role):
    disc, gen = hf_pair("emb=hidden")
    given = disc if role == "discriminator" else gen
    given.save_pretrained(tmp_path / role)
    model = Electra.from_pretrained(tmp_path / role).eval()
    other = "generator" if role == "discriminator" else "discriminator"
    assert f"has no {other}" in caplog.text and "fresh" in caplog.text
    assert_same_logits(model, disc if given is disc else None, gen if given is gen else None)
    # the fresh network shares the loaded embeddings (ELECTRA's tying)
    assert model.generator.encoder.embeddings is model.discriminator.encoder.embeddings


def _edit(directory, edit):
    state = load_file(directory / "model.safetensors")
    edit(state)
    save_file(state, directory / "model.safetensors", metadata={"format": "pt"})


def test_bad_hf_checkpoints_name_key_and_shapes(tmp_path):
    disc, _ = hf_pair("emb<hidden")
    d = tmp_path / "d"
    disc.save_pretrained(d)
    q = "electra.encoder.layer.1.attention.self.query.weight"
    _edit(d, lambda s: s.__setitem__(q, torch.zeros(64, 63)))
    with pytest.raises(CheckpointError) as e:
        Electra.from_pretrained(d)
    assert f"shape mismatch for {q}: checkpoint (64, 63), model (64, 64)" in str(e.value)

    disc.save_pretrained(d)
    ln = "electra.encoder.layer.0.output.LayerNorm.bias"
    _edit(d, lambda s: (s.pop(ln), s.__setitem__("pooler.dense.weight", torch.zeros(2, 3))))
    with pytest.raises(CheckpointError) as e:
        Electra.from_pretrained(d)
    assert f"missing key {ln}: model (64)" in str(e.value)
    assert "unexpected key pooler.dense.weight: checkpoint (2, 3)" in str(e.value)


def test_untied_generator_output_layer_is_refused(tmp_path):
    _, gen = hf_pair("emb=hidden")
    gen.save_pretrained(tmp_path / "g")
    _edit(tmp_path / "g", lambda s: s.__setitem__("generator_lm_head.weight", torch.ones(V, 32)))
    with pytest.raises(CheckpointError, match="generator_lm_head.weight"):
        Electra.from_pretrained(tmp_path / "g")


def test_unsupported_activation_is_refused(tmp_path):
    disc = ElectraForPreTraining(hf_config(16, 32, 2, 64, hidden_act="gelu_new"))
    disc.save_pretrained(tmp_path / "d")
    with pytest.raises(ValueError, match="gelu_new"):
        Electra.from_pretrained(tmp_path / "d")


# ------------------------------------------------------------------------------- export


@pytest.mark.parametrize("shape, tying", [(s, "embeddings") for s in SHAPES]
                         + [("gen=disc", "none"), ("gen=disc", "all")])
def test_export_loads_in_transformers_with_same_logits(tmp_path, shape, tying):
    model = ours(shape, tying)
    if tying == "all":  # one encoder serves both networks; transformers gets two equal copies
        assert model.generator.encoder is model.discriminator.encoder
    hf.export(model, tmp_path / "hf")
    disc, info_d = ElectraForPreTraining.from_pretrained(tmp_path / "hf" / "discriminator",
                                                         output_loading_info=True)
    gen, info_g = ElectraForMaskedLM.from_pretrained(tmp_path / "hf" / "generator",
                                                     output_loading_info=True)
    for info in (info_d, info_g):
        assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys"))
    assert_same_logits(model, disc.eval(), gen.eval())


@pytest.mark.parametrize("tying", ["none", "embeddings", "all"])
def test_export_import_round_trip_recovers_tying(tmp_path, tying):
    model = ours("emb=hidden", tying)
    hf.export(model, tmp_path / "hf")
    back = hf.load(tmp_path / "hf", Electra)
    assert back.config == model.config  # the special ids travel as extra config keys
    a, b = model.state_dict(), back.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert (back.generator.encoder is back.discriminator.encoder) == (tying == "all")


def test_the_objective_travels_with_an_export(tmp_path):
    from minielectra.config import ObjectiveConfig
    model = Electra(ours("emb=hidden", "embeddings").config,
                    ObjectiveConfig(mask_token_prob=1.0, temperature=0.5))
    hf.export(model, tmp_path / "hf")
    assert hf.load(tmp_path / "hf", Electra).objective == model.objective
    # a transformers dir without the key (google's): the paper's objective
    for d in ("discriminator", "generator"):
        config = json.loads((tmp_path / "hf" / d / "config.json").read_text())
        config.pop(hf.OBJECTIVE_KEY)
        (tmp_path / "hf" / d / "config.json").write_text(json.dumps(config))
    assert hf.load(tmp_path / "hf", Electra).objective == ObjectiveConfig()
    config[hf.OBJECTIVE_KEY] = {"mask_tokn_prob": 1.0}
    (tmp_path / "hf" / "generator" / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=r"generator/config.json: minielectra_objective: "
                       r".*objective.mask_tokn_prob"):
        hf.load(tmp_path / "hf" / "generator", Electra)


def test_convert_both_directions(tmp_path):
    disc, gen = hf_pair("emb<hidden")
    disc.save_pretrained(tmp_path / "hf" / "discriminator")
    gen.save_pretrained(tmp_path / "hf" / "generator")
    model_convert.convert(tmp_path / "hf", tmp_path / "ckpt", direction="from_hf")
    assert json.loads((tmp_path / "ckpt" / "config.json").read_text())["format"] == "minielectra"
    model_convert.convert(tmp_path / "ckpt", tmp_path / "hf2", direction="to_hf")
    disc2 = ElectraForPreTraining.from_pretrained(tmp_path / "hf2" / "discriminator").eval()
    gen2 = ElectraForMaskedLM.from_pretrained(tmp_path / "hf2" / "generator").eval()
    assert_same_logits(Electra.from_pretrained(tmp_path / "ckpt").eval(), disc, gen)
    assert_same_logits(Electra.from_pretrained(tmp_path / "ckpt").eval(), disc2, gen2)
    with pytest.raises(ValueError, match="direction"):
        model_convert.convert(tmp_path / "ckpt", tmp_path / "x", direction="sideways")


def test_convert_command_both_directions(tmp_path, capsys):
    from minielectra.cli import main
    disc, gen = hf_pair("emb<hidden")
    disc.save_pretrained(tmp_path / "d")
    gen.save_pretrained(tmp_path / "g")
    assert main(["convert", "--from-hf", str(tmp_path / "d"), "--generator", str(tmp_path / "g"),
                 "--out", str(tmp_path / "ckpt")]) == 0
    assert json.loads(capsys.readouterr().out)["direction"] == "from_hf"
    assert_same_logits(Electra.from_pretrained(tmp_path / "ckpt").eval(), disc, gen)
    assert main(["convert", "--to-hf", str(tmp_path / "ckpt"), "--out", str(tmp_path / "hf")]) == 0
    assert json.loads(capsys.readouterr().out)["out"] == str(tmp_path / "hf")
    assert_same_logits(Electra.from_pretrained(tmp_path / "ckpt").eval(),
                       ElectraForPreTraining.from_pretrained(tmp_path / "hf" / "discriminator"),
                       ElectraForMaskedLM.from_pretrained(tmp_path / "hf" / "generator"))
    # --generator belongs to --from-hf: one line on stderr, exit code 2, nothing written
    assert main(["convert", "--to-hf", str(tmp_path / "ckpt"), "--generator", str(tmp_path / "g"),
                 "--out", str(tmp_path / "x")]) == 2
    assert "generator= is only for" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_vocab_travels_and_sets_special_ids(tmp_path):
    tok = pytest.importorskip("minielectra.data.tokenizer")
    tokens = [f"w{i}" for i in range(V - 5)]
    tokens[10:10] = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]  # ids 10..14
    model = ours("emb=hidden")
    model.tokenizer = tok.WordPieceTokenizer(tokens)
    hf.export(model, tmp_path / "hf")
    for role in ("discriminator", "generator"):
        assert (tmp_path / "hf" / role / "vocab.txt").read_text().split() == tokens
    # a google-style directory: config without our extra keys, ids come from vocab.txt
    disc, _ = hf_pair("emb=hidden")
    disc.save_pretrained(tmp_path / "d")
    (tmp_path / "d" / "vocab.txt").write_text("\n".join(tokens) + "\n")
    back = Electra.from_pretrained(tmp_path / "d")
    assert (back.config.cls_token_id, back.config.sep_token_id, back.config.mask_token_id) == \
        (12, 13, 14)
    assert back.tokenizer.tokens == tokens


def test_hf_module_does_not_import_transformers():
    code = "import sys, minielectra.model.hf; assert 'transformers' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_shared_layers_are_refused_not_exported_as_one_layer(tmp_path):
    cfg = ModelConfig(vocab_size=50, embedding_size=8, hidden_size=16, num_layers=3, num_heads=2,
                      intermediate_size=32, max_position_embeddings=16, share_layers=True)
    with pytest.raises(ValueError, match="share_layers"):
        hf.export(Electra(cfg), tmp_path / "hf")
    assert not (tmp_path / "hf").exists()
