"""The pre-training loop: checkpoints, resume, logging, the NaN guard, compile, refusals.

Every reference is independent of the code under test: resume against an uninterrupted run,
checkpoints against the weights in memory, tokens/s against a clock that the test controls,
compilation against dynamo's own recompile check. End-to-end tests train a tiny model on a tiny
corpus written to tmp_path. (The optimiser and schedule are tested in test_optim.py.)
"""

import json
import math
import os
from pathlib import Path

import pytest
import torch

from minielectra.config import RunConfig, apply_overrides, preset
from minielectra.model.electra import Electra
from minielectra.training.checkpoints import (latest_checkpoint, list_checkpoints, milestone_steps,
                                              prune_checkpoints, save_checkpoint)
from minielectra.training.loop import pretrain
from minielectra.training.optim import lr_at
from minielectra.training.step import TrainingDiverged, train_step


# ------------------------------------------------------------------- tiny end-to-end runs

@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory, write_tiny_corpus) -> Path:
    """40 documents of 3-6 random 'sentences' in the official one-sentence-per-line format."""
    return write_tiny_corpus(tmp_path_factory.mktemp("corpus") / "tiny.txt")


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")


def tiny_run(corpus_file, cache_dir, out_dir, *overrides) -> RunConfig:
    return apply_overrides(preset("tiny"), [
        f"data.corpus={corpus_file}", f"data.cache_dir={cache_dir}", "model.dropout=0.1",
        "model.attention_dropout=0.1", f"train.out_dir={out_dir}", *overrides])


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


def test_resume_after_a_crash_continues_exactly(corpus_file, cache_dir, tmp_path, monkeypatch):
    """Killed during step 5 (checkpoints every 2 steps, log lines every 3, and a half-written
    last line in metrics.jsonl), then --resume: the weights, held-out figures and log of a run
    that was never interrupted."""
    common = ["train.max_steps=7", "train.save_every=2", "train.log_every=3"]
    straight = pretrain(tiny_run(corpus_file, cache_dir, tmp_path / "a", *common), progress=False)
    calls, forward = {"n": 0}, Electra.forward

    def dies(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 5:
            raise KeyboardInterrupt("killed during step 5")
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(Electra, "forward", dies)
    with pytest.raises(KeyboardInterrupt):
        pretrain(tiny_run(corpus_file, cache_dir, tmp_path / "b", *common), progress=False)
    monkeypatch.undo()
    assert [s for s, _ in list_checkpoints(tmp_path / "b")] == [2, 4]
    with open(tmp_path / "b" / "metrics.jsonl", "a") as f:
        f.write('{"kind": "train", "step": 5, "lo')  # the crash cut this line short
    torch.manual_seed(99)
    second = pretrain(tiny_run(corpus_file, cache_dir, tmp_path / "b", *common), progress=False,
                      resume=True)
    a, b = weights(straight["checkpoint"]), weights(second["checkpoint"])
    for k in a:
        assert torch.equal(a[k], b[k]), k
    assert straight["heldout"] == second["heldout"]
    logs = [[(r["kind"], r["step"], r.get("loss"), r.get("grad_norm"), r.get("disc_auc"))
             for r in map(json.loads, open(p / "metrics.jsonl"))]
            for p in (tmp_path / "a", tmp_path / "b")]
    assert logs[0] == logs[1]
    assert [s for kind, s, *_ in logs[1] if kind == "train"] == [2, 3, 4, 6, 7]


def test_resume_redoes_an_evaluation_that_a_crash_interrupted(corpus_file, cache_dir, tmp_path,
                                                               monkeypatch):
    """Checkpoint first, then evaluation: a crash in the evaluation at step 2 loses no training,
    and the resumed run evaluates step 2 before going on, so its log is the straight run's."""
    import minielectra.training.loop as loop

    common = ["train.max_steps=4", "train.save_every=2", "train.eval_every=2"]
    straight = pretrain(tiny_run(corpus_file, cache_dir, tmp_path / "a", *common), progress=False)

    def crash(*args, **kwargs):
        raise KeyboardInterrupt("killed during the evaluation at step 2")

    with monkeypatch.context() as m:
        m.setattr(loop, "evaluate_model", crash)
        with pytest.raises(KeyboardInterrupt):
            pretrain(tiny_run(corpus_file, cache_dir, tmp_path / "b", *common), progress=False)
    assert [s for s, _ in list_checkpoints(tmp_path / "b")] == [2]
    second = pretrain(tiny_run(corpus_file, cache_dir, tmp_path / "b", *common), progress=False,
                      resume=True)
    assert second["heldout"] == straight["heldout"]
    logs = [[{k: v for k, v in json.loads(line).items() if k not in ("elapsed_s", "tokens_per_s")}
             for line in open(p / "metrics.jsonl")] for p in (tmp_path / "a", tmp_path / "b")]
    assert [(r["kind"], r["step"]) for r in logs[0]] == [
        ("train", 1), ("train", 2), ("eval", 2), ("train", 3), ("train", 4), ("eval", 4)]
    assert logs[0] == logs[1]


def test_run_writes_config_metrics_and_loadable_checkpoint(corpus_file, cache_dir, tmp_path):
    out = tmp_path / "run"
    live = []  # what a notebook's live curves receive
    result = pretrain(tiny_run(corpus_file, cache_dir, out, "train.eval_every=3"), progress=False,
                      on_record=live.append)
    ckpt = Path(result["checkpoint"])
    assert ckpt == latest_checkpoint(out) and ckpt.name == "step_0000006"
    saved = RunConfig.load(out / "config.json")
    assert saved.model.vocab_size == Electra.from_pretrained(ckpt).config.vocab_size
    assert RunConfig.load(ckpt / "run_config.json").to_dict() == saved.to_dict()
    assert (ckpt / "vocab.txt").is_file() and (out / "tokenizer" / "vocab.txt").is_file()
    records = [json.loads(line) for line in open(out / "metrics.jsonl")]
    assert live == records  # on_record sees every line, in order, as it is written
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


def test_final_checkpoint_is_saved_before_the_final_evaluation(corpus_file, cache_dir, tmp_path,
                                                                monkeypatch):
    """A crash in the final evaluation loses no training: the last step is already on disk."""
    import minielectra.training.loop as loop

    straight = pretrain(tiny_run(corpus_file, cache_dir, tmp_path / "a", "train.max_steps=3"),
                        progress=False)

    def crash(*args, **kwargs):
        raise RuntimeError("evaluation crashed")

    monkeypatch.setattr(loop, "evaluate_model", crash)
    out = tmp_path / "b"
    with pytest.raises(RuntimeError, match="evaluation crashed"):
        pretrain(tiny_run(corpus_file, cache_dir, out, "train.max_steps=3"), progress=False)
    assert [s for s, _ in list_checkpoints(out)] == [3]
    a, b = weights(straight["checkpoint"]), weights(latest_checkpoint(out))
    for k in a:
        assert torch.equal(a[k], b[k]), k


def test_tokens_per_s_leaves_out_evaluation_and_checkpoint_time(corpus_file, cache_dir, tmp_path,
                                                                 monkeypatch):
    """Each checkpoint and each evaluation moves the clock on by 1000 s. Counted as training
    time, they would put tokens/s below 0.2 (at most 2 x 4 x 16 tokens per log line); left out,
    it is the speed of a few tiny steps, far above 1."""
    import time

    import minielectra.training.loop as loop

    offset, real_clock = [0.0], time.perf_counter
    real_save, real_eval = loop.save_checkpoint, loop.evaluate_model

    def slow(fn):
        def wrapped(*args, **kwargs):
            result = fn(*args, **kwargs)
            offset[0] += 1000.0
            return result
        return wrapped

    monkeypatch.setattr(time, "perf_counter", lambda: real_clock() + offset[0])
    monkeypatch.setattr(loop, "save_checkpoint", slow(real_save))
    monkeypatch.setattr(loop, "evaluate_model", slow(real_eval))
    out = tmp_path / "clock"
    pretrain(tiny_run(corpus_file, cache_dir, out, "train.max_steps=6", "train.log_every=2",
                      "train.save_every=2", "train.eval_every=2"), progress=False)
    records = [json.loads(line) for line in open(out / "metrics.jsonl")]
    train_records = [r for r in records if r["kind"] == "train"]
    assert [r["step"] for r in train_records] == [2, 4, 6]
    assert train_records[-1]["elapsed_s"] > 4000  # the clock did jump (2 saves + 2 evals)
    assert all(r["tokens_per_s"] > 1 for r in train_records), train_records


# --------------------------------------------------------------------------- checkpoints


def _tiny_model_and_cfg(tmp_path, tiny_model_config):
    cfg = RunConfig()
    cfg.model = tiny_model_config()
    cfg.train.out_dir = str(tmp_path)
    return Electra(cfg.model), cfg


def test_checkpoint_write_is_atomic(tmp_path, monkeypatch, tiny_model_config):
    """A crash in the middle of writing leaves the previous checkpoints intact and no new one."""
    import minielectra.model.checkpoint as ck

    model, cfg = _tiny_model_and_cfg(tmp_path, tiny_model_config)
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


def test_keep_last_k_plus_milestones(tmp_path, tiny_model_config):
    model, cfg = _tiny_model_and_cfg(tmp_path, tiny_model_config)
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


def test_nan_is_found_at_the_next_check_and_nothing_is_saved_after_it(corpus_file, cache_dir,
                                                                     tmp_path, monkeypatch):
    """The guard reads the NaN flags lazily (log lines every 10 steps here), but never later than
    the next checkpoint: a NaN in step 5 is found before step 6 would be saved, and named."""
    calls, forward = {"n": 0}, Electra.forward

    def poisoned(self, *args, **kwargs):
        out = forward(self, *args, **kwargs)
        calls["n"] += 1
        if calls["n"] == 5:
            out.loss = out.loss * float("nan")
        return out

    monkeypatch.setattr(Electra, "forward", poisoned)
    out = tmp_path / "lazy"
    with pytest.raises(TrainingDiverged, match=r"step 5\b.*step_0000003"):
        pretrain(tiny_run(corpus_file, cache_dir, out, "train.max_steps=9", "train.save_every=3",
                          "train.log_every=10"), progress=False)
    assert calls["n"] == 6  # it trained on (no host read per step) until the check at step 6
    assert [s for s, _ in list_checkpoints(out)] == [3]


def test_train_step_reads_no_value_from_the_device(monkeypatch, tiny_model_config):
    """Reading a tensor's value on the host (item, bool, float, tolist) makes the CPU wait for the
    GPU to finish; train_step leaves even the NaN check to the loop. Any such read fails here."""
    from minielectra.config import TrainConfig

    torch.manual_seed(0)
    model = Electra(tiny_model_config())
    ids = torch.randint(5, 50, (4, 12))
    ids[:, 0], ids[:, -1] = 2, 3
    batches = iter([{"input_ids": ids, "attention_mask": torch.ones_like(ids),
                     "token_type_ids": torch.zeros_like(ids)}] * 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)  # no host reads of its own either
    kwargs = dict(t=TrainConfig(grad_accum=2), device=torch.device("cpu"),
                  sampler=torch.Generator().manual_seed(0))

    def host_read(*args, **kw):
        raise AssertionError("a tensor value was read on the host inside train_step")

    with monkeypatch.context() as m:
        for name in ("item", "tolist", "__bool__", "__float__", "__int__", "__index__"):
            m.setattr(torch.Tensor, name, host_read)
        stats = train_step(model, batches, optimizer, None, **kwargs)
    assert stats["finite"].dtype == torch.bool and bool(stats["finite"])
    assert float(stats["tokens"]) == 2 * ids.numel()


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
@pytest.mark.parametrize("device, precision, message", [
    ("cpu", "fp16", "CUDA"), ("cpu", "bf16", "native bfloat16"), ("auto", "bf16", "native bfloat16"),
    ("cuda", "fp32", "cuda")])
def test_precision_or_device_this_machine_lacks_is_refused(tmp_path, monkeypatch, device,
                                                           precision, message):
    from minielectra.training import device as device_mod
    monkeypatch.setattr(device_mod, "cpu_bf16_missing", lambda: "no native bfloat16 here")
    cfg = preset("nano")
    cfg.train.device, cfg.train.precision = device, precision
    cfg.train.out_dir = str(tmp_path / "x")
    with pytest.raises(RuntimeError, match=message):
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


def test_fresh_run_refuses_a_directory_with_an_earlier_runs_checkpoints(corpus_file, cache_dir,
                                                                        tmp_path):
    out = tmp_path / "twice"
    pretrain(tiny_run(corpus_file, cache_dir, out, "train.max_steps=2"), progress=False)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    with pytest.raises(ValueError, match=r"(?s)earlier run.*delete.*--out.*--resume"):
        pretrain(tiny_run(corpus_file, cache_dir, out, "train.max_steps=2"), progress=False)
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before  # untouched


# ------------------------------------------------------------------------------ compile


@pytest.mark.parametrize("backend", [
    "aot_eager",
    pytest.param("inductor", marks=pytest.mark.skipif(
        not os.environ.get("MINIELECTRA_TEST_INDUCTOR"),
        reason="inductor's C++ code generation takes ~45 s on 2 cores; "
               "set MINIELECTRA_TEST_INDUCTOR=1 to run it")),
])
def test_compile_traces_once_and_never_recompiles(corpus_file, cache_dir, tmp_path, monkeypatch,
                                                  backend):
    """``--compile`` with static shapes: after the first step, dynamo compiles nothing more,
    through evaluations and checkpoints (``error_on_recompile`` turns a recompile into an error),
    and the compiled run trains the same model as the eager one.

    By default the backend is ``aot_eager``: dynamo's tracing, guards and AOT autograd exactly as
    with ``pretrain``'s default inductor backend (recompiles are decided by the guards, not the
    backend), without inductor's C++ code generation on a small CPU."""
    dynamo = pytest.importorskip("torch._dynamo")
    from torch._dynamo.utils import counters

    real_compile = torch.compile
    monkeypatch.setattr(torch, "compile",
                        lambda model, **kw: real_compile(model, backend=backend, **kw))
    common = ["model.dropout=0.0", "model.attention_dropout=0.0", "train.max_steps=6",
              "train.eval_every=2", "train.save_every=3"]
    graphs = []
    with dynamo.config.patch(error_on_recompile=True):
        try:
            for steps, name in ((1, "one"), (6, "c")):  # one step compiles all a run needs
                dynamo.reset()
                counters.clear()
                compiled = pretrain(tiny_run(corpus_file, cache_dir, tmp_path / name, *common,
                                             "train.compile=true", f"train.max_steps={steps}"),
                                    progress=False)
                graphs.append(counters["stats"]["unique_graphs"])
        except dynamo.exc.BackendCompilerFailed as e:  # e.g. no C++ compiler for inductor
            pytest.skip(f"the {backend} backend cannot run on this machine: {e}")
        finally:
            dynamo.reset()
    assert graphs[0] > 0 and graphs[1] == graphs[0], graphs  # it compiled, and only once
    eager = pretrain(tiny_run(corpus_file, cache_dir, tmp_path / "e", *common), progress=False)
    a, b = weights(compiled["checkpoint"]), weights(eager["checkpoint"])
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=1e-4, atol=1e-5, msg=k)
