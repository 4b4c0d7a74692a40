"""Stage 1: the machine, its measured peak, and whether bf16 and the fused optimiser are right.

- **environment**: GPU, driver, memory, versions;
- **peak**: a large bf16 matmul (8192^3 on a GPU; fp32 at 256^3 in the dry run): the
  denominator of every MFU in the later stages;
- **bf16 parity**: the ``small`` model trained 20 steps from one state in fp32 and in bf16
  autocast, same batches, same per-step seeds, lr 5e-4 from the first step (no warm-up, so the
  weights move), dropout off (its draws would differ by dtype): the loss curves and the first
  step's gradients must agree within the tolerances below;
- **fused AdamW**: the GPU's optimiser (torch's fused AdamW, rescaled to the official update)
  against the library's readable ``AdamWeightDecay``, 20 steps on the same random gradients.
"""

from __future__ import annotations

import copy
import itertools
import os
import platform
import subprocess

import torch

from peak import matmul_peak  # benchmarks/peak.py (gpu_check.py puts benchmarks/ on the path)

from .common import Context, batches, check, small_run, versions

STEPS = 20
LOSS_RTOL_MEAN, LOSS_RTOL_MAX = 0.02, 0.05  # bf16 vs fp32, relative, over the 20 steps
GRAD_COSINE_MIN = 0.99  # the first step's full gradient, bf16 vs fp32
ADAM_RTOL = 1e-3  # |fused - ours| / |ours - start|, largest over every weight


def environment(ctx: Context) -> dict:
    env = {"versions": versions(), "platform": platform.platform(), "cpus": os.cpu_count(),
           "torch_threads": torch.get_num_threads()}
    if ctx.cuda:
        p = torch.cuda.get_device_properties(0)
        env.update(gpu=p.name, capability=f"{p.major}.{p.minor}",
                   multiprocessors=p.multi_processor_count, bf16=torch.cuda.is_bf16_supported(),
                   memory_gib=round(p.total_memory / 2 ** 30, 1))
        try:
            env["nvidia_smi"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm",
                 "--format=csv,noheader"], capture_output=True, text=True,
                timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError) as e:
            env["nvidia_smi"] = f"not run: {e}"
    return env


def peak(ctx: Context) -> dict:
    if ctx.cuda:
        return matmul_peak(ctx.device, torch.bfloat16, n=8192, repeats=10)
    dtype = torch.bfloat16 if ctx.bf16 == "bf16" else torch.float32
    return matmul_peak(ctx.device, dtype, n=256, repeats=3)


def train_curve(base, run, data, precision: str) -> tuple[list[float], torch.Tensor]:
    """Losses of ``len(data)`` steps from ``base``'s state, and the first step's gradient."""
    from minielectra.training.optim import build_optimizer, lr_at, set_lr
    from minielectra.training.ranks import seed_slice
    from minielectra.training.step import train_step
    model, t = copy.deepcopy(base).train(), copy.deepcopy(run.train)
    t.precision = precision
    device = next(model.parameters()).device
    opt = build_optimizer(model, t, device)
    losses, first_grad = [], None
    for i, batch in enumerate(data):
        set_lr(opt, lr_at(i, t), t, i)
        stats = train_step(model, iter([batch]), opt, None, t=t, device=device, sampler=None,
                           reseed=lambda micro, i=i: seed_slice(t.seed, i))
        if first_grad is None:  # clipped in place, like both sides: compare directions
            first_grad = torch.cat([p.grad.flatten().float() for p in model.parameters()
                                    if p.grad is not None])
        losses.append(stats["loss"])
    return [float(x) for x in losses], first_grad


def parity(ctx: Context) -> dict:
    from minielectra.model.electra import Electra
    run = small_run(ctx, "train.warmup_steps=0", "model.dropout=0.0",
                    "model.attention_dropout=0.0")
    steps = 4 if ctx.dry else STEPS
    torch.manual_seed(0)
    base = Electra(run.model, run.objective).to(ctx.device)
    data = list(itertools.islice(batches(run, ctx.device, batch=4 if ctx.dry else 128,
                                         vary_padding=True), steps))
    fp32, g32 = train_curve(base, run, data, "fp32")
    bf16, g16 = train_curve(base, run, data, ctx.bf16)
    rel = [abs(a - b) / abs(a) for a, b in zip(fp32, bf16)]
    cosine = float(torch.nn.functional.cosine_similarity(g32, g16, dim=0))
    return {"steps": steps, "loss_fp32": fp32, "loss_bf16": bf16,
            "loss_rel_diff_mean": sum(rel) / len(rel), "loss_rel_diff_max": max(rel),
            "first_grad_cosine": cosine,
            "first_grad_norm_ratio": float(g16.norm() / g32.norm()),
            "tolerances": {"loss_rel_mean": LOSS_RTOL_MEAN, "loss_rel_max": LOSS_RTOL_MAX,
                           "grad_cosine_min": GRAD_COSINE_MIN}}


def adamw(ctx: Context) -> dict:
    from minielectra.model.electra import Electra
    from minielectra.training.optim import build_optimizer, lr_at, set_lr
    run = small_run(ctx, "train.warmup_steps=0")
    t = run.train
    torch.manual_seed(0)
    start = Electra(run.model, run.objective).to(ctx.device)
    ours, fused = copy.deepcopy(start), copy.deepcopy(start)
    opts = {"ours": (ours, build_optimizer(ours, t, torch.device("cpu"))),  # AdamWeightDecay
            "fused": (fused, build_optimizer(fused, t, torch.device("cuda")))}  # fused AdamW
    g = torch.Generator(ctx.device).manual_seed(0)
    for i in range(4 if ctx.dry else STEPS):
        grads = [torch.randn(p.shape, device=ctx.device, generator=g) * 1e-2
                 for p in start.parameters()]
        for model, opt in opts.values():
            for p, grad in zip(model.parameters(), grads):
                p.grad = grad.clone()
            set_lr(opt, lr_at(i, t), t, i)
            opt.step()
    with torch.no_grad():
        moved = max(float((a - s).abs().max())
                    for a, s in zip(ours.parameters(), start.parameters()))
        diff = max(float((a - b).abs().max())
                   for a, b in zip(ours.parameters(), fused.parameters()))
    return {"steps": i + 1, "fused_class": type(opts["fused"][1]).__name__,
            "fused": bool(opts["fused"][1].defaults.get("fused")),
            "largest_update": moved, "largest_difference": diff, "relative": diff / moved,
            "tolerance": ADAM_RTOL}


def run(ctx: Context) -> dict:
    out = {"environment": environment(ctx), "peak": peak(ctx), "parity": parity(ctx),
           "adamw": adamw(ctx)}
    p, a = out["parity"], out["adamw"]
    out["checks"] = {
        "bf16_loss_parity": check(p["loss_rel_diff_mean"] <= LOSS_RTOL_MEAN
                                  and p["loss_rel_diff_max"] <= LOSS_RTOL_MAX,
                                  mean=p["loss_rel_diff_mean"], max=p["loss_rel_diff_max"]),
        "bf16_grad_parity": check(p["first_grad_cosine"] >= GRAD_COSINE_MIN,
                                  cosine=p["first_grad_cosine"]),
        "fused_adamw_matches": check(a["relative"] <= ADAM_RTOL, relative=a["relative"]),
    }
    return out
