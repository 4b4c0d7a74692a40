"""Stage 3: ELECTRA-Small's training speed against transformers' modules, batch 128, 256, 512.

``benchmarks/bench_small.py`` at 128 x 128 (bf16 autocast, ``torch.compile``, the official
optimiser, both sides through the same ``train_step``, interleaved rounds), with MFU against the
peak that stage 1 measured on this very GPU (the datasheet's where stage 1 has not run) and the
peak memory of each side. Each batch size is kept as soon as it is measured: a call that runs
out of time leaves the rest to the next call ("partial").

Targets (batch 128 on an H100): >= 80 steps/s (1M steps in under 3.5 hours), >= 2x transformers.
"""

from __future__ import annotations

import time

from bench_small import measure, parse  # benchmarks/bench_small.py

from .common import TOY_SMALL, Context, check

BATCHES = (128, 256, 512)
TARGET_STEPS_PER_S, TARGET_RATIO = 80.0, 2.0


def args_for(ctx: Context, batch: int, peak: float | None) -> list[str]:
    if ctx.dry:  # the dry run: the same measurement, toy-sized and eager
        return ["--device", "cpu", "--batch", "2", "--seq-len", "32", "--precision", "fp32",
                "--no-compile", "--steps", "1", "--rounds", "1",
                *[x for o in TOY_SMALL if not o.startswith("data.") for x in ("--set", o)]]
    return ["--device", "cuda", "--batch", str(batch), "--seq-len", "128", "--steps", "20",
            "--rounds", "5", *(["--peak-tflops", str(peak)] if peak else [])]


def run(ctx: Context, previous: dict | None = None, *, seconds_left: float) -> dict:
    peak = ctx.earlier.get("1", {}).get("result", {}).get("peak", {}).get("tflops")
    done = dict((previous or {}).get("by_batch", {}))
    begin = time.perf_counter()
    for batch in (BATCHES[:1] if ctx.dry else BATCHES):
        if str(batch) in done:
            continue
        if done and time.perf_counter() - begin > seconds_left * 0.45:
            break  # a larger batch would not finish in this call: the next call does it
        argv = args_for(ctx, batch, peak)
        done[str(batch)] = measure(parse(argv), " ".join(argv))
    wanted = [str(b) for b in (BATCHES[:1] if ctx.dry else BATCHES)]
    out = {"by_batch": done, "peak_tflops_used": peak,
           "peak_source": "stage 1, measured" if peak else "datasheet (stage 1 not run)",
           "partial": [b for b in wanted if b not in done]}
    r = done.get(wanted[0])
    if r and not ctx.dry:
        out["checks"] = {
            "steps_per_s_target": check(r["minielectra"]["steps_per_s"] >= TARGET_STEPS_PER_S,
                                        steps_per_s=r["minielectra"]["steps_per_s"],
                                        target=TARGET_STEPS_PER_S),
            "ratio_vs_transformers_target": check(r["ratio"] >= TARGET_RATIO, ratio=r["ratio"],
                                                  target=TARGET_RATIO)}
    elif r:
        out["checks"] = {"measured": check(r["minielectra"]["steps_per_s"] > 0)}
    return out
