"""Stage 3: the headline figure, ELECTRA-Small's training speed against transformers' modules.

``benchmarks/bench_small.py`` at the paper's shape, batch 128 x 128 (bf16 autocast,
``torch.compile``, the official optimiser, both sides through the same ``train_step``,
interleaved rounds), with MFU against the peak that stage 1 measured on this very GPU (the
datasheet's where stage 1 has not run) and the peak memory of each side. The first call of the
plan runs it right after stage 1, so the first window's JSON has it whatever happens later.
Other batch sizes and CUDA graphs are stage 8 (``gpu/variants.py``).

Targets (batch 128 on an H100): >= 150 steps/s (1M steps in under two hours), >= 2x
transformers' modules.
"""

from __future__ import annotations

from bench_small import measure, parse  # benchmarks/bench_small.py

from .common import TOY_SMALL, Context, check

BATCH = 128
TARGET_STEPS_PER_S, TARGET_RATIO = 150.0, 2.0


def toy_args(precision: str = "fp32") -> list[str]:
    """The dry run: the same measurement, toy-sized and eager, on the CPU."""
    return ["--device", "cpu", "--batch", "2", "--seq-len", "32", "--precision", precision,
            "--no-compile", "--steps", "1", "--rounds", "1",
            *[x for o in TOY_SMALL if not o.startswith("data.") for x in ("--set", o)]]


def peak_tflops(ctx: Context) -> float | None:
    """Stage 1's measured bf16 peak, when stage 1 has run."""
    return ctx.earlier.get("1", {}).get("result", {}).get("peak", {}).get("tflops")


def run(ctx: Context) -> dict:
    peak = peak_tflops(ctx)
    argv = toy_args(ctx.bf16) if ctx.dry else [
        "--device", "cuda", "--batch", str(BATCH), "--seq-len", "128", "--steps", "50",
        "--rounds", "5", *(["--peak-tflops", str(peak)] if peak else [])]
    r = measure(parse(argv), " ".join(argv))
    out = {"by_batch": {str(BATCH): r}, "peak_tflops_used": peak,
           "peak_source": "stage 1, measured" if peak else "datasheet (stage 1 not run)"}
    if ctx.dry:
        out["checks"] = {"measured": check(r["minielectra"]["steps_per_s"] > 0)}
        return out
    out["checks"] = {
        "steps_per_s_target": check(r["minielectra"]["steps_per_s"] >= TARGET_STEPS_PER_S,
                                    steps_per_s=r["minielectra"]["steps_per_s"],
                                    target=TARGET_STEPS_PER_S),
        "ratio_vs_transformers_target": check(r["ratio"] >= TARGET_RATIO, ratio=r["ratio"],
                                              target=TARGET_RATIO)}
    return out
