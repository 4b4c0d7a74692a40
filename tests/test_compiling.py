"""When a CPU run compiles: the measured rule, its constants and the one line a command prints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from minielectra import cli
from minielectra.commands import pretrain_config
from minielectra.config import apply_overrides, preset
from minielectra.training import compiling

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "cpu.json"


def test_the_rule_is_the_benchmarks_measurement():
    """The constants in the code are the ``rule`` block of the committed CPU benchmark."""
    rule = json.loads(RESULTS.read_text())["rule"]
    for name, measured in (("pretrain", compiling.PRETRAIN), ("finetune", compiling.FINETUNE)):
        assert rule[name] == {"eager_gflops": measured.eager_gflops, "saving": measured.saving,
                              "compile_s": measured.compile_s}, name


def test_the_bf16_rule_is_its_benchmarks_measurement():
    rule = json.loads(RESULTS.with_name("cpu_bf16.json").read_text())["rule"]
    assert rule == {"bf16_vs_fp32_eager": compiling.BF16_SPEEDUP["eager"],
                    "bf16_vs_fp32_compiled": compiling.BF16_SPEEDUP["compiled"]}
    assert min(rule.values()) > 1  # measured faster: the reason a long CPU run takes it


def test_a_long_cpu_run_takes_bf16_where_the_cpu_has_it(monkeypatch, capsys):
    """A minute or more of steps: bf16 and one line saying so; shorter, or --precision: silent."""
    from minielectra.training import device as device_mod
    monkeypatch.setattr(device_mod, "cpu_bf16_missing", lambda: None)
    cfg = pretrain_config(_args("--preset", "nano", "--device", "cpu"))
    lines = capsys.readouterr().err.strip().splitlines()
    assert cfg.train.precision == "bf16" and len(lines) == 2
    assert lines[1].startswith("pretrain: bf16 autocast (") and "--precision fp32" in lines[1]
    for argv in (["--max-steps", "50"], ["--precision", "fp32"]):
        cfg = pretrain_config(_args("--preset", "nano", "--device", "cpu", *argv))
        assert cfg.train.precision == "fp32" and "bf16" not in capsys.readouterr().err
    monkeypatch.setattr(device_mod, "cpu_bf16_missing", lambda: "no bf16 here")
    assert pretrain_config(_args("--preset", "nano", "--device", "cpu")).train.precision == "fp32"


def test_the_rule_weighs_saved_seconds_against_compiling():
    m = compiling.Measured(eager_gflops=100.0, saving=0.2, compile_s=60.0)
    flops = 1e9 * 100 * 0.1  # 0.1 s eager, 20 ms saved per step
    assert not compiling.decide(flops, 2_000, m, what="x").compile  # 40 s saved < 60 s
    on = compiling.decide(flops, 4_000, m, what="x")  # 80 s saved
    assert on.compile and "--no-compile to override" in on.line and "4,000 steps" in on.line
    # a time cap counts only the steps that fit in it
    assert not compiling.decide(flops, 100_000, m, what="x", max_minutes=0.5).compile
    off = compiling.decide(flops, 10**9, compiling.Measured(100.0, 0.0, 60.0), what="x")
    assert not off.compile and "no faster" in off.line


def test_a_lesson_run_stays_eager_and_a_long_run_compiles():
    short = apply_overrides(preset("tiny"), ["train.max_steps=200"])
    assert not compiling.decide_pretrain(short).compile
    if compiling.PRETRAIN.saving > 0:  # compiling measured faster: a day-long mini run pays
        long = apply_overrides(preset("mini"), ["train.max_steps=1000000",
                                                "train.max_minutes=0"])
        assert compiling.decide_pretrain(long).compile


def _args(*argv):
    return cli.build_parser().parse_args(["pretrain", *argv])


@pytest.mark.parametrize("flag, expected", [("--compile", True), ("--no-compile", False)])
def test_the_flags_override_the_rule_silently(flag, expected, capsys):
    cfg = pretrain_config(_args("--preset", "tiny", "--device", "cpu", flag))
    assert cfg.train.compile is expected and "torch.compile" not in capsys.readouterr().err


def test_without_a_flag_a_cpu_run_says_what_it_chose(capsys):
    cfg = pretrain_config(_args("--preset", "tiny", "--device", "cpu", "--max-steps", "50"))
    err = capsys.readouterr().err.strip().splitlines()
    assert cfg.train.compile is False
    assert len(err) == 1 and err[0].startswith("pretrain: torch.compile off (")
