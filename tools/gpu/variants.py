"""Stage 8: what the ``small`` preset should run: CUDA graphs, and larger batches.

At 128 x 128 a step of ELECTRA-Small is about 1.2 ms of H100 arithmetic spread over about a
thousand kernel launches: launch-bound. Two remedies, each measured here on minielectra's side
alone (``bench_small.py --only-minielectra``), against the default compile at batch 128:

- ``torch.compile(mode="reduce-overhead")``: the compiled forward and backward recorded as CUDA
  graphs, one launch per graph. The same arithmetic: if it wins, the preset can take it with
  no change to the recipe.
- batch 256 and 512 (default compile): more work per launch. Sequences per second is the
  figure to compare; a larger batch changes the recipe (the paper's is 128 at lr 5e-4), so it
  is a choice for a run that scales its learning rate, not a free speed-up.

Each variant is kept as soon as it is measured and a failing one is recorded with its error, so
a call that runs out of time, or a mode that does not work, leaves the rest to run ("partial").
``winner`` is the fastest in sequences per second; ``same_recipe_winner`` the fastest at 128.
"""

from __future__ import annotations

import time
import traceback

from bench_small import measure, parse  # benchmarks/bench_small.py

from .common import Context, check
from .speed import peak_tflops, toy_args

# name: (batch, compile mode)
VARIANTS = {"b128-default": (128, "default"), "b128-cuda-graphs": (128, "reduce-overhead"),
            "b256-default": (256, "default"), "b512-default": (512, "default"),
            "b256-cuda-graphs": (256, "reduce-overhead")}


def args_for(ctx: Context, batch: int, mode: str, peak: float | None) -> list[str]:
    if ctx.dry:  # toy-sized and eager: the path, not the figure (no CUDA graphs on a CPU)
        return toy_args() + ["--only-minielectra"]
    return ["--device", "cuda", "--batch", str(batch), "--seq-len", "128", "--steps", "50",
            "--rounds", "5", "--mode", mode, "--only-minielectra",
            *(["--peak-tflops", str(peak)] if peak else [])]


def one(ctx: Context, batch: int, mode: str, peak: float | None) -> dict:
    argv = args_for(ctx, batch, mode, peak)
    try:
        r = measure(parse(argv), " ".join(argv))
    except Exception as e:  # recorded: the other variants still run
        return {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()[-2000:]}
    m = r["minielectra"]
    return {"batch": batch, "mode": mode, "steps_per_s": m["steps_per_s"],
            "sequences_per_s": m["sequences_per_s"], "mfu": m["mfu"], "spread": m["spread"],
            "peak_memory_gib": r["peak_memory_gib (warm-up steps)"]["minielectra"],
            "warmup_s": r["warmup_s (incl. compile)"]["minielectra"], "command": r["command"]}


def run(ctx: Context, previous: dict | None = None, *, seconds_left: float) -> dict:
    peak = peak_tflops(ctx)
    done = dict((previous or {}).get("variants", {}))
    names = list(VARIANTS)[:1] if ctx.dry else list(VARIANTS)
    begin = time.perf_counter()
    for name in names:
        if name in done and "error" not in done[name]:
            continue
        if done and time.perf_counter() - begin > seconds_left - 100:
            break  # about what one variant takes with its compile: the next call does it
        done[name] = one(ctx, *VARIANTS[name], peak)
    measured = {k: v for k, v in done.items() if "error" not in v}
    out = {"variants": done, "partial": [n for n in names if n not in done]}
    if measured:
        best = max(measured, key=lambda k: measured[k]["sequences_per_s"])
        at128 = {k: v for k, v in measured.items() if v["batch"] == 128}
        out["winner"] = best
        out["same_recipe_winner"] = (max(at128, key=lambda k: at128[k]["sequences_per_s"])
                                     if at128 else None)
        base = measured.get("b128-default")
        if base:
            out["speedup_vs_b128_default"] = {
                k: round(v["sequences_per_s"] / base["sequences_per_s"], 3)
                for k, v in measured.items()}
    out["checks"] = {"every_variant_ran": check(not out["partial"] and len(measured) == len(
        names), failed=[k for k, v in done.items() if "error" in v])}
    return out
