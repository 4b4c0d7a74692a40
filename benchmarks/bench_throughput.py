"""Training steps per second: minielectra vs the same ELECTRA objective built from transformers.

The reference is what one writes with transformers' modules: ElectraForMaskedLM as the generator
(vocabulary logits at every position, then the masked ones picked out), ElectraForPreTraining as
the discriminator, embeddings tied by assignment, the same masking, Gumbel-max sampling, loss
weights and metrics. Both sides then go through the *same* training code,
:func:`minielectra.training.step.train_step` with the official optimiser (:func:`minielectra.training.optim.
build_optimizer`: AdamWeightDecay on CPU, fused AdamW on a GPU), the schedule, clipping,
precision (autocast, fp16 scaler) and ``torch.compile`` as ``minielectra pretrain`` uses them. So
the ratio measures the models, not two different loops.

On a busy machine the speed of either side swings by 10x from one second to the next, so the two
sides are interleaved finely: each round runs a short chunk of one side, then of the other (the
order flips every round), over many rounds. The chunks last the same time (about
``--chunk-seconds``: each side's number of steps is set from its warm-up speed), so both sides
sample the same stretches of load; the ratio is taken round by round (the paired ratio) and its
median reported with its spread (quartiles), beside each side's median, quartiles and range.

    python benchmarks/bench_throughput.py --preset nano            # CPU, 2 cores
    python benchmarks/bench_throughput.py --preset small --device cuda --precision bf16 --compile

The hardware's share: the same process measures the peak it is compared with, a large fp32
matmul (``--peak-n``) on the same threads, before and after the rounds (the higher of the two
medians is the peak: load only lowers it). Each side's FLOP/s is its steps/s times the paper's
FLOPs per step (``minielectra.objectives.flops``: the matmuls the objective needs, the same
number for both sides) and is reported as a fraction of that peak. ``torch.profiler`` then runs
a few steps of each side and gives the share of step time per operation (self CPU time).

Prints one JSON object on stdout: steps/s of each (median and spread), ``ratio`` = the median of
the per-round ratios minielectra / transformers, the peak and each side's fraction of it, the
profile, and ``readme_row``, the line for the README's benchmark table (also printed on stderr).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import statistics
import sys
import time
from types import SimpleNamespace

import minielectra  # noqa: F401  (first: its import sets OMP_WAIT_POLICY before torch loads)
import torch
import torch.nn.functional as F
from peak import matmul_peak

from minielectra.config import apply_overrides, preset
from minielectra.objectives.flops import train_flops_per_step
from minielectra.model.electra import (Electra, step_metrics, gumbel_max_sample, mask_tokens,
                                       replace_tokens)
from minielectra.training.device import resolve_device
from minielectra.training.optim import build_optimizer, lr_at, set_lr
from minielectra.training.step import train_step


class HFElectra(torch.nn.Module):
    """ElectraForMaskedLM + ElectraForPreTraining of minielectra's shapes, embeddings tied,
    with ``Electra.forward``'s signature and output, so that ``train_step`` can train it."""

    def __init__(self, cfg, obj):
        super().__init__()
        from transformers import ElectraConfig, ElectraForMaskedLM, ElectraForPreTraining

        def hf_config(m):
            return ElectraConfig(
                vocab_size=m.vocab_size, embedding_size=m.embedding_size,
                hidden_size=m.hidden_size, num_hidden_layers=m.num_layers,
                num_attention_heads=m.num_heads, intermediate_size=m.intermediate_size,
                max_position_embeddings=m.max_position_embeddings,
                hidden_dropout_prob=m.dropout, attention_probs_dropout_prob=m.attention_dropout,
                layer_norm_eps=m.layer_norm_eps, attn_implementation="sdpa")
        self.cfg, self.obj = cfg, obj
        self.config, self.objective = cfg, obj  # what train_step's objective dispatch reads
        self.generator = ElectraForMaskedLM(hf_config(cfg.generator()))
        self.discriminator = ElectraForPreTraining(hf_config(cfg))
        shared = self.discriminator.electra.embeddings  # word/position/segment + LayerNorm
        self.generator.electra.embeddings = shared
        self.generator.generator_lm_head.weight = shared.word_embeddings.weight

    def forward(self, ids, am, types, *, generator=None):
        """The ELECTRA loss written the straightforward way on top of transformers."""
        masked = mask_tokens(ids, am, self.cfg, self.obj, generator=generator)
        logits = self.generator(input_ids=masked.input_ids, attention_mask=am,
                                token_type_ids=types).logits  # (b, n, v): every position
        picked = logits.gather(1, masked.positions[..., None].expand(-1, -1, logits.shape[-1]))
        ce = F.cross_entropy(picked.float().transpose(1, 2), masked.targets, reduction="none")
        gen_loss = (ce * masked.weights).sum() / (masked.weights.sum() + 1e-6)
        sampled = gumbel_max_sample(picked, temperature=self.obj.temperature, generator=generator)
        corrupted, is_replaced = replace_tokens(ids, am, masked, sampled)
        disc_logits = self.discriminator(input_ids=corrupted, attention_mask=am,
                                         token_type_ids=types).logits  # (b, n)
        bce = F.binary_cross_entropy_with_logits(disc_logits.float(), is_replaced.float(),
                                                 reduction="none")
        disc_loss = (bce * am).sum() / (am.sum() + 1e-6)
        loss = self.obj.gen_weight * gen_loss + self.obj.disc_weight * disc_loss
        return SimpleNamespace(loss=loss, gen_loss=gen_loss, disc_loss=disc_loss,
                               metrics=step_metrics(picked, masked, disc_logits, is_replaced, am))


def make_step(model, t, device):
    """One ``train_step`` of ``model`` as ``pretrain`` runs it: schedule, optimiser, precision."""
    optimizer = build_optimizer(model, t, device)
    scaler = torch.amp.GradScaler("cuda") if t.precision == "fp16" else None
    net = torch.compile(model) if t.compile else model
    counter = itertools.count()

    def step(batches, sampler):
        i = next(counter)
        set_lr(optimizer, lr_at(i, t), t, i)
        return train_step(net, batches, optimizer, scaler, t=t, device=device, sampler=sampler)
    return step


def timed(step, batches, sampler, steps: int) -> float:
    """steps/s of ``steps`` consecutive steps; the device queue is empty at both ends."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        stats = step(batches, sampler)
    float(stats["loss"])  # wait for the last step
    return steps / (time.perf_counter() - start)


def interleaved(steps: dict, batches, sampler, *, chunk: dict, rounds: int) -> dict:
    """Each side's steps/s in every round: ``chunk[side]`` steps of one side, then of the other,
    the order flipped each round (A B, B A, ...) so that a trend in the load favours neither."""
    rates = {k: [] for k in steps}
    names = list(steps)
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            rates[name].append(timed(steps[name], batches, sampler, chunk[name]))
    return rates


def profile(step, batches, sampler, steps: int, top: int = 12) -> dict:
    """Share of step time per operation (self CPU time of ``steps`` steps), the largest first;
    ``matmul`` sums the matrix products, ``attention`` the fused attention kernels."""
    from torch.profiler import ProfilerActivity
    with torch.profiler.profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step(batches, sampler)
    events = [e for e in prof.key_averages() if e.self_cpu_time_total > 0]
    total = sum(e.self_cpu_time_total for e in events)
    share = {e.key: e.self_cpu_time_total / total for e in events}
    groups = {"matmul": ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm",
                         "mkldnn::_linear_pointwise"),  # minielectra's dense layers (model/cpu.py)
              "attention": ("scaled_dot_product",)}
    out = {g: round(sum(v for k, v in share.items() if any(x in k for x in keys)), 3)
           for g, keys in groups.items()}
    out["ops"] = {k: round(v, 3) for k, v in sorted(share.items(), key=lambda kv: -kv[1])[:top]}
    out["ms_per_step"] = round(total / 1e3 / steps, 2)
    return out


def spread(values: list[float]) -> dict:
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return {"median": round(median, 3), "q1": round(q1, 3), "q3": round(q3, 3),
            "min": round(min(values), 3), "max": round(max(values), 3)}


def readme_row(r: dict) -> str:
    b, n = r["batch"]
    what = (f"pre-training steps/s, `{r['preset']}` (batch {b} x {n}, {r['precision']}"
            f"{' + compile' if r['compile'] else ''}): `python benchmarks/bench_throughput.py "
            f"{r['command']}`")
    machine = (r["device_name"] if r["device"] != "cpu"
               else f"{r['cpus']}-core {r['device_name']} CPU, torch threads: {r['threads']}")
    m, h, q = r["minielectra"], r["transformers"], r["ratio_spread"]
    f = r["fraction_of_peak"]
    load = r["load_average"][0] if r["load_average"] else None
    return (f"| {what} | {machine}, load average {load:.1f}, measured fp32 matmul peak "
            f"{r['peak']['gflops']:.0f} GFLOP/s | {m['median']:.1f} steps/s (quartiles "
            f"{m['q1']:.1f}-{m['q3']:.1f}), {100 * f['minielectra']:.0f}% of the peak | "
            f"transformers ElectraForMaskedLM + ElectraForPreTraining, same objective, optimiser "
            f"and loop: {h['median']:.1f} steps/s ({h['q1']:.1f}-{h['q3']:.1f}), "
            f"{100 * f['transformers']:.0f}% | **{r['ratio']:.2f}x** (paired, quartiles "
            f"{q['q1']:.2f}-{q['q3']:.2f}, {r['rounds']} interleaved rounds) |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="nano")
    ap.add_argument("--batch-size", type=int)
    ap.add_argument("--seq-len", type=int)
    ap.add_argument("--device", default="cpu", choices=["auto", "cpu", "cuda"])
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16"])
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--chunk-seconds", type=float, default=0.5,
                    help="how long each side runs per round (its steps set from its warm-up)")
    ap.add_argument("--steps", type=int, help="a fixed number of steps per side and round "
                    "instead of --chunk-seconds")
    ap.add_argument("--rounds", type=int, default=40, help="rounds (each runs both sides)")
    ap.add_argument("--peak-n", type=int, default=2048, help="size of the fp32 matmul whose "
                    "rate is the peak (n x n x n)")
    ap.add_argument("--profile-steps", type=int, default=5, help="steps per side under "
                    "torch.profiler (0: no profile)")
    ap.add_argument("--threads", type=int, help="torch threads (default: torch's, i.e. "
                    "OMP_NUM_THREADS or the cores)")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    run = preset(args.preset)
    apply_overrides(run, [f"train.device={args.device}", f"train.precision={args.precision}",
                          f"train.compile={args.compile}", "train.grad_accum=1"])
    cfg, obj, t = run.model, run.objective, run.train
    cfg.cls_token_id, cfg.sep_token_id, cfg.mask_token_id = 2, 3, 4
    b = args.batch_size or t.batch_size
    n = args.seq_len or run.data.max_seq_len
    device = resolve_device(t)  # refuses a precision this machine cannot run
    torch.manual_seed(0)
    ids = torch.randint(5, cfg.vocab_size, (b, n), device=device)
    ids[:, 0], ids[:, -1] = 2, 3
    batches = itertools.repeat({"input_ids": ids, "attention_mask": torch.ones_like(ids),
                                "token_type_ids": torch.zeros_like(ids)})

    models = {"minielectra": Electra(cfg, obj), "transformers": HFElectra(cfg, obj)}
    steps = {k: make_step(m.to(device).train(), t, device) for k, m in models.items()}
    sampler = torch.Generator(device).manual_seed(0)
    warm = {k: max(timed(s, batches, sampler, 3) for _ in range(2))  # warm-up (and compiling)
            for k, s in steps.items()}
    chunk = {k: args.steps or max(1, round(args.chunk_seconds * r)) for k, r in warm.items()}
    peaks = [matmul_peak(device, torch.float32, n=args.peak_n, repeats=5)]
    rates = interleaved(steps, batches, sampler, chunk=chunk, rounds=args.rounds)
    peaks.append(matmul_peak(device, torch.float32, n=args.peak_n, repeats=5))
    peak = max(p["tflops"] for p in peaks) * 1e12
    run.train.batch_size, run.data.max_seq_len = b, n
    flops = train_flops_per_step(run)
    paired = [a / b for a, b in zip(rates["minielectra"], rates["transformers"])]
    command = " ".join(sys.argv[1:] if argv is None else argv) or "--preset nano"
    result = {
        "benchmark": "training steps/s, ELECTRA objective, minielectra.training.step.train_step",
        "preset": args.preset, "batch": [b, n], "device": device.type, "command": command,
        "device_name": (torch.cuda.get_device_name() if device.type == "cuda"
                        else platform.processor() or platform.machine()),
        "cpus": os.cpu_count(), "threads": torch.get_num_threads(),
        "precision": t.precision, "compile": t.compile,
        "optimizer": ("AdamWeightDecay" if device.type != "cuda"
                      else "fused AdamW, rescaled to the official update"),
        "rounds": args.rounds, "chunk_steps": chunk,
        "minielectra": spread(rates["minielectra"]),
        "transformers": spread(rates["transformers"]),
        "ratio": round(statistics.median(paired), 3), "ratio_spread": spread(paired),
        "ratio_of_medians": round(statistics.median(rates["minielectra"])
                                  / statistics.median(rates["transformers"]), 3),
        "flops_per_step": flops,
        "peak": {"gflops": round(peak / 1e9, 1), "measured": peaks,
                 "what": f"fp32 {args.peak_n}^3 matmul, same process and threads, before and "
                         "after the rounds; the higher median"},
        "fraction_of_peak": {k: round(statistics.median(v) * flops / peak, 3)
                             for k, v in rates.items()},
        "achieved_gflops": {k: round(statistics.median(v) * flops / 1e9, 1)
                            for k, v in rates.items()},
        "profile": ({k: profile(s, batches, sampler, args.profile_steps)
                     for k, s in steps.items()} if args.profile_steps else None),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "per_round": {k: [round(x, 3) for x in v] for k, v in rates.items()},
    }
    for prof in (result["profile"] or {}).values():
        # The matrix products' own rate: the step's FLOPs (all matmul) over their share of
        # the (profiled) step time. Near 1: the rest of the step is what keeps the fraction low.
        seconds = prof["matmul"] * prof["ms_per_step"] / 1e3
        prof["matmul_fraction_of_peak"] = round(flops / seconds / peak, 3) if seconds else None
    result["readme_row"] = readme_row(result)
    print(json.dumps(result, indent=2))
    print(result["readme_row"], file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
