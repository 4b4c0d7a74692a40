"""Device and precision: where a run computes and in which number format.

fp32 by default. bf16 autocast on a GPU with bfloat16, and on a CPU that multiplies bfloat16
natively (AVX512-BF16 or AMX on x86, the BF16 extension on Arm); fp16 with a gradient scaler on a
GPU only. Under autocast the matrix products run in the low precision; the losses, the
generator's Gumbel sampling (``model.electra.gumbel_max_sample``), the optimiser's state and the
master weights stay float32, so a checkpoint saved from a bf16 run holds float32 weights. The
official code trains in fp32 throughout (``tutorial/appendix_official_recipe.md`` section A.1);
mixed precision is our addition.
"""

from __future__ import annotations

import contextlib
import platform
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import torch

from ..config import FinetuneConfig, TrainConfig


@lru_cache(maxsize=1)
def cpu_bf16_missing() -> str | None:
    """None when this CPU multiplies bfloat16 natively, else a line saying why it does not.

    Without the instructions torch still computes in bf16, by converting every number to float32
    and back: slower than fp32, so minielectra refuses it rather than run a slow imitation.
    """
    probes = [getattr(torch.cpu, name, None) for name in
              ("_is_avx512_bf16_supported", "_is_amx_tile_supported")]
    if any(probe is not None and probe() for probe in probes):
        return None
    if _cpu_flags() & {"avx512_bf16", "amx_bf16", "bf16"}:  # Linux (x86 flags, Arm features)
        return None
    if platform.system() == "Darwin" and _sysctl("hw.optional.arm.FEAT_BF16") == "1":
        return None
    return (f"this CPU ({cpu_name()}) has no native bfloat16 (AVX512-BF16, AMX or Arm BF16); "
            "use --precision fp32")


def _cpu_flags() -> set[str]:
    path = Path("/proc/cpuinfo")
    if not path.exists():
        return set()
    return {flag for line in path.read_text(errors="replace").splitlines()
            if line.lower().startswith(("flags", "features")) for flag in line.split()[2:]}


def _sysctl(key: str) -> str:
    try:
        return subprocess.run(["sysctl", "-n", key], capture_output=True, text=True,
                              timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def cpu_name() -> str:
    """The processor's model name where the system says it, else the architecture."""
    path = Path("/proc/cpuinfo")
    if path.exists():
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def device_named(name: str) -> torch.device:
    """``auto`` -> cuda when available, else cpu; any other name as torch reads it."""
    return torch.device(("cuda" if torch.cuda.is_available() else "cpu") if name == "auto"
                        else name)


def check_precision(device: torch.device, precision: str) -> None:
    """Refuse, in one line, a number format this device cannot run (fp32 runs anywhere)."""
    if precision == "fp32":
        return
    if device.type == "cuda":
        if precision == "bf16" and not torch.cuda.is_bf16_supported():
            raise RuntimeError("precision bf16 requested but this GPU has no bfloat16 support "
                               "(use --precision fp16 or fp32)")
        return
    if precision == "fp16" or device.type != "cpu":
        raise RuntimeError(f"precision {precision} needs a CUDA GPU; on {device.type} "
                           "minielectra runs fp32, or bf16 on a CPU with native bfloat16")
    missing = cpu_bf16_missing()
    if missing:
        raise RuntimeError(f"precision bf16 on the CPU: {missing}")


def resolve_device(t: TrainConfig | FinetuneConfig) -> torch.device:
    """:func:`device_named`, refusing a device or precision this machine lacks (the value itself
    is checked by the section's ``validate``)."""
    device = device_named(t.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        section = "train" if isinstance(t, TrainConfig) else "finetune"
        raise RuntimeError(f"{section}.device={t.device} requested but no CUDA GPU is available "
                           "(use --device cpu)")
    check_precision(device, t.precision)
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
