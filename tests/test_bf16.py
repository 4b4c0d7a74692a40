"""bf16 autocast on a CPU: the same run as fp32 within bf16's rounding, and its refusals.

The references are fp32 runs of the same seed (the parity tests) and an unbroken bf16 run (the
resume test). The parity tests need a CPU that multiplies bfloat16 natively and skip, saying
so, on one that does not; the refusals are tested everywhere by hiding the instructions.
"""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from minielectra.config import apply_overrides, preset
from minielectra.model.electra import Electra
from minielectra.training import device as device_mod
from minielectra.training.device import autocast, check_precision, cpu_bf16_missing
from minielectra.training.loop import pretrain
from minielectra.training.optim import build_optimizer, lr_at, set_lr

CPU = torch.device("cpu")
needs_bf16 = pytest.mark.skipif(cpu_bf16_missing() is not None,
                                reason=f"bf16 parity needs native bfloat16: {cpu_bf16_missing()}")

# How far bf16 may drift from fp32 over PARITY_STEPS of `nano` from one seed. bf16 keeps 8 bits
# of mantissa (relative rounding 2^-9); measured on a 2-core AVX512-BF16 CPU: the largest
# relative loss difference over 300 steps was 0.006, the held-out AUC difference 0.004.
PARITY_STEPS = 300
LOSS_RTOL = 0.02
AUC_ATOL = 0.01


# --------------------------------------------------------------------------- refusals

@pytest.fixture
def no_bf16(monkeypatch):
    """A CPU without native bfloat16, as check_precision sees it."""
    monkeypatch.setattr(device_mod, "cpu_bf16_missing",
                        lambda: "this CPU (Test CPU) has no native bfloat16 (AVX512-BF16, AMX or "
                                "Arm BF16); use --precision fp32")


def test_detection_reads_the_processor(monkeypatch):
    """No probe and no flag: the line names the CPU; any one of the flags: bf16 is native."""
    cpu_bf16_missing.cache_clear()
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False, raising=False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False, raising=False)
    monkeypatch.setattr(device_mod, "_cpu_flags", lambda: {"avx2", "avx512f"})
    monkeypatch.setattr(device_mod.platform, "system", lambda: "Linux")
    monkeypatch.setattr(device_mod, "cpu_name", lambda: "Test CPU")
    try:
        assert cpu_bf16_missing() == ("this CPU (Test CPU) has no native bfloat16 (AVX512-BF16, "
                                      "AMX or Arm BF16); use --precision fp32")
        for flag in ("avx512_bf16", "amx_bf16", "bf16"):
            cpu_bf16_missing.cache_clear()
            monkeypatch.setattr(device_mod, "_cpu_flags", lambda f=flag: {"avx512f", f})
            assert cpu_bf16_missing() is None, flag
    finally:
        cpu_bf16_missing.cache_clear()


def test_check_precision(no_bf16):
    check_precision(CPU, "fp32")
    with pytest.raises(RuntimeError, match=r"^precision bf16 on the CPU: this CPU \(Test CPU\)"):
        check_precision(CPU, "bf16")
    with pytest.raises(RuntimeError, match="precision fp16 needs a CUDA GPU"):
        check_precision(CPU, "fp16")


def test_pretrain_refuses_bf16_without_native_bf16_and_writes_nothing(no_bf16, tmp_path):
    cfg = apply_overrides(preset("tiny"), ["train.device=cpu", "train.precision=bf16",
                                           f"train.out_dir={tmp_path / 'run'}"])
    with pytest.raises(RuntimeError, match="no native bfloat16"):
        pretrain(cfg, progress=False)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("argv", [
    ["pretrain", "--preset", "tiny", "--device", "cpu", "--precision", "bf16"],
    ["finetune", "--train", "T", "--dev", "T", "--precision", "bf16"],
    ["evaluate", "--precision", "bf16"],
    ["viz", "--text", "a cat", "--json", "--precision", "bf16"],
])
def test_each_command_refuses_in_one_line(no_bf16, tmp_path, capsys, monkeypatch, argv):
    from minielectra.cli import main
    monkeypatch.chdir(tmp_path)
    (tmp_path / "T").write_text("text,label\na,0\nb,1\n")
    assert main(argv + (["--out", "run"] if argv[0] == "pretrain" else [])) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no native bfloat16" in err[0], err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["T"]  # nothing written


def test_fp16_stays_gpu_only(tmp_path, capsys):
    from minielectra.cli import main
    if torch.cuda.is_available():
        pytest.skip("checks the refusal on a CPU-only machine")
    assert main(["pretrain", "--preset", "tiny", "--precision", "fp16",
                 "--out", str(tmp_path / "r")]) == 2
    assert "fp16 needs a CUDA GPU" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


# ------------------------------------------------------------------------- parity with fp32

def nano(out: Path, precision: str, steps: int, *extra: str):
    return apply_overrides(preset("nano"), [
        "train.device=cpu", f"train.precision={precision}", f"train.max_steps={steps}",
        "train.log_every=1", f"train.eval_every={steps}", f"train.save_every={steps}",
        "train.max_minutes=0", f"train.out_dir={out}", *extra])


def losses(run_dir: Path) -> list[float]:
    return [r["loss"] for r in map(json.loads, open(run_dir / "metrics.jsonl"))
            if r["kind"] == "train"]


@pytest.fixture(scope="module")
def parity_runs(tmp_path_factory):
    """``nano`` for PARITY_STEPS steps from seed 0, in fp32 and in bf16."""
    if cpu_bf16_missing() is not None:
        pytest.skip(f"bf16 parity needs native bfloat16: {cpu_bf16_missing()}")
    root = tmp_path_factory.mktemp("parity")
    return {p: pretrain(nano(root / p, p, PARITY_STEPS), progress=False) | {"dir": root / p}
            for p in ("fp32", "bf16")}


@needs_bf16
def test_losses_agree_at_every_step(parity_runs):
    a, b = (losses(parity_runs[p]["dir"]) for p in ("fp32", "bf16"))
    assert len(a) == len(b) == PARITY_STEPS
    worst = max(abs(x - y) / x for x, y in zip(a, b))
    assert worst < LOSS_RTOL, f"bf16 loss {worst:.4f} from fp32's (relative) at some step"
    assert a != b  # bf16 really ran: its rounding shows in the losses


@needs_bf16
def test_heldout_auc_agrees(parity_runs):
    auc = {p: parity_runs[p]["heldout"]["disc_auc"] for p in ("fp32", "bf16")}
    assert auc["fp32"] > 0.55  # both learned something
    assert abs(auc["bf16"] - auc["fp32"]) < AUC_ATOL, auc


@needs_bf16
def test_a_bf16_checkpoint_holds_fp32_weights_that_load_in_fp32(parity_runs):
    ckpt = Path(parity_runs["bf16"]["checkpoint"])
    model = Electra.from_pretrained(ckpt)
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    from safetensors.torch import load_file  # what is on disk, not what loading made of it
    tensors = {k: v for f in ckpt.glob("*.safetensors") for k, v in load_file(f).items()}
    assert tensors and {v.dtype for v in tensors.values() if v.is_floating_point()} == {
        torch.float32}


def _steps(precision: str, n: int):
    """``n`` hand-written training steps of `nano`'s model from seed 0 on one fixed batch:
    each step's corrupted ids, and the first step's gradients."""
    run = preset("nano")
    run.model.cls_token_id, run.model.sep_token_id, run.model.mask_token_id = 2, 3, 4
    torch.manual_seed(0)
    model = Electra(run.model, run.objective).train()
    opt = build_optimizer(model, run.train, CPU)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, run.model.vocab_size, (64, 16), generator=g)
    ids[:, 0], ids[:, -1] = 2, 3
    mask = torch.ones_like(ids)
    corrupted, grads = [], None
    for step in range(n):
        set_lr(opt, lr_at(step, run.train), run.train, step)
        opt.zero_grad()
        with autocast(CPU, precision):
            out = model(ids, mask, torch.zeros_like(ids),
                        generator=torch.Generator().manual_seed(100 + step))
        out.loss.backward()
        if grads is None:
            grads = torch.cat([p.grad.flatten() for p in model.parameters()
                               if p.grad is not None])
        torch.nn.utils.clip_grad_norm_(model.parameters(), run.train.grad_clip)
        opt.step()
        corrupted.append(out.corrupted_ids)
    return corrupted, grads


@needs_bf16
def test_sampling_stays_fp32_and_one_steps_gradients_are_close():
    """The masks and the Gumbel samples are drawn in fp32 from the same seeds: the first steps
    replace the same tokens; one step's gradients differ by bf16's rounding, not more."""
    (c32, g32), (c16, g16) = _steps("fp32", 5), _steps("bf16", 5)
    for step, (a, b) in enumerate(zip(c32, c16)):
        assert torch.equal(a, b), f"step {step}: other tokens replaced"
    rel = float((g16 - g32).norm() / g32.norm())
    assert 0 < rel < 0.05, rel


@needs_bf16
def test_a_resumed_bf16_run_continues_exactly(tmp_path):
    common = ["train.save_every=10", "train.eval_every=10", "train.eval_examples=256"]
    straight = pretrain(nano(tmp_path / "a", "bf16", 20, *common), progress=False)
    pretrain(nano(tmp_path / "b", "bf16", 20, *common), progress=False, until_step=10)
    torch.manual_seed(1234)  # a resumed process does not inherit the first one's RNG
    second = pretrain(nano(tmp_path / "b", "bf16", 20, *common), progress=False, resume=True)
    a, b = (Electra.from_pretrained(s["checkpoint"]).state_dict() for s in (straight, second))
    for k in a:
        assert torch.equal(a[k], b[k]), k
    assert losses(tmp_path / "a") == losses(tmp_path / "b")
    assert straight["heldout"] == second["heldout"]


# ------------------------------------------------------ fine-tuning, evaluation, the views

@needs_bf16
def test_evaluate_and_views_in_bf16_agree_with_fp32():
    from minielectra.training.evaluate import evaluate
    from minielectra.viz.scoring import load_checkpoint, score_text
    r = {p: evaluate("bundled", corpus="pydocs", max_examples=256, precision=p)
         for p in ("fp32", "bf16")}
    assert r["bf16"]["precision"] == "bf16"
    assert abs(r["bf16"]["disc_auc"] - r["fp32"]["disc_auc"]) < 0.01, r
    text = "the cat sat on the mat and looked at the birds outside ."
    recs = {p: score_text(load_checkpoint("bundled", precision=p), text, seed=3)
            for p in ("fp32", "bf16")}
    assert [x["token"] for x in recs["fp32"]] == [x["token"] for x in recs["bf16"]]
    worst = max(abs(x["p_replaced"] - y["p_replaced"]) for x, y in zip(*recs.values()))
    assert 0 < worst < 0.05, worst


@needs_bf16
def test_finetune_in_bf16_tracks_fp32_and_saves_fp32(tmp_path):
    from minielectra.finetune.run import finetune
    from minielectra.finetune.saved import load_finetuned
    rows = ["text,label"] + [f"{w} movie {w},{int(w in ('good', 'great'))}" for w in
                             ["good", "bad", "great", "awful"] * 12]
    (tmp_path / "t.csv").write_text("\n".join(rows) + "\n")
    out = {}
    for p in ("fp32", "bf16"):
        out[p] = finetune("bundled", train=tmp_path / "t.csv", dev=tmp_path / "t.csv",
                          out=tmp_path / p, progress=False,
                          overrides=[f"finetune.precision={p}", "finetune.epochs=2",
                                     "finetune.compile=false"])
    a, b = (out[p]["runs"][0]["final_train_loss"] for p in ("fp32", "bf16"))
    assert math.isclose(a, b, rel_tol=0.1, abs_tol=0.02), (a, b)
    model = load_finetuned(tmp_path / "bf16").model
    assert {p.dtype for p in model.parameters()} == {torch.float32}


def test_the_cli_offers_bf16_to_every_command_that_computes():
    from minielectra.cli import build_parser
    sub = build_parser()._subparsers._group_actions[0].choices
    for name in ("pretrain", "finetune", "glue", "evaluate", "viz"):
        flag = next(a for a in sub[name]._actions if "--precision" in a.option_strings)
        assert "bf16" in flag.choices, name
    assert "fp16" not in next(a for a in sub["finetune"]._actions
                              if "--precision" in a.option_strings).choices
