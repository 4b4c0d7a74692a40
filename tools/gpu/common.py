"""What every stage of ``gpu_check.py`` shares: the context it runs in and a few helpers.

A stage is a function ``run(ctx) -> dict``: it returns raw figures (JSON-able) and the checks it
made, as ``checks: {name: {"ok": bool, ...}}``; it raises when it cannot run at all. ``ctx.dry``
is the CPU dry run: the same code path at toy shapes, so CI keeps the kit working while no GPU
is lent.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]

# The dry run's shape of ELECTRA-Small: every code path of the real one, seconds on a CPU.
TOY_SMALL = ["model.num_layers=1", "model.hidden_size=64", "model.num_heads=2",
             "model.intermediate_size=128", "model.embedding_size=32", "data.max_seq_len=32"]


@dataclass
class Context:
    """Where the stages run: device, dry run or not, folders, and the figures of earlier stages."""

    dry: bool
    device: torch.device
    work: Path  # runs, caches, converted lessons (an ignored folder of the repository)
    data_dir: Path | None  # MINIELECTRA_DATA_DIR for the subprocesses
    earlier: dict = field(default_factory=dict)  # results of stages already done, by number
    minutes: dict = field(default_factory=dict)  # per-stage time overrides (--pretrain-minutes)

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def bf16(self) -> str:
        """The mixed precision the stages check: bf16 on the GPU, and in the dry run on a CPU that
        has native bfloat16 (the same autocast code path); fp32 on any other CPU."""
        from minielectra.training.device import cpu_bf16_missing
        return "bf16" if self.cuda or cpu_bf16_missing() is None else "fp32"

    def env(self, **extra: str) -> dict[str, str]:
        """The environment of a subprocess: this repository's code, the packed data, a cache
        inside the work folder, unbuffered output (a killed call still shows its last lines)."""
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [str(REPO)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]),
            MINIELECTRA_CACHE=str(self.work / "cache"), PYTHONUNBUFFERED="1")
        if self.data_dir is not None:
            env["MINIELECTRA_DATA_DIR"] = str(self.data_dir)
        if not self.cuda:
            env["CUDA_VISIBLE_DEVICES"] = ""  # the dry run stays on the CPU
        env.update(extra)
        return env


def sh(ctx: Context, args: list[str], *, timeout: float, **env: str) -> dict:
    """Run a command; return its exit code, seconds and the tail of its output (also echoed)."""
    print("$", " ".join(args), flush=True)
    begin = time.perf_counter()
    try:
        proc = subprocess.run(args, cwd=REPO, env=ctx.env(**env), timeout=timeout,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        code, out = proc.returncode, proc.stdout
    except subprocess.TimeoutExpired as e:
        code, out = "timeout", (e.stdout or b"").decode() if isinstance(e.stdout, bytes) \
            else (e.stdout or "")
    tail = out[-3000:]
    print(tail, flush=True)
    return {"command": " ".join(args), "exit": code,
            "seconds": round(time.perf_counter() - begin, 1), "output_tail": tail}


def cli(*args: str) -> list[str]:
    """``minielectra ARGS`` through this interpreter (the console script may not be installed)."""
    return [sys.executable, "-m", "minielectra", *args]


def check(ok: bool, **figures) -> dict:
    return {"ok": bool(ok), **figures}


def versions() -> dict:
    out = {"python": sys.version.split()[0], "torch": torch.__version__,
           "cuda": torch.version.cuda}
    for name in ("transformers", "tokenizers", "safetensors", "einops", "numpy", "plotly"):
        try:
            out[name] = __import__(name).__version__
        except ImportError:
            out[name] = None
    return out


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def small_run(ctx: Context, *overrides: str):
    """The ``small`` preset as ``pretrain`` runs it on this device (toy-sized in a dry run)."""
    from minielectra.config import apply_overrides, preset
    run = apply_overrides(preset("small"), [*(TOY_SMALL if ctx.dry else []), "train.grad_accum=1",
                                            f"train.device={ctx.device.type}", *overrides])
    return run


def batches(run, device: torch.device, *, batch: int, vary_padding: bool, seed: int = 0):
    """Endless random batches of the run's shape; with ``vary_padding`` every batch pads its rows
    to new lengths (a new attention mask each step, the same tensor shapes)."""
    cfg, n = run.model, run.data.max_seq_len
    g = torch.Generator().manual_seed(seed)
    while True:
        ids = torch.randint(1000 if cfg.vocab_size > 2000 else 5, cfg.vocab_size, (batch, n),
                            generator=g)
        lengths = (torch.randint(n // 2, n + 1, (batch,), generator=g) if vary_padding
                   else torch.full((batch,), n))
        am = (torch.arange(n)[None, :] < lengths[:, None]).long()
        ids[:, 0] = cfg.cls_token_id
        ids[torch.arange(batch), lengths - 1] = cfg.sep_token_id
        ids = ids * am  # padding id 0
        yield {k: v.to(device) for k, v in (("input_ids", ids), ("attention_mask", am),
                                             ("token_type_ids", torch.zeros_like(ids)))}
