"""minielectra's checkpoint format: exact round trips, tying kept, loud errors, atomic writes."""

import json
import sys

import pytest
import torch
from safetensors.torch import load_file, save_file

from minielectra import Electra, ModelConfig, ObjectiveConfig
from minielectra.model import checkpoint as model_checkpoint
from minielectra.model import storage as model_storage
from minielectra.model.checkpoint import save_pretrained
from minielectra.model.storage import CheckpointError
from minielectra.safeio import ASIDE

TYINGS = ["none", "embeddings", "all"]


def tiny(tying="embeddings", seed=0, **kw):
    torch.manual_seed(seed)
    cfg = ModelConfig(vocab_size=100, embedding_size=16, hidden_size=32, num_layers=2,
                      num_heads=2, intermediate_size=64, max_position_embeddings=32,
                      generator_size=1.0 if tying == "all" else 0.5, tying=tying,
                      cls_token_id=2, sep_token_id=3, mask_token_id=4, **kw)
    model = Electra(cfg, ObjectiveConfig(disc_weight=30.0, mask_prob=0.2))
    with torch.no_grad():  # biases and LayerNorms away from their init, so every tensor counts
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return model.eval()


def batch(seed=1):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 100, (2, 9), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0
    types = (torch.arange(9) >= 4).long().expand(2, -1)
    return ids, mask, types


def logits(model):
    with torch.no_grad():
        return model.discriminator(*batch()), model.generator(*batch())


@pytest.mark.parametrize("tying", TYINGS)
def test_round_trip_is_exact_and_keeps_tying(tmp_path, tying):
    model = tiny(tying)
    save_pretrained(model, tmp_path / "ckpt")
    loaded = Electra.from_pretrained(tmp_path / "ckpt").eval()

    assert loaded.config == model.config and loaded.objective == model.objective
    a, b = model.state_dict(), loaded.state_dict()
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    for x, y in zip(logits(model), logits(loaded)):
        torch.testing.assert_close(x, y, rtol=0, atol=0)

    d, g = loaded.discriminator.encoder, loaded.generator.encoder
    assert (g.embeddings.word.weight is d.embeddings.word.weight) == (tying != "none")
    assert (g.embeddings.norm.bias is d.embeddings.norm.bias) == (tying != "none")
    assert (g.layers[0].attn.qkv.weight is d.layers[0].attn.qkv.weight) == (tying == "all")
    # the same number of distinct parameters as the saved model: nothing was untied
    assert sum(1 for _ in loaded.parameters()) == sum(1 for _ in model.parameters())


def test_config_json_layout_and_unknown_top_level_keys(tmp_path):
    model = tiny()
    save_pretrained(model, tmp_path / "ckpt")
    config = json.loads((tmp_path / "ckpt" / "config.json").read_text())
    assert config["format"] == "minielectra" and config["version"] == 1
    assert config["model"]["hidden_size"] == 32 and config["objective"]["disc_weight"] == 30.0
    config["run"] = {"anything": 1}  # e.g. what a training run adds: ignored
    (tmp_path / "ckpt" / "config.json").write_text(json.dumps(config))
    assert Electra.from_pretrained(tmp_path / "ckpt").config == model.config


def test_bad_config_is_an_error(tmp_path):
    save_pretrained(tiny(), tmp_path / "ckpt")
    path = tmp_path / "ckpt" / "config.json"
    config = json.loads(path.read_text())
    path.write_text(json.dumps({**config, "version": 2}))
    with pytest.raises(CheckpointError, match="version 2"):
        Electra.from_pretrained(tmp_path / "ckpt")
    config["model"]["hiden_size"] = 3
    path.write_text(json.dumps(config))
    with pytest.raises(KeyError, match="model.hiden_size"):
        Electra.from_pretrained(tmp_path / "ckpt")
    with pytest.raises(CheckpointError, match="neither a minielectra checkpoint"):
        Electra.from_pretrained(tmp_path)  # a directory that is no checkpoint


def _edit_weights(path, edit):
    """Rewrite the weights as a checkpoint without checksums.json would hold them (the sums
    would otherwise refuse the edit before the state checks below ever see it)."""
    state = load_file(path / "model.safetensors")
    edit(state)
    save_file(state, path / "model.safetensors", metadata={"format": "pt"})
    (path / "checksums.json").unlink()


def test_wrong_shape_names_key_and_both_shapes(tmp_path):
    save_pretrained(tiny(), tmp_path / "ckpt")
    key = "discriminator.encoder.layers.1.ffn_in.weight"
    _edit_weights(tmp_path / "ckpt", lambda s: s.__setitem__(key, torch.zeros(65, 32)))
    with pytest.raises(CheckpointError) as e:
        Electra.from_pretrained(tmp_path / "ckpt")
    assert f"shape mismatch for {key}: checkpoint (65, 32), model (64, 32)" in str(e.value)


def test_missing_and_extra_keys_are_listed(tmp_path):
    save_pretrained(tiny(), tmp_path / "ckpt")
    missing = "generator.head_norm.bias"
    def edit(state):
        del state[missing]
        state["extra.w"] = torch.ones(3, 2)
    _edit_weights(tmp_path / "ckpt", edit)
    with pytest.raises(CheckpointError) as e:
        Electra.from_pretrained(tmp_path / "ckpt")
    assert f"missing key {missing}: model (16)" in str(e.value)
    assert "unexpected key extra.w: checkpoint (3, 2)" in str(e.value)


def test_either_name_of_a_shared_tensor_loads(tmp_path):
    model = tiny("embeddings")
    save_pretrained(model, tmp_path / "ckpt")
    d = "discriminator.encoder.embeddings.word.weight"
    g = "generator.encoder.embeddings.word.weight"

    def rename(s):
        s[g] = s.pop(d)
    _edit_weights(tmp_path / "ckpt", rename)
    loaded = Electra.from_pretrained(tmp_path / "ckpt")
    assert torch.equal(loaded.state_dict()[d], model.state_dict()[d])


class _Crash(RuntimeError):
    pass


def _crash_after_partial_write(model, filename, **kw):
    with open(filename, "wb") as f:
        f.write(b"half a file")
    raise _Crash("simulated crash mid-write")


def test_crash_mid_write_keeps_previous_version(tmp_path, monkeypatch):
    old, new = tiny(seed=0), tiny(seed=1)
    save_pretrained(old, tmp_path / "ckpt")
    monkeypatch.setattr(model_checkpoint, "save_model", _crash_after_partial_write)
    with pytest.raises(_Crash):
        save_pretrained(new, tmp_path / "ckpt")
    with pytest.raises(_Crash):
        save_pretrained(new, tmp_path / "fresh")
    assert not (tmp_path / "fresh").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]  # no temp dirs left behind
    for x, y in zip(logits(old), logits(Electra.from_pretrained(tmp_path / "ckpt").eval())):
        torch.testing.assert_close(x, y, rtol=0, atol=0)


def test_crash_while_swapping_restores_previous_version(tmp_path, monkeypatch):
    old, new = tiny(seed=0), tiny(seed=1)
    save_pretrained(old, tmp_path / "ckpt")
    real_rename, calls = model_storage.os.rename, []

    def rename(src, dst):  # the first rename moves the old dir aside; fail the second
        calls.append(dst)
        if len(calls) == 2:
            raise _Crash("simulated crash between the renames")
        real_rename(src, dst)
    monkeypatch.setattr(model_storage.os, "rename", rename)
    with pytest.raises(_Crash):
        save_pretrained(new, tmp_path / "ckpt")
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]
    for x, y in zip(logits(old), logits(Electra.from_pretrained(tmp_path / "ckpt").eval())):
        torch.testing.assert_close(x, y, rtol=0, atol=0)


def test_overwrite_replaces_whole_directory_and_extra_files(tmp_path):
    save_pretrained(tiny(seed=0), tmp_path / "ckpt", extra_files={"stale.txt": "x"})
    assert (tmp_path / "ckpt" / "stale.txt").read_text() == "x"
    new = tiny(seed=1)
    save_pretrained(new, tmp_path / "ckpt", extra_files={"run_config.json": b"{}"})
    assert not (tmp_path / "ckpt" / "stale.txt").exists()
    assert (tmp_path / "ckpt" / "run_config.json").read_bytes() == b"{}"
    for x, y in zip(logits(new), logits(Electra.from_pretrained(tmp_path / "ckpt").eval())):
        torch.testing.assert_close(x, y, rtol=0, atol=0)


def test_interrupted_swap_is_pointed_out(tmp_path):
    (tmp_path / ".ckpt.old-abc" / ASIDE).mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match=r"\.ckpt\.old-abc"):
        Electra.from_pretrained(tmp_path / "ckpt")


def _tokenizer():
    tok = pytest.importorskip("minielectra.data.tokenizer")
    words = [f"w{i}" for i in range(95)]
    return tok.WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words)


def test_tokenizer_is_saved_and_reloaded(tmp_path):
    model = tiny()
    model.tokenizer = _tokenizer()
    save_pretrained(model, tmp_path / "ckpt")
    assert (tmp_path / "ckpt" / "vocab.txt").is_file()
    loaded = Electra.from_pretrained(tmp_path / "ckpt")
    assert loaded.tokenizer.tokens == model.tokenizer.tokens
    assert loaded.tokenizer.encode("w3 w7") == model.tokenizer.encode("w3 w7")


def test_missing_tokenizer_module_is_tolerated(tmp_path, monkeypatch, caplog):
    save_pretrained(tiny(), tmp_path / "ckpt")
    (tmp_path / "ckpt" / "vocab.txt").write_text("[PAD]\n[UNK]\n")
    (tmp_path / "ckpt" / "checksums.json").unlink()  # an older checkpoint: vocab unchecked
    monkeypatch.setitem(sys.modules, "minielectra.data.tokenizer", None)  # import now fails
    assert Electra.from_pretrained(tmp_path / "ckpt").tokenizer is None
    assert "tokenizer cannot be imported" in caplog.text


# ------------------------------------------------------------------------ damaged files


def test_checksums_cover_weights_and_vocab_not_json(tmp_path):
    import hashlib
    model = tiny()
    model.tokenizer = _tokenizer()
    save_pretrained(model, tmp_path / "ckpt", extra_files={"trainer_state.pt": b"state"})
    sums = json.loads((tmp_path / "ckpt" / "checksums.json").read_text())["sha256"]
    assert sorted(sums) == ["model.safetensors", "trainer_state.pt", "vocab.txt"]
    for name, digest in sums.items():
        assert hashlib.sha256((tmp_path / "ckpt" / name).read_bytes()).hexdigest() == digest


@pytest.mark.parametrize("damage", ["truncate", "flip", "delete"])
def test_damaged_weights_are_named_not_loaded(tmp_path, damage):
    save_pretrained(tiny(), tmp_path / "ckpt")
    weights = tmp_path / "ckpt" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    if damage == "truncate":
        weights.write_bytes(data[:len(data) // 2])
    elif damage == "flip":  # one byte deep in a tensor: the file still parses
        data[-100] ^= 0xFF
        weights.write_bytes(data)
    else:
        weights.unlink()
    with pytest.raises(model_storage.DamagedCheckpointError, match=r"model\.safetensors: "
                       + ("missing" if damage == "delete" else "damaged")):
        Electra.from_pretrained(tmp_path / "ckpt")


def test_truncated_weights_without_checksums_are_named(tmp_path):
    save_pretrained(tiny(), tmp_path / "ckpt")
    (tmp_path / "ckpt" / "checksums.json").unlink()
    weights = tmp_path / "ckpt" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(CheckpointError, match=r"model\.safetensors: damaged or truncated"):
        Electra.from_pretrained(tmp_path / "ckpt")


def test_nan_weights_are_refused(tmp_path):
    model = tiny()
    with torch.no_grad():
        model.discriminator.head_out.weight[0, 0] = float("nan")
    save_pretrained(model, tmp_path / "ckpt")
    with pytest.raises(CheckpointError, match=r"discriminator\.head_out\.weight holds NaN"):
        Electra.from_pretrained(tmp_path / "ckpt")


def test_bundled_checkpoint_lists_checksums_that_hold():
    assert model_storage.verify_checksums(model_storage.BUNDLED)
