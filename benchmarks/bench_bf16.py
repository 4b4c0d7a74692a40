"""bf16 autocast against fp32 on a CPU, in one run: steps/s, product rates, time to a target AUC.

    python benchmarks/bench_bf16.py --out benchmarks/results/cpu_bf16.json   # ~20 min, 2 cores

Needs a CPU that multiplies bfloat16 natively (``training.device.cpu_bf16_missing``). As
``bench_cpu.py``: the 1-minute load average is recorded before the start and a start above 1.5
is refused (``--wait`` waits for it to fall); the compared sides run in this one process,
interleaved round by round, each ratio the median of the per-round ratios with its quartiles.

- **pre-training**, ``nano`` and ``mini`` (``train_step`` as ``pretrain`` runs it): fp32 and
  bf16, eager and compiled; and transformers' modules compiled under the same bf16 autocast.
- **fine-tuning**, SST-2 (``MINIELECTRA_DATA_DIR``; 2,000 sentences, the bundled checkpoint,
  batch 32): fp32 and bf16, eager.
- **products**: a 2048^3 product through oneDNN in fp32 (the route of our dense layers,
  ``model.cpu``) and in bf16 (``torch.mm`` on bf16 tensors, oneDNN's bf16 kernel); each step's
  FLOP/s as a share of the rate of its own precision.
- **the main job**: ``minielectra pretrain --preset nano`` (as the README runs it: the compile
  rule's choice, its time cap) in each precision, held-out AUC every 100 steps: the wall time to
  the first evaluation at AUC 0.75 or above.

The ``rule`` block holds what ``minielectra.training.compiling.decide_precision`` uses.
"""

from __future__ import annotations

import os
import sys
import tempfile

os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench_bf16_inductor_")

import minielectra  # noqa: E402,F401  (first: its import sets OMP_WAIT_POLICY before torch loads)

import argparse  # noqa: E402
import copy  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

from bench_cpu import (MAX_LOAD, finetune_setup, finetune_step, finish,  # noqa: E402
                       first_step, interleaved, log, machine, paired, pretrain_setup,
                       pretrain_step, spread)
from bench_throughput import HFElectra  # noqa: E402
from minielectra.config import apply_overrides  # noqa: E402
from minielectra.model import cpu as cpu_layers  # noqa: E402
from minielectra.model.electra import Electra  # noqa: E402
from minielectra.objectives.flops import train_flops_per_step  # noqa: E402
from minielectra.training.device import cpu_bf16_missing, cpu_name  # noqa: E402

TARGET_AUC = 0.75


def with_precision(run, precision: str):
    out = copy.deepcopy(run)
    apply_overrides(out, [f"train.precision={precision}"])
    return out


def bench_pretrain(name: str, args, rates: dict) -> dict:
    torch._dynamo.reset()
    run, batches = pretrain_setup(name)
    runs = {p: with_precision(run, p) for p in ("fp32", "bf16")}
    flops = train_flops_per_step(run)
    steps, compile_s = {}, {}
    for p in ("fp32", "bf16"):
        log(f"{name} {p}: eager, then compiling ...")
        steps[f"eager_{p}"], eager_first = first_step(
            lambda: pretrain_step(runs[p], batches, Electra, compiled=False))
        steps[f"compiled_{p}"], cold = first_step(
            lambda: pretrain_step(runs[p], batches, Electra, compiled=True))
        compile_s[p] = round(max(0.0, cold - eager_first), 1)
    log(f"{name}: compiling transformers' modules under bf16 autocast ...")
    steps["transformers_compiled_bf16"], _ = first_step(
        lambda: pretrain_step(runs["bf16"], batches, HFElectra, compiled=True))
    log(f"{name}: {args.rounds} interleaved rounds ...")
    r = interleaved(steps, rounds=args.rounds, seconds=args.chunk_seconds)
    share = {side: round(statistics.median(v) * flops / (rates[side.rsplit("_", 1)[1]] * 1e9), 3)
             for side, v in r.items()}
    return {"batch": [run.train.batch_size, run.data.max_seq_len], "flops_per_step": flops,
            **{k: spread(v) for k, v in r.items()},
            "bf16_vs_fp32_eager": paired(r["eager_bf16"], r["eager_fp32"]),
            "bf16_vs_fp32_compiled": paired(r["compiled_bf16"], r["compiled_fp32"]),
            "compiled_bf16_vs_eager_fp32": paired(r["compiled_bf16"], r["eager_fp32"]),
            "vs_transformers_bf16_both_compiled": paired(r["compiled_bf16"],
                                                         r["transformers_compiled_bf16"]),
            "compile_s": compile_s, "share_of_product_rate": share}


def bench_finetune(args) -> dict:
    setup = finetune_setup(args.finetune_examples)
    if setup is None:
        return {"skipped": "MINIELECTRA_DATA_DIR with glue/SST-2 is not set"}
    log("sst2: eager fp32 and bf16 ...")
    steps = {p: first_step(lambda: finetune_step(*setup, compiled=False, precision=p))[0]
             for p in ("fp32", "bf16")}
    r = interleaved(steps, rounds=args.rounds, seconds=args.chunk_seconds)
    return {"task": "sst2", "train_examples": len(setup[3].train), "batch": setup[1].batch_size,
            **{k: spread(v) for k, v in r.items()},
            "bf16_vs_fp32_eager": paired(r["bf16"], r["fp32"])}


def product_rates(n: int) -> dict:
    """GFLOP/s of an ``n^3`` product: fp32 through oneDNN (our dense layers' route), bf16
    through ``torch.mm`` (oneDNN's bf16 kernel); the median of 7 after 3."""
    out = {}
    for p, (dtype, mm) in {"fp32": (torch.float32, cpu_layers.cpu_matmul),
                           "bf16": (torch.bfloat16, torch.mm)}.items():
        a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
        for _ in range(3):
            mm(a, b)
        times = []
        for _ in range(7):
            begin = time.perf_counter()
            mm(a, b)
            times.append(time.perf_counter() - begin)
        out[p] = round(2 * n ** 3 / statistics.median(times) / 1e9, 1)
    return out


def main_job(precision: str, work: Path) -> dict:
    """``minielectra pretrain --preset nano`` as a user runs it, AUC every 100 steps."""
    out = work / precision
    cmd = [sys.executable, "-m", "minielectra", "pretrain", "--preset", "nano", "--precision",
           precision, "--out", str(out), "--set", "train.eval_every=100"]
    log(" ".join(cmd[2:]))
    begin = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - begin
    if proc.returncode:
        raise RuntimeError(proc.stderr[-2000:])
    evals = [r for r in map(json.loads, open(out / "metrics.jsonl")) if r["kind"] == "eval"]
    hit = next((r for r in evals if r["disc_auc"] >= TARGET_AUC), None)
    return {"command": " ".join(["minielectra", *cmd[3:]]), "wall_s": round(wall, 1),
            "final_step": evals[-1]["step"], "final_auc": round(evals[-1]["disc_auc"], 4),
            "first_step_at_target": hit and hit["step"],
            "seconds_to_target": hit and round(hit["elapsed_s"], 1),
            "compile_line": next((line for line in proc.stderr.splitlines()
                                  if "torch.compile" in line), None),
            "auc_by_step": {r["step"]: round(r["disc_auc"], 4) for r in evals}}


def rule(pre: dict) -> dict:
    """What ``decide_precision`` uses: the smaller eager and compiled gains over the presets."""
    return {"bf16_vs_fp32_eager": min(p["bf16_vs_fp32_eager"]["median"] for p in pre.values()),
            "bf16_vs_fp32_compiled": min(p["bf16_vs_fp32_compiled"]["median"]
                                         for p in pre.values())}


def parse(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="the JSON (default: print only)")
    ap.add_argument("--presets", nargs="+", default=["nano", "mini"])
    ap.add_argument("--rounds", type=int, default=12, help="interleaved rounds per comparison")
    ap.add_argument("--chunk-seconds", type=float, default=0.6, help="each side's time a round")
    ap.add_argument("--finetune-examples", type=int, default=2000)
    ap.add_argument("--no-main-job", action="store_true", help="skip the time-to-AUC runs")
    ap.add_argument("--peak-n", type=int, default=2048)
    ap.add_argument("--wait", type=float, default=0, help="minutes to wait for an idle machine")
    ap.add_argument("--force", action="store_true", help=f"run above load {MAX_LOAD} (marked)")
    return ap.parse_args(argv)


def idle_load(wait_minutes: float) -> list[float]:
    deadline = time.time() + 60 * wait_minutes
    while os.getloadavg()[0] > MAX_LOAD and time.time() < deadline:
        time.sleep(10)
    return [round(x, 2) for x in os.getloadavg()]


def main(argv=None) -> int:
    args = parse(argv)
    missing = cpu_bf16_missing()
    if missing:
        print(f"bench_bf16: {missing}", file=sys.stderr)
        return 2
    load = idle_load(args.wait)
    if load[0] > MAX_LOAD and not args.force:
        print(f"bench_bf16: load average {load[0]} > {MAX_LOAD}: the machine is busy; wait, or "
              "--force (recorded)", file=sys.stderr)
        return 2
    begin = time.perf_counter()
    result = {"benchmark": "bf16 autocast vs fp32 on a CPU (benchmarks/bench_bf16.py)",
              "command": "python benchmarks/bench_bf16.py " + " ".join(
                  sys.argv[1:] if argv is None else argv),
              "machine": {**machine(load), "cpu": cpu_name()},
              "forced_above_load": load[0] > MAX_LOAD}
    first = product_rates(args.peak_n)
    pre = {name: bench_pretrain(name, args, first) for name in args.presets}
    fine = bench_finetune(args)
    last = product_rates(args.peak_n)
    result.update(product_gflops={k: max(first[k], last[k]) for k in first},
                  product_measured={"before": first, "after": last}, pretrain=pre,
                  finetune=fine, rule=rule(pre))
    if not args.no_main_job:
        with tempfile.TemporaryDirectory(prefix="bench_bf16_runs_") as work:
            result["main_job"] = {p: main_job(p, Path(work)) for p in ("fp32", "bf16")}
    return finish(result, args.out, begin)


if __name__ == "__main__":
    sys.exit(main())
