"""Where a CPU training step's time goes: ``torch.profiler``'s self CPU time, grouped.

Groups: the matrix products (oneDNN through ``minielectra::cpu_matmul``, MKL's ``mm``/``addmm``/
``bmm``), fused attention (forward and backward), the kernels inductor generated (named
``cpp_fused_...`` when ``TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE=1`` is set before compiling),
copies and fills, the optimiser, and the rest. ``matmul_gflops`` is the step's FLOPs (all in
products) over the products' share of the time: near the matmul peak, the rest of the step is
what holds the fraction of peak down.
"""

from __future__ import annotations

GROUPS = {
    "matmul": ("mkldnn::_linear_pointwise", "aten::mm", "aten::addmm", "aten::bmm",
               "aten::baddbmm"),
    "attention": ("scaled_dot_product",),
    "fused_kernels": ("cpp_fused",),
    "copies_fills": ("aten::copy_", "aten::fill_", "aten::zero_", "aten::cat"),
    "optimiser": ("_foreach", "aten::lerp_", "aten::addcdiv_", "aten::addcmul_", "aten::sqrt",
                  "Optimizer."),
}


def group_of(name: str) -> str:
    for group, keys in GROUPS.items():
        if any(k in name for k in keys):
            return group
    return "other"


def profile_shares(step, steps: int, flops: int, *, top: int = 12) -> dict:
    """Share of ``steps`` calls of ``step``'s time per group and for the largest operations."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            out = step()
        float(out)
    events = [e for e in prof.key_averages() if e.self_cpu_time_total > 0]
    total = sum(e.self_cpu_time_total for e in events)
    groups: dict[str, float] = {}
    for e in events:
        g = group_of(e.key)
        groups[g] = groups.get(g, 0.0) + e.self_cpu_time_total / total
    ms = total / 1e3 / steps
    largest = sorted(events, key=lambda e: -e.self_cpu_time_total)[:top]
    matmul_s = groups.get("matmul", 0.0) * ms / 1e3
    return {"ms_per_step": round(ms, 2),
            "groups": {k: round(v, 3) for k, v in sorted(groups.items(), key=lambda kv: -kv[1])},
            "ops": {e.key[:90]: round(e.self_cpu_time_total / total, 3) for e in largest},
            "matmul_gflops": round(flops / matmul_s / 1e9, 1) if matmul_s else None}
