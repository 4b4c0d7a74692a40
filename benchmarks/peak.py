"""The machine's own matrix-multiply rate: the denominator of every "fraction of peak".

A datasheet peak is a lead, not a ceiling: what counts is what a large matmul reaches on this
device, these threads and this precision, measured in the same process as the benchmark.
"""

from __future__ import annotations

import statistics
import time

import torch


def matmul_peak(device: torch.device, dtype: torch.dtype, *, n: int, repeats: int = 10,
                warmup: int = 3) -> dict:
    """FLOP/s of an ``n x n x n`` product on random data (never zeros: they run faster), the
    median of ``repeats`` timed products after ``warmup``; each timed alone, device idle at both
    ends (events on a GPU, the host clock on a CPU)."""
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    for _ in range(warmup):
        torch.mm(a, b)
    times = []
    for _ in range(repeats):
        times.append(_one(a, b, device))
    flops = 2 * n ** 3
    med = statistics.median(times)
    return {"n": n, "dtype": str(dtype).replace("torch.", ""), "repeats": repeats,
            "tflops": round(flops / med / 1e12, 4),
            "tflops_best": round(flops / min(times) / 1e12, 4),
            "threads": torch.get_num_threads() if device.type == "cpu" else None}


def _one(a: torch.Tensor, b: torch.Tensor, device: torch.device) -> float:
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        torch.mm(a, b)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3
    begin = time.perf_counter()
    torch.mm(a, b)
    return time.perf_counter() - begin
