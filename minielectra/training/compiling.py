"""When ``torch.compile`` and bf16 pay on a CPU, by measured rules, and how a step is compiled.

Compiling fuses a step's elementwise work into a few C++ loops, but generating them takes most
of a minute on two cores. A run compiles when it is long enough to win that back::

    steps x (eager step time x share saved)  >  compile seconds

The eager step time comes from the step's FLOPs (:mod:`minielectra.objectives.flops`); the rates,
share saved and compile seconds are ``benchmarks/bench_cpu.py``'s (``benchmarks/results/cpu.json``,
its ``rule`` block; ``tests/test_compiling.py`` keeps the two equal). ``pretrain`` and ``finetune``
apply the rule on a CPU unless told (``--compile``, ``--no-compile``); library functions stay
eager unless told.

bf16 autocast costs nothing up front and, on a CPU that multiplies bfloat16 natively, trained
``nano`` and ``mini`` faster with the same losses within 2% (``benchmarks/bench_bf16.py``,
``tests/test_bf16.py``). ``pretrain`` uses it for a run of at least ``BF16_MIN_MINUTES`` of steps
there, unless told (``--precision``); a shorter run, the lessons and the library stay fp32, so
their figures are the committed ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..config import ModelConfig, RunConfig
from ..objectives.flops import encoder_flops, train_flops_per_step


@dataclass(frozen=True)
class Measured:
    """What compiling bought one kind of run (``benchmarks/results/cpu.json``, ``rule``)."""

    eager_gflops: float  # our FLOPs count per step / the eager step's seconds
    saving: float  # share of the eager step's time that the compiled step saves
    compile_s: float  # the first compiled step's extra seconds, empty compiler cache


# Measured by `python benchmarks/bench_cpu.py` (the `rule` block of benchmarks/results/cpu.json).
PRETRAIN = Measured(eager_gflops=122.2, saving=0.12, compile_s=30.2)
FINETUNE = Measured(eager_gflops=28.9, saving=0.058, compile_s=18.9)
# bf16's steps/s against fp32's, the smaller over nano and mini (`python benchmarks/bench_bf16.py`,
# the `rule` block of benchmarks/results/cpu_bf16.json).
BF16_SPEEDUP = {"eager": 1.239, "compiled": 1.24}
BF16_MIN_MINUTES = 1.0  # a run shorter than this keeps fp32: a lesson's, a test's, a try


@dataclass(frozen=True)
class Choice:
    compile: bool
    line: str  # what a command prints


def decide(flops_per_step: float, steps: int, measured: Measured, *, what: str,
           max_minutes: float = 0.0) -> Choice:
    """Compile when ``steps`` (at most ``max_minutes`` of eager steps) save more time than
    compiling takes."""
    eager_s = flops_per_step / (measured.eager_gflops * 1e9)
    if max_minutes:
        steps = min(steps, math.ceil(60 * max_minutes / eager_s))
    saved = steps * eager_s * measured.saving
    on = measured.saving > 0 and saved > measured.compile_s
    reason = (f"{steps:,} steps x ~{1e3 * eager_s * measured.saving:.0f} ms saved each = "
              f"~{saved:.0f} s, against ~{measured.compile_s:.0f} s of compiling"
              if measured.saving > 0 else "a compiled step measured no faster on a CPU")
    flag = "--no-compile" if on else "--compile"
    # the measurement lives in the repository, not in an installed package: no file named here
    return Choice(on, f"{what}: torch.compile {'on' if on else 'off'} ({reason}, as measured; "
                      f"{flag} to override)")


def decide_pretrain(cfg: RunConfig) -> Choice:
    """The rule for ``minielectra pretrain`` on a CPU: ``max_steps`` within ``max_minutes``."""
    t = cfg.train
    return decide(train_flops_per_step(cfg), t.max_steps, PRETRAIN, what="pretrain",
                  max_minutes=t.max_minutes)


def decide_precision(cfg: RunConfig) -> Choice | None:
    """The rule for ``minielectra pretrain`` on a CPU without ``--precision``: bf16 where the CPU
    has it natively and the run is at least ``BF16_MIN_MINUTES`` of eager fp32 steps (capped by
    ``max_minutes``); None keeps fp32 and says nothing."""
    from .device import cpu_bf16_missing  # reads the processor: only when a run asks
    t = cfg.train
    minutes = t.max_steps * train_flops_per_step(cfg) / (PRETRAIN.eager_gflops * 1e9) / 60
    if t.max_minutes:
        minutes = min(minutes, t.max_minutes)
    if minutes < BF16_MIN_MINUTES or cpu_bf16_missing() is not None:
        return None
    gain = BF16_SPEEDUP["compiled" if t.compile else "eager"]
    return Choice(True, f"pretrain: bf16 autocast (this CPU multiplies bfloat16 natively: "
                        f"{gain:.2f}x fp32's steps/s where measured, the same losses within 2%; "
                        "--precision fp32 to override)")


def finetune_flops(cfg: ModelConfig, batch: int, length: float) -> float:
    """One fine-tuning step's FLOPs: the encoder's forward at the batch's padded ``length``,
    three times (forward and backward); the head is negligible."""
    return 3 * encoder_flops(cfg, batch, max(1, round(length)))


def decide_finetune(cfg: ModelConfig, *, steps: int, batch: int, length: float) -> Choice:
    """The rule for ``minielectra finetune`` on a CPU: every seed's steps count (each seed
    reuses the compiled code)."""
    return decide(finetune_flops(cfg, batch, length), steps, FINETUNE, what="finetune")


def compile_module(module: torch.nn.Module, device: torch.device, *, dynamic: bool | None = None):
    """``torch.compile(module)`` as training runs it. On a CPU, random numbers come from
    torch's own generator (inductor's ``fallback_random``): a compiled run draws the same masks
    as an eager one, so ``train.compile`` may change on ``--resume``, and it is faster there."""
    options = {"fallback_random": True} if device.type == "cpu" else None
    return torch.compile(module, dynamic=dynamic, options=options)
