"""Stage 2: ``torch.compile`` gives one graph, keeps it, and the step never waits for the host.

The ``small`` model through ``train_step`` as ``pretrain`` compiles it (bf16 on a GPU), 50 steps
whose batches pad their rows to new lengths every step (new attention masks, same shapes) and
whose masking draws new positions every step: dynamo's counters must show 0 graph breaks and 1
graph (a recompilation would add one). Then 10 more steps run under
``torch.cuda.set_sync_debug_mode("error")``, which raises on any host-device synchronisation.
The dry run compiles with ``aot_eager`` (what inductor would be given, without its slow C++
code generation) and counts host reads with a dispatch mode instead (no CUDA to ask).
"""

from __future__ import annotations

import itertools
import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .common import Context, batches, check, small_run, synchronize

aten = torch.ops.aten
SYNC_OPS = {aten._local_scalar_dense.default, aten.nonzero.default, aten.masked_select.default,
            aten.is_nonzero.default, aten.equal.default, aten._unique2.default}


class HostReads(TorchDispatchMode):
    """Counts the ops that make the host wait for a tensor's value (the CPU's stand-in)."""

    def __init__(self):
        super().__init__()
        self.found: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func in SYNC_OPS:
            self.found.append(str(func))
        return func(*args, **(kwargs or {}))


def make_step(model, t, device, *, backend: str | None):
    """``train_step`` as the loop calls it: schedule, per-step reseed, optimiser, compile."""
    from minielectra.training.optim import build_optimizer, lr_at, set_lr
    from minielectra.training.ranks import seed_slice
    from minielectra.training.step import train_step
    # The GPU's optimiser on either device: the CPU's readable one reads its step count on the
    # host (no GPU sync, but the CPU's count would see it).
    optimizer = build_optimizer(model, t, torch.device("cuda"))
    net = torch.compile(model, backend=backend) if backend else model
    counter = itertools.count()

    def step(batch):
        i = next(counter)
        set_lr(optimizer, lr_at(i, t), t, i)
        return train_step(net, iter([batch]), optimizer, None, t=t, device=device, sampler=None,
                          reseed=lambda micro: seed_slice(t.seed, i))
    return step


def syncs_in(step, data: list[dict], cuda: bool) -> list[str]:
    """Host syncs while ``step`` runs over ``data`` (batches already on the device)."""
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            for batch in data:
                step(batch)
        except RuntimeError as e:  # the first sync raises
            return [str(e).splitlines()[0]]
        finally:
            torch.cuda.set_sync_debug_mode("default")
        torch.cuda.synchronize()
        return []
    with HostReads() as reads:
        for batch in data:
            step(batch)
    return reads.found


def run(ctx: Context) -> dict:
    import torch._dynamo as dynamo
    from torch._dynamo.utils import counters

    from minielectra.model.electra import Electra
    run_cfg = small_run(ctx, "train.compile=true")
    t = run_cfg.train
    t.precision = ctx.bf16
    steps, batch = (4, 4) if ctx.dry else (50, 128)
    stream = batches(run_cfg, ctx.device, batch=batch, vary_padding=True)
    torch.manual_seed(0)
    model = Electra(run_cfg.model, run_cfg.objective).to(ctx.device).train()
    dynamo.reset()
    counters.clear()
    step = make_step(model, t, ctx.device, backend="inductor" if ctx.cuda else "aot_eager")
    begin = time.perf_counter()
    step(next(stream))
    synchronize(ctx.device)
    first = time.perf_counter() - begin
    for _ in range(steps - 1):
        stats = step(next(stream))
    float(stats["loss"])
    graphs = int(counters["stats"]["unique_graphs"])
    breaks = {str(k): v for k, v in counters["graph_break"].items()}
    data = list(itertools.islice(stream, 2 if ctx.dry else 10))
    # On a CPU the dispatch mode cannot see inside a compiled graph: count on the eager step.
    sync_step = step if ctx.cuda else make_step(model, t, ctx.device, backend=None)
    syncs = syncs_in(sync_step, data, ctx.cuda)
    dynamo.reset()
    return {"steps": steps, "batch": batch, "backend": "inductor" if ctx.cuda else "aot_eager",
            "precision": t.precision, "first_step_s (compile)": round(first, 1),
            "unique_graphs": graphs, "graph_breaks": breaks, "host_syncs": syncs,
            "sync_check": ("torch.cuda.set_sync_debug_mode('error')" if ctx.cuda
                           else "dispatch-mode count of host reads (eager)"),
            "checks": {"no_graph_breaks": check(not breaks, breaks=sum(breaks.values())),
                       "one_graph_no_recompile": check(graphs == 1, graphs=graphs),
                       "no_host_syncs": check(not syncs, syncs=len(syncs))}}
