"""Device and precision: where a run computes and in which number format.

fp32 on CPU; on a GPU bf16 autocast, or fp16 with a gradient scaler. Losses and the generator's
sampling stay float32 (``model.electra.gumbel_max_sample``), as in the official code, which
trains in fp32 throughout (``tutorial/appendix_official_recipe.md`` section A.1); mixed precision
is our addition.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

from ..config import TrainConfig


def device_named(name: str) -> torch.device:
    """``auto`` -> cuda when available, else cpu; any other name as torch reads it."""
    return torch.device(("cuda" if torch.cuda.is_available() else "cpu") if name == "auto"
                        else name)


def resolve_device(t: TrainConfig) -> torch.device:
    """:func:`device_named`, refusing a device or precision this machine lacks (the value itself
    is checked by ``TrainConfig.validate``)."""
    device = device_named(t.device)
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


@dataclass(frozen=True)
class DeviceChoice:
    """Where a lesson (or any short run) computes: the device, its number format, and one line
    saying so. ``overrides`` are the ``--set`` strings that put a :class:`RunConfig` there."""

    device: torch.device
    precision: str  # fp32 | bf16 | fp16 (fp16 trains with a gradient scaler)
    summary: str

    @property
    def overrides(self) -> list[str]:
        return [f"train.device={self.device.type}", f"train.precision={self.precision}"]


def choose_device(prefer: str = "auto") -> DeviceChoice:
    """CUDA when present (bf16 where the GPU supports it, else fp16 with the scaler), else the
    CPU in fp32. ``prefer="cpu"`` forces the CPU: the course's committed outputs are the CPU's."""
    if prefer not in ("auto", "cpu", "cuda"):
        raise ValueError(f"prefer must be auto|cpu|cuda, got {prefer!r}")
    if prefer == "cpu" or not torch.cuda.is_available():
        if prefer == "cuda":
            raise RuntimeError("prefer='cuda' but no CUDA GPU is available")
        return DeviceChoice(torch.device("cpu"), "fp32",
                            f"CPU, fp32, {torch.get_num_threads()} threads")
    precision = "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    name = torch.cuda.get_device_name(0)
    return DeviceChoice(torch.device("cuda"), precision, f"GPU ({name}), {precision} autocast")
