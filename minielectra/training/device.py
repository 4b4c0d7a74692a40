"""Device and precision: where a run computes and in which number format.

fp32 on CPU; on a GPU bf16 autocast, or fp16 with a gradient scaler. Losses and the generator's
sampling stay float32 (``model.electra.gumbel_max_sample``), as in the official code, which
trains in fp32 throughout (``ELECTRA_REFERENCE.md`` section 1); mixed precision is our addition.
"""

from __future__ import annotations

import contextlib

import torch

from ..config import TrainConfig


def resolve_device(t: TrainConfig) -> torch.device:
    """``auto`` -> cuda when available; refuse a device or precision this machine lacks."""
    if t.device not in ("auto", "cpu", "cuda") and not t.device.startswith("cuda:"):
        raise ValueError(f"train.device must be auto|cpu|cuda, got {t.device!r}")
    name = ("cuda" if torch.cuda.is_available() else "cpu") if t.device == "auto" else t.device
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("train.device=cuda requested but no CUDA GPU is available "
                           "(use --device cpu)")
    if t.precision != "fp32" and device.type != "cuda":
        raise RuntimeError(f"precision {t.precision} needs a CUDA GPU; on {device.type} "
                           "minielectra trains in fp32 (--precision fp32)")
    if t.precision == "bf16" and not torch.cuda.is_bf16_supported():
        raise RuntimeError("precision bf16 requested but this GPU has no bfloat16 support "
                           "(use --precision fp16 or fp32)")
    return device


def autocast(device: torch.device, precision: str):
    """Mixed-precision context: matmuls in bf16/fp16, losses and sampling stay float32."""
    if precision == "fp32":
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device.type, dtype=dtype)
