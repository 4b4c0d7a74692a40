"""Pre-training on several GPUs or machines: the same command under ``torchrun``.

::

    torchrun --nproc_per_node=8 -m minielectra pretrain --preset small --data DIR
    # two machines: --nnodes=2 --node_rank=0|1 --rdzv_endpoint=HOST:PORT on each

:func:`init_ranks` joins torchrun's process group and returns the
:class:`~minielectra.training.ranks.Ranks` the loop uses (the model in DDP, statistics averaged
over the ranks, one stop decision for all); how N processes train the same model as one is
:mod:`minielectra.training.ranks`.
"""

from __future__ import annotations

import os
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from ..config import RunConfig
from ..training.device import resolve_device
from ..training.loop import pretrain
from ..training.ranks import Ranks


def launched() -> bool:
    """True in a process that torchrun started as one of several."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


class _DDP(DistributedDataParallel):
    """DDP that also answers the wrapped model's attributes (``objective``, ``config``, read by
    the objectives); calls still go through DDP's ``forward``, which syncs the gradients."""

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name == "module":
                raise
            return getattr(self.module, name)


def init_ranks(cfg: RunConfig) -> Ranks:
    """Join torchrun's process group; NCCL when the run's device is a GPU, else gloo."""
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    cuda = resolve_device(cfg.train).type == "cuda"
    if cuda:
        torch.cuda.set_device(local)  # "cuda" then means this rank's GPU everywhere
    if not dist.is_initialized():
        dist.init_process_group("nccl" if cuda else "gloo")
    device = torch.device("cuda", local) if cuda else torch.device("cpu")

    def wrap(model: torch.nn.Module) -> torch.nn.Module:
        return _DDP(model, device_ids=[local] if cuda else None)

    def reduce(stats: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """One all-reduce for all the statistics: the mean over ranks, tokens summed."""
        keys = sorted(stats)
        values = torch.stack([torch.as_tensor(stats[k], device=device).double() for k in keys])
        dist.all_reduce(values)
        return {k: v if k == "tokens" else v / world for k, v in zip(keys, values)}

    def any_rank(flag: bool) -> bool:
        value = torch.tensor([float(flag)], device=device)
        dist.all_reduce(value, op=dist.ReduceOp.MAX)
        return bool(value.item())

    return Ranks(rank=rank, world_size=world, wrap=wrap, reduce=reduce, any=any_rank)


def pretrain_distributed(cfg: RunConfig, *, resume: bool = False, progress: bool = True,
                         until_step: int | None = None) -> dict[str, Any] | None:
    """:func:`~minielectra.training.loop.pretrain` on every rank; rank 0 returns the summary
    (and alone shows progress), the others return None."""
    ranks = init_ranks(cfg)
    try:
        summary = pretrain(cfg, resume=resume, progress=progress and ranks.main,
                           until_step=until_step, ranks=ranks)
        dist.barrier()  # the final checkpoint is on disk before any rank exits
    finally:
        dist.destroy_process_group()
    return summary if ranks.main else None
