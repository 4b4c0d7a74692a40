"""ELECTRA-Small training speed, minielectra vs transformers' modules, with FLOPs and MFU.

The ``small`` preset (the paper's ELECTRA-Small, batch 128 x 128) trained as ``minielectra
pretrain`` trains it: :func:`minielectra.training.step.train_step`, the official optimiser (fused
AdamW on a GPU), bf16 autocast and ``torch.compile`` (one graph: masking and sampling draw from
the global RNG, reseeded per step as the loop does). The reference is the same objective on
transformers' ElectraForMaskedLM + ElectraForPreTraining (``bench_throughput.HFElectra``:
vocabulary logits at every position, embeddings tied), through the same step. Both run in one
process, alternately, on the same batch; figures are medians over rounds, with the spread.

    python benchmarks/bench_small.py                                  # a GPU: the real shape
    python benchmarks/bench_small.py --device cpu --batch 8 --steps 2 --rounds 3

FLOPs per step are our count (``minielectra.objectives.flops``: matmuls, backward = 2x
forward, the generator's vocabulary projection at the masked slots only), the same number for
both sides: the work the objective needs. MFU = achieved FLOP/s / the device's dense bf16 peak
(``PEAKS``, or ``--peak-tflops``); with no known peak (CPUs) only FLOP/s is reported. Data
loading is left out (a fixed batch on the device); ``minielectra pretrain`` overlaps it.
Prints one JSON object; ``readme_rows`` are the README table's lines.
"""

from __future__ import annotations

import minielectra  # noqa: F401  (first: its import sets OMP_WAIT_POLICY before torch loads)

import argparse
import itertools
import json
import platform
import statistics
import sys
import time

import torch

from bench_throughput import HFElectra
from minielectra.config import apply_overrides, preset
from minielectra.model.electra import Electra
from minielectra.objectives.flops import train_flops_per_step
from minielectra.training.optim import build_optimizer, lr_at, set_lr
from minielectra.training.ranks import seed_slice
from minielectra.training.step import train_step

# Dense bf16 tensor-core peaks (TFLOP/s, without sparsity), from the vendors' data sheets.
PEAKS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0, "A10G": 70.0, "L4": 121.0,
         "RTX 4090": 165.0, "RTX 3090": 71.0}
TARGET_STEPS_PER_S = 150.0  # 1M steps in under two hours on an H100


def make_step(model, t, device, *, mode: str = "default"):
    """``train_step`` as the loop calls it: schedule, per-step reseed, optimiser, compile.

    ``mode="reduce-overhead"`` records the compiled forward and backward as CUDA graphs: one
    launch replays the step's ~1000 kernels. Their outputs live in memory the next replay
    reuses, so each step first marks a new one (the loop keeps only values derived from them).
    """
    optimizer = build_optimizer(model, t, device)
    net = torch.compile(model, mode=mode) if t.compile else model
    counter = itertools.count()
    graphs = t.compile and mode == "reduce-overhead"

    def step(batches):
        i = next(counter)
        set_lr(optimizer, lr_at(i, t), t, i)
        if graphs:
            torch.compiler.cudagraph_mark_step_begin()
        return train_step(net, batches, optimizer, None, t=t, device=device, sampler=None,
                          reseed=lambda micro: seed_slice(t.seed, i))
    return step


def timed(step, batches, steps: int) -> float:
    float(step(batches)["loss"])  # the queue is empty when the clock starts
    start = time.perf_counter()
    for _ in range(steps):
        stats = step(batches)
    float(stats["loss"])  # wait for the last step
    return steps / (time.perf_counter() - start)


def peak_tflops(device: torch.device, given: float | None) -> float | None:
    if given:
        return given
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name()
    return next((v for k, v in PEAKS.items() if k in name), None)


def summary(name: str, rates: list[float], flops: int, peak: float | None, batch: int) -> dict:
    med = statistics.median(rates)
    return {"steps_per_s": round(med, 3), "spread": [round(min(rates), 3), round(max(rates), 3)],
            "sequences_per_s": round(med * batch, 1),
            "achieved_tflops": round(med * flops / 1e12, 3),
            "mfu": round(med * flops / (peak * 1e12), 4) if peak else None,
            "hours_per_1m_steps": round(1e6 / med / 3600, 1)}


def readme_rows(r: dict) -> list[str]:
    shape = f"batch {r['batch'][0]} x {r['batch'][1]}, {r['precision']}" + (
        " + compile" if r["compile"] else "")
    rows = []
    for side in [s for s in ("minielectra", "transformers") if s in r]:
        s = r[side]
        mfu = f"{100 * s['mfu']:.1f}% MFU" if s["mfu"] is not None else (
            f"{s['achieved_tflops']:.2f} TFLOP/s (no peak stated)")
        rows.append(f"| `small` steps/s, {side} ({shape}) | {r['device_name']} | "
                    f"{s['steps_per_s']:.2f} steps/s ({s['spread'][0]:.2f}-{s['spread'][1]:.2f}) "
                    f"| {mfu} | `python benchmarks/bench_small.py {r['command']}` |")
    return rows


def parse(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    ap.add_argument("--batch", type=int, default=128, help="the paper's 128; shrink on a CPU")
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--precision", default="bf16", choices=["fp32", "bf16"])
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--mode", default="default", choices=["default", "reduce-overhead"],
                    help="torch.compile's mode (reduce-overhead: CUDA graphs)")
    ap.add_argument("--only-minielectra", action="store_true",
                    help="leave out transformers' modules (the variants of one side)")
    ap.add_argument("--steps", type=int, default=20, help="steps per timed round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--peak-tflops", type=float, help="the device's peak, for MFU (a measured "
                    "one: tools/gpu_check.py measures it in stage 1)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a config override (the dry run shrinks the model with these)")
    return ap.parse_args(argv)


def measure(args: argparse.Namespace, command: str) -> dict:
    """Both sides' steps/s, FLOP/s, MFU and peak memory at ``args``' shape: the JSON printed."""
    run = preset("small")
    cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    device = torch.device("cuda" if cuda else "cpu")
    # train.precision/device are set directly: resolve_device refuses bf16 on a CPU for
    # training runs, but CPU autocast in bf16 is what this benchmark measures there.
    apply_overrides(run, [f"train.batch_size={args.batch}", f"data.max_seq_len={args.seq_len}",
                          f"train.compile={not args.no_compile}", "train.grad_accum=1",
                          *args.set])
    run.train.precision = args.precision
    cfg, obj, t = run.model, run.objective, run.train
    torch.manual_seed(0)
    ids = torch.randint(1000 if cfg.vocab_size > 2000 else 5, cfg.vocab_size,
                        (args.batch, args.seq_len), device=device)
    ids[:, 0], ids[:, -1] = cfg.cls_token_id, cfg.sep_token_id
    batches = itertools.repeat({"input_ids": ids, "attention_mask": torch.ones_like(ids),
                                "token_type_ids": torch.zeros_like(ids)})
    models = {"minielectra": Electra(cfg, obj)}
    if not args.only_minielectra:
        models["transformers"] = HFElectra(cfg, obj)
    steps = {k: make_step(m.to(device).train(), t, device, mode=args.mode)
             for k, m in models.items()}
    compile_s, memory = {}, {}
    for name, step in steps.items():  # warm-up, and compilation
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        begin = time.perf_counter()
        timed(step, batches, 2)
        compile_s[name] = round(time.perf_counter() - begin, 1)
        memory[name] = (round(torch.cuda.max_memory_allocated() / 2 ** 30, 2) if cuda
                        else None)
    rates = {k: [] for k in steps}
    for _ in range(args.rounds):  # interleaved: machine noise hits both sides alike
        for name, step in steps.items():
            rates[name].append(timed(step, batches, args.steps))

    flops = train_flops_per_step(run)
    peak = peak_tflops(device, args.peak_tflops)
    result = {
        "benchmark": "ELECTRA-Small training steps/s, minielectra vs transformers, one process",
        "batch": [args.batch, args.seq_len], "precision": t.precision, "compile": t.compile,
        "compile_mode": args.mode if t.compile else None,
        "device": device.type, "command": command,
        "device_name": (torch.cuda.get_device_name() if cuda else
                        f"{platform.processor() or platform.machine()} CPU, "
                        f"{torch.get_num_threads()} threads"),
        "flops_per_step": flops, "peak_tflops": peak,
        "peak_note": ("dense bf16 tensor-core peak" if peak and not args.peak_tflops else
                      "given with --peak-tflops" if peak else
                      "no peak stated for this device: MFU not computed"),
        "warmup_s (incl. compile)": compile_s,
        "peak_memory_gib (warm-up steps)": memory,
        **{k: summary(k, v, flops, peak, args.batch) for k, v in rates.items()},
        "ratio": (round(statistics.median(rates["minielectra"])
                        / statistics.median(rates["transformers"]), 3)
                  if "transformers" in rates else None),
        "rounds": {k: [round(x, 3) for x in v] for k, v in rates.items()},
    }
    if cuda and args.batch == 128 and args.seq_len == 128:
        result["target_steps_per_s"] = {
            "target": TARGET_STEPS_PER_S,
            "met": result["minielectra"]["steps_per_s"] >= TARGET_STEPS_PER_S}
    result["readme_rows"] = readme_rows(result)
    return result


def main(argv=None) -> int:
    result = measure(parse(argv), " ".join(sys.argv[1:] if argv is None else argv))
    print(json.dumps(result, indent=2))
    print("\n".join(result["readme_rows"]), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
