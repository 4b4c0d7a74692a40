"""The pre-training loop: schedule, optimiser, checkpoints, resume, NaN guard, refusals.

Every reference is independent of the code under test: the schedule against its closed form, the
optimiser against a hand-written update (and torch.optim.AdamW), resume against an uninterrupted
run. End-to-end tests train a tiny model on a tiny corpus written to tmp_path.
"""

import json
import math
from pathlib import Path

import pytest
import torch
from torch import nn

from minielectra.config import ModelConfig, RunConfig, TrainConfig, apply_overrides, preset
from minielectra.electra import Electra
from minielectra.train import (AdamWeightDecay, TrainingDiverged, build_optimizer,
                               latest_checkpoint, list_checkpoints, lr_at, milestone_steps,
                               official_adam_hparams, param_groups, pretrain, prune_checkpoints,
                               save_checkpoint)

# ------------------------------------------------------------------------------ schedule


@pytest.mark.parametrize("warmup", [0, 10])
def test_official_schedule_closed_form(warmup):
    t = TrainConfig(learning_rate=1e-3, max_steps=100, warmup_steps=warmup, schedule="official")
    for step in [0, 1, 5, 9, 10, 11, 50, 99, 100, 150]:
        s = min(step, 100)
        want = 1e-3 * (1 - s / 100) * (min(1.0, s / warmup) if warmup else 1.0)
        assert lr_at(step, t) == pytest.approx(want, abs=1e-15)
    if warmup:  # the ramp multiplies an already decaying line: the peak is never reached
        assert max(lr_at(s, t) for s in range(100)) < 1e-3 * (1 - warmup / 100) + 1e-12


def test_linear_schedule_values():
    t = TrainConfig(learning_rate=2.0, max_steps=110, warmup_steps=10, schedule="linear")
    assert [lr_at(s, t) for s in (0, 5, 10, 60, 110, 200)] == pytest.approx(
        [0.0, 1.0, 2.0, 1.0, 0.0, 0.0])


# ----------------------------------------------------------------------------- optimiser


def reference_adam(params, grads_per_step, *, lr, wd, b1=0.9, b2=0.999, eps=1e-6, correct):
    """The update written out with plain tensors, one parameter at a time."""
    params = [p.clone() for p in params]
    m = [torch.zeros_like(p) for p in params]
    v = [torch.zeros_like(p) for p in params]
    for t, grads in enumerate(grads_per_step, start=1):
        for i, g in enumerate(grads):
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            m_hat, v_hat = (m[i] / (1 - b1 ** t), v[i] / (1 - b2 ** t)) if correct else (m[i], v[i])
            params[i] = params[i] - lr * (m_hat / (v_hat.sqrt() + eps) + wd[i] * params[i])
    return params


def _run(opt_params, opt, grads_per_step, before_step=None):
    for t, grads in enumerate(grads_per_step):
        for p, g in zip(opt_params, grads):
            p.grad = g.clone()
        if before_step:
            before_step(t)
        opt.step()
    return [p.detach() for p in opt_params]


@pytest.mark.parametrize("correct", [False, True])
def test_adam_weight_decay_matches_hand_written_update(correct):
    torch.manual_seed(0)
    init = [torch.randn(4, 3, dtype=torch.float64), torch.randn(3, dtype=torch.float64)]
    grads = [[torch.randn_like(p) for p in init] for _ in range(6)]
    params = [p.clone().requires_grad_() for p in init]
    opt = AdamWeightDecay([{"params": params[:1], "weight_decay": 0.01},
                           {"params": params[1:], "weight_decay": 0.0}],
                          lr=0.05, eps=1e-6, bias_correction=correct)
    got = _run(params, opt, grads)
    want = reference_adam(init, grads, lr=0.05, wd=[0.01, 0.0], correct=correct)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-12, atol=1e-12)
    if not correct:  # the difference is real: the first uncorrected step is ~10x smaller
        corrected = reference_adam(init, grads, lr=0.05, wd=[0.01, 0.0], correct=True)
        assert not torch.allclose(got[0], corrected[0], atol=1e-3)


def test_bias_corrected_mode_equals_torch_adamw():
    torch.manual_seed(1)
    init = [torch.randn(5, 2), torch.randn(2)]
    grads = [[torch.randn_like(p) for p in init] for _ in range(5)]
    a = [p.clone().requires_grad_() for p in init]
    b = [p.clone().requires_grad_() for p in init]
    ours = _run(a, AdamWeightDecay(a, lr=0.01, weight_decay=0.01, bias_correction=True), grads)
    theirs = _run(b, torch.optim.AdamW(b, lr=0.01, eps=1e-6, weight_decay=0.01), grads)
    for x, y in zip(ours, theirs):
        torch.testing.assert_close(x, y)


@pytest.mark.parametrize("fused", [False, True])
def test_rescaled_adamw_is_the_uncorrected_update(fused):
    """What the GPU runs: torch's (fused) AdamW with per-step lr/eps/wd = official update."""
    torch.manual_seed(2)
    init = [torch.randn(6, 4, dtype=torch.float64)]
    grads = [[torch.randn_like(init[0])] for _ in range(8)]
    params = [init[0].clone().requires_grad_()]
    try:
        opt = torch.optim.AdamW(params, lr=0.0, eps=1e-6, fused=fused)
    except RuntimeError as e:  # fused AdamW for CPU tensors needs a recent torch
        pytest.skip(str(e))

    def rescale(t):
        lr, eps, wd = official_adam_hparams(0.02, 1e-6, 0.01, (0.9, 0.999), t + 1)
        opt.param_groups[0].update(lr=lr, eps=eps, weight_decay=wd)

    got = _run(params, opt, grads, before_step=rescale)
    want = reference_adam(init, grads, lr=0.02, wd=[0.01], correct=False)
    torch.testing.assert_close(got[0], want[0], rtol=1e-10, atol=1e-10)


def tiny_model_config(**kw) -> ModelConfig:
    base = dict(vocab_size=50, embedding_size=8, hidden_size=16, num_layers=1, num_heads=2,
                intermediate_size=32, max_position_embeddings=32, generator_size=0.5,
                pad_token_id=0, cls_token_id=2, sep_token_id=3, mask_token_id=4)
    base.update(kw)
    return ModelConfig(**base)


@pytest.mark.parametrize("tying", ["embeddings", "all", "none"])
def test_weight_decay_excludes_layernorm_and_bias_and_counts_shared_once(tying):
    model = Electra(tiny_model_config(tying=tying, generator_size=1.0 if tying == "all" else 0.5))
    decay, no_decay = param_groups(model, 0.01)
    all_ids = [id(p) for g in (decay, no_decay) for p in g["params"]]
    unique = {id(p) for p in model.parameters()}
    assert len(all_ids) == len(set(all_ids)) == len(unique)  # every tensor exactly once
    names = {id(p): n for n, p in model.named_parameters(remove_duplicate=False)}
    norm_ids = {id(p) for m in model.modules() if isinstance(m, nn.LayerNorm)
                for p in m.parameters()}
    for p in no_decay["params"]:
        assert id(p) in norm_ids or names[id(p)].endswith("bias")
    for p in decay["params"]:
        assert id(p) not in norm_ids and p.dim() == 2  # matrices: dense and embedding weights
    assert decay["weight_decay"] == 0.01 and no_decay["weight_decay"] == 0.0
    assert any(names[id(p)].endswith("output_bias") for p in no_decay["params"])
    word = model.discriminator.encoder.embeddings.word.weight
    assert word is model.generator.encoder.embeddings.word.weight or tying == "none"
    assert sum(p is word for p in decay["params"]) == 1


def test_decay_is_not_applied_to_excluded_parameters():
    """With a zero gradient only the decay moves a weight: decayed ones shrink, others stay."""
    model = Electra(tiny_model_config())
    opt = build_optimizer(model, TrainConfig(learning_rate=0.1, weight_decay=0.5),
                          torch.device("cpu"))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    for n, p in model.named_parameters():
        excluded = "norm" in n or n.endswith("bias")
        want = before[n] if excluded else before[n] * (1 - 0.1 * 0.5)
        torch.testing.assert_close(p.detach(), want, msg=n)


# ------------------------------------------------------------------- tiny end-to-end runs

WORDS = ("the cat dog sat on mat ran far away quick brown fox jumps over lazy river tree "
         "house green blue red small big old new day night sun moon star sky").split()


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory) -> Path:
    """40 documents of 3-6 random 'sentences' in the official one-sentence-per-line format."""
    import random
    rng = random.Random(0)
    docs = ["\n".join(" ".join(rng.choices(WORDS, k=rng.randint(4, 12)))
                      for _ in range(rng.randint(3, 6))) for _ in range(40)]
    path = tmp_path_factory.mktemp("corpus") / "tiny.txt"
    path.write_text("\n\n".join(docs) + "\n")
    return path


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")


def tiny_run(corpus_file, cache_dir, out_dir, *overrides) -> RunConfig:
    cfg = preset("nano")
    return apply_overrides(cfg, [
        f"data.corpus={corpus_file}", f"data.cache_dir={cache_dir}", "data.vocab_size=64",
        "data.max_seq_len=16", "data.held_out_fraction=0.2", "data.num_workers=1",
        "model.embedding_size=8", "model.hidden_size=16", "model.num_layers=1",
        "model.num_heads=2", "model.intermediate_size=32", "model.max_position_embeddings=16",
        "model.generator_size=0.5", "model.dropout=0.1", "model.attention_dropout=0.1",
        "train.batch_size=4", "train.max_steps=6", "train.warmup_steps=2", "train.log_every=1",
        "train.eval_examples=8", "train.max_minutes=0", "train.save_every=0",
        "train.milestones=()", f"train.out_dir={out_dir}", *overrides])


def weights(path) -> dict[str, torch.Tensor]:
    return Electra.from_pretrained(path).state_dict()


def test_resume_continues_exactly(corpus_file, cache_dir, tmp_path):
    """N steps straight == N/2 steps, a new process state, --resume, N/2 steps (dropout on,
    gradient accumulation on: RNG, optimiser state and data position all have to be restored)."""
    common = ["train.max_steps=6", "train.grad_accum=2", "train.save_every=2"]
    straight = pretrain(tiny_run(corpus_file, cache_dir, tmp_path / "a", *common), progress=False)
    first = pretrain(tiny_run(corpus_file, cache_dir, tmp_path / "b", *common), progress=False,
                     until_step=3)
    assert first["step"] == 3 and first["stopped_by"] == "until_step"
    torch.manual_seed(1234)  # a resumed process does not inherit the first one's RNG
    second = pretrain(tiny_run(corpus_file, cache_dir, tmp_path / "b", *common), progress=False,
                      resume=True)
    assert second["step"] == 6
    a, b = weights(straight["checkpoint"]), weights(second["checkpoint"])
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    assert straight["heldout"] == second["heldout"]
    # the log of the resumed run is the straight run's log, step for step
    logs = [[(r["step"], r["loss"], r["grad_norm"])
             for r in map(json.loads, open(p / "metrics.jsonl")) if r["kind"] == "train"]
            for p in (tmp_path / "a", tmp_path / "b")]
    assert logs[0] == logs[1]


def test_run_writes_config_metrics_and_loadable_checkpoint(corpus_file, cache_dir, tmp_path):
    out = tmp_path / "run"
    result = pretrain(tiny_run(corpus_file, cache_dir, out, "train.eval_every=3"), progress=False)
    ckpt = Path(result["checkpoint"])
    assert ckpt == latest_checkpoint(out) and ckpt.name == "step_0000006"
    saved = RunConfig.load(out / "config.json")
    assert saved.model.vocab_size == Electra.from_pretrained(ckpt).config.vocab_size
    assert RunConfig.load(ckpt / "run_config.json").to_dict() == saved.to_dict()
    assert (ckpt / "vocab.txt").is_file() and (out / "tokenizer" / "vocab.txt").is_file()
    records = [json.loads(line) for line in open(out / "metrics.jsonl")]
    train = [r for r in records if r["kind"] == "train"]
    assert [r["step"] for r in train] == [1, 2, 3, 4, 5, 6]
    for key in ("loss", "gen_loss", "disc_loss", "gen_accuracy", "disc_accuracy", "lr",
                "grad_norm", "tokens_per_s"):
        assert all(math.isfinite(r[key]) for r in train), key
    t = saved.train
    assert [r["lr"] for r in train] == pytest.approx([lr_at(s - 1, t) for s in range(1, 7)])
    evals = [r for r in records if r["kind"] == "eval"]
    assert [r["step"] for r in evals] == [3, 6]
    assert 0 <= evals[-1]["disc_auc"] <= 1 and evals[-1] == {**result["heldout"], "kind": "eval",
                                                               "step": 6,
                                                               "elapsed_s": evals[-1]["elapsed_s"]}


# --------------------------------------------------------------------------- checkpoints


def _tiny_model_and_cfg(tmp_path):
    cfg = RunConfig()
    cfg.model = tiny_model_config()
    cfg.train.out_dir = str(tmp_path)
    return Electra(cfg.model), cfg


def test_checkpoint_write_is_atomic(tmp_path, monkeypatch):
    """A crash in the middle of writing leaves the previous checkpoints intact and no new one."""
    import minielectra.checkpoint as ck

    model, cfg = _tiny_model_and_cfg(tmp_path)
    good = save_checkpoint(tmp_path, 1, model, {"step": 1}, cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)

    def crash(module, filename, *args, **kwargs):  # half a weights file, then the process dies
        Path(filename).write_bytes(b"\x00" * 100)
        raise KeyboardInterrupt("killed mid-write")

    monkeypatch.setattr(ck, "save_model", crash)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(tmp_path, 2, model, {"step": 2}, cfg)
    with pytest.raises(KeyboardInterrupt):  # over an existing step too: the old one survives
        save_checkpoint(tmp_path, 1, model, {"step": 1}, cfg)
    assert [s for s, _ in list_checkpoints(tmp_path)] == [1]
    assert latest_checkpoint(tmp_path) == good
    current = model.state_dict()
    for k, v in Electra.from_pretrained(good).state_dict().items():  # the weights before += 1
        torch.testing.assert_close(v + 1.0, current[k])
    # a process killed outright (no cleanup) leaves a hidden temporary dir: never listed, and
    # removed by the next prune
    leftover = tmp_path / "checkpoints" / ".step_0000003.tmp-dead"
    leftover.mkdir()
    (leftover / "model.safetensors").write_bytes(b"\x00" * 10)
    assert [s for s, _ in list_checkpoints(tmp_path)] == [1]
    prune_checkpoints(tmp_path, cfg.train)
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step_0000001"]


def test_keep_last_k_plus_milestones(tmp_path):
    model, cfg = _tiny_model_and_cfg(tmp_path)
    t = cfg.train
    t.max_steps, t.keep_last, t.milestones = 32, 2, (0.0625, 0.125, 0.25, 0.5)
    assert milestone_steps(t) == {2, 4, 8, 16, 32}
    for step in range(1, 31):
        save_checkpoint(tmp_path, step, model, {"step": step}, cfg)
        prune_checkpoints(tmp_path, t)
    assert [s for s, _ in list_checkpoints(tmp_path)] == [2, 4, 8, 16, 29, 30]


# --------------------------------------------------------------------------- the NaN guard


def test_nan_loss_stops_with_step_and_keeps_last_good_checkpoint(corpus_file, cache_dir,
                                                                tmp_path, monkeypatch):
    calls = {"n": 0}
    forward = Electra.forward

    def poisoned(self, *args, **kwargs):
        out = forward(self, *args, **kwargs)
        calls["n"] += 1
        if calls["n"] == 5:  # the 5th update's forward
            out.loss = out.loss * float("nan")
        return out

    monkeypatch.setattr(Electra, "forward", poisoned)
    out = tmp_path / "nan"
    with pytest.raises(TrainingDiverged, match=r"step 5\b.*step_0000004"):
        pretrain(tiny_run(corpus_file, cache_dir, out, "train.save_every=2"), progress=False)
    assert [s for s, _ in list_checkpoints(out)] == [2, 4]
    state = weights(latest_checkpoint(out))
    assert all(torch.isfinite(v).all() for v in state.values())


# ------------------------------------------------------------------ refusing a bad run early


def test_unknown_preset_and_set_key_name_the_valid_ones():
    with pytest.raises(KeyError, match="nano"):
        preset("nanoo")
    with pytest.raises(KeyError, match="train.learning_rate"):
        apply_overrides(preset("nano"), ["train.lr=1e-3"])


@pytest.mark.parametrize("override, message", [
    ("train.max_steps=ten", "train.max_steps expects int"),
    ("train.learning_rate=fast", "train.learning_rate expects float"),
    ("train.bias_correction=maybe", "train.bias_correction expects bool"),
    ("train.precision=fp8", "train.precision must be one of"),
])
def test_wrong_value_types_are_refused(override, message):
    with pytest.raises(ValueError, match=message):
        apply_overrides(preset("nano"), [override])


@pytest.mark.parametrize("field, value, message", [
    ("learning_rate", 0.0, "learning_rate must be positive"),
    ("learning_rate", -1e-3, "learning_rate must be positive"),
    ("max_steps", 0, "max_steps must be positive"),
    ("max_steps", -5, "max_steps must be positive"),
    ("learning_rate", "1e-3", "learning_rate expects"),  # a library caller's string
    ("max_steps", 10.5, "max_steps expects"),
])
def test_bad_values_refused_before_any_work(tmp_path, field, value, message):
    cfg = preset("nano")
    cfg.train.out_dir = str(tmp_path / "never")
    setattr(cfg.train, field, value)
    with pytest.raises(ValueError, match=message):
        pretrain(cfg, progress=False)
    assert not (tmp_path / "never").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a CPU-only machine")
@pytest.mark.parametrize("device, precision", [("cpu", "fp16"), ("cpu", "bf16"),
                                               ("auto", "bf16"), ("cuda", "fp32")])
def test_precision_or_device_this_machine_lacks_is_refused(tmp_path, device, precision):
    cfg = preset("nano")
    cfg.train.device, cfg.train.precision = device, precision
    cfg.train.out_dir = str(tmp_path / "x")
    with pytest.raises(RuntimeError, match="CUDA|cuda"):
        pretrain(cfg, progress=False)
    assert not (tmp_path / "x").exists()


def test_resume_without_checkpoint_is_refused(tmp_path):
    cfg = preset("nano")
    cfg.train.out_dir = str(tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        pretrain(cfg, resume=True, progress=False)


def test_resume_with_another_config_is_refused(corpus_file, cache_dir, tmp_path):
    out = tmp_path / "r"
    pretrain(tiny_run(corpus_file, cache_dir, out, "train.max_steps=2"), progress=False)
    changed = tiny_run(corpus_file, cache_dir, out, "train.max_steps=2", "train.learning_rate=1e-2")
    with pytest.raises(ValueError, match=r"another config.*train\.learning_rate"):
        pretrain(changed, resume=True, progress=False)
    # settings that do not change the trajectory may differ
    same = tiny_run(corpus_file, cache_dir, out, "train.max_steps=2", "train.log_every=7")
    assert pretrain(same, resume=True, progress=False)["step"] == 2
