"""Config: presets, dotted overrides with type checks, JSON round trip, early refusals."""

import dataclasses

import pytest

from minielectra.cli import build_parser, pretrain_config
from minielectra.config import PRESETS, RunConfig, TrainConfig, apply_overrides, preset


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_is_valid_and_round_trips(name, tmp_path):
    cfg = preset(name).validate()
    cfg.save(tmp_path / "c.json")
    assert RunConfig.load(tmp_path / "c.json") == cfg


def test_small_is_the_paper_and_small_pp_the_released_shape():
    s = preset("small")
    assert (s.model.hidden_size, s.model.num_layers, s.model.num_heads, s.model.embedding_size,
            s.model.intermediate_size, s.model.generator_size) == (256, 12, 4, 128, 1024, 0.25)
    assert (s.train.learning_rate, s.train.warmup_steps, s.train.batch_size, s.train.max_steps,
            s.objective.disc_weight, s.train.adam_eps) == (5e-4, 10_000, 128, 1_000_000, 50.0, 1e-6)
    pp = preset("small++")
    assert pp.model.generator().hidden_size == 256 and pp.data.max_seq_len == 512


def test_overrides_are_typed():
    cfg = apply_overrides(preset("nano"), ["train.max_steps=20", "model.dropout=0.2",
                                           "train.compile=true", "data.vocab=none",
                                           "train.milestones=0.5,1.0"])
    assert cfg.train.max_steps == 20 and cfg.model.dropout == 0.2 and cfg.train.compile is True
    assert cfg.data.vocab is None and cfg.train.milestones == (0.5, 1.0)


@pytest.mark.parametrize("override, error, words", [
    ("train.max_stepz=3", KeyError, "train.max_steps"),       # names the valid keys
    ("trian.max_steps=3", KeyError, "sections"),
    ("train.max_steps=ten", ValueError, "train.max_steps expects int"),
    ("train.max_steps=2.5", ValueError, "expects int"),
    ("train.precision=fp8", ValueError, "fp32"),
    ("train.compile=maybe", ValueError, "expects bool"),
    ("max_steps", ValueError, "section.key=value"),
])
def test_bad_overrides_name_the_key(override, error, words):
    with pytest.raises(error, match=words):
        apply_overrides(preset("nano"), [override])


@pytest.mark.parametrize("override, words", [
    ("train.learning_rate=-1", "learning_rate must be positive"),
    ("train.learning_rate=0", "learning_rate must be positive"),
    ("train.max_steps=0", "max_steps must be positive"),
    ("model.num_heads=3", "not divisible"),
    ("data.max_seq_len=4096", "max_position_embeddings"),
])
def test_bad_values_are_refused_early(override, words):
    with pytest.raises(ValueError, match=words):
        apply_overrides(preset("nano"), [override]).validate()


def test_unknown_preset_lists_the_valid_ones():
    with pytest.raises(KeyError, match="nano"):
        preset("tinyy")


def test_cli_flags_become_overrides():
    args = build_parser().parse_args(["pretrain", "--preset", "nano", "--max-steps", "7",
                                      "--corpus", "pretrain-en", "--seed", "3",
                                      "--set", "train.batch_size=4"])
    cfg = pretrain_config(args)
    assert (cfg.train.max_steps, cfg.data.corpus, cfg.train.seed, cfg.train.batch_size) == \
        (7, "pretrain-en", 3, 4)


# A value no run can use for every TrainConfig field (a wrong type or out of range).
BAD_TRAIN_VALUES = {
    "batch_size": 0, "max_steps": -1, "learning_rate": float("nan"), "warmup_steps": -10,
    "schedule": "cosine", "weight_decay": -0.01, "adam_beta1": 1.0, "adam_beta2": -0.5,
    "adam_eps": 0.0, "bias_correction": "yes", "grad_clip": 0.0, "grad_accum": 0,
    "device": "tpu", "precision": "fp8", "compile": 1, "seed": -3, "log_every": 0,
    "eval_every": -1, "eval_examples": 0, "save_every": -5, "keep_last": 0, "keep_every": -1,
    "milestones": (0.5, 1.5), "max_minutes": -1.0, "out_dir": " ",
}


def test_every_train_field_has_a_bad_value_here():
    """A new TrainConfig field must be added to BAD_TRAIN_VALUES (and validated)."""
    assert set(BAD_TRAIN_VALUES) == {f.name for f in dataclasses.fields(TrainConfig)}


@pytest.mark.parametrize("name, value", sorted(BAD_TRAIN_VALUES.items()))
def test_every_train_field_is_validated_naming_key_and_value(name, value):
    cfg = preset("nano")
    setattr(cfg.train, name, value)
    with pytest.raises(ValueError) as e:
        cfg.validate()
    assert f"train.{name}" in str(e.value) and repr(value) in str(e.value), str(e.value)


@pytest.mark.parametrize("name", ["small", "small++", "base"])
def test_gpu_presets_save_and_evaluate_every_10k_steps(name):
    t = preset(name).train
    assert (t.save_every, t.eval_every) == (10_000, 10_000)


@pytest.mark.parametrize("argv, words", [
    (["--preset", "nanoo"], "valid presets: ['base', 'laptop', 'mini', 'nano', 'small', 'small++', 'tiny']"),
    (["--set", "train.lr=1"], "train.learning_rate"),
    (["--set", "train.max_steps=ten"], "train.max_steps expects int, got 'ten'"),
    (["--max-steps", "0"], "train.max_steps must be positive, got 0"),
    (["--set", "train.learning_rate=-1e-3"], "train.learning_rate must be positive"),
])
def test_cli_pretrain_refuses_a_bad_run_in_one_line(argv, words, tmp_path, capsys):
    from minielectra.cli import main

    assert main(["pretrain", "--out", str(tmp_path / "never"), *argv]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "never").exists()


@pytest.mark.parametrize("name", ["small", "small++", "base"])
def test_gpu_presets_train_with_the_bert_uncased_vocabulary(name):
    """The paper's vocabulary, sized as the model's embedding table (a WordPiece trained on the
    corpus would be another vocabulary, and its ids would not match the released checkpoints')."""
    import os
    from pathlib import Path

    from minielectra.data.tokenizer import resolve_tokenizer
    cfg = preset(name)
    assert cfg.data.vocab == "bert-uncased"
    root = Path(os.environ.get("MINIELECTRA_DATA_DIR", "/nonexistent"))
    if not (root / "vocab" / "bert-base-uncased-vocab.txt").is_file():
        pytest.skip("no data dir with vocab/bert-base-uncased-vocab.txt (MINIELECTRA_DATA_DIR)")
    tok = resolve_tokenizer(cfg.data, data_dir=root)
    assert tok.vocab_size == cfg.model.vocab_size == 30522
    assert tok.encode("the electra model")[:1] == [tok.token_to_id("the")]


def test_a_retired_option_reads_at_its_default_and_is_refused_otherwise():
    """A config or checkpoint written when ``model.extra_norm`` existed still loads when the
    option was off; with it on, one line says what cannot be built."""
    from minielectra.config import ModelConfig, RunConfig
    from minielectra.overrides import from_dict
    saved = RunConfig().to_dict()
    saved["model"]["extra_norm"] = False
    assert RunConfig.from_dict(saved) == RunConfig()
    with pytest.raises(ValueError, match=r"model.extra_norm=True: an option this version"):
        from_dict(ModelConfig, {"extra_norm": True}, prefix="model.")
    with pytest.raises(ValueError, match="model.tying expects"):
        from_dict(ModelConfig, {"tying": "gdes"}, prefix="model.")
