"""What the loop knows of data-parallel training: plain values and callables, no torch.distributed.

:mod:`minielectra.distributed` fills a :class:`Ranks` for a ``torchrun`` launch; a single process
uses the default. N processes train the same run as one (``docs/guides/fidelity.md``): rank r
of N reads rows ``[r*b/N, (r+1)*b/N)`` of the global batch ``train.batch_size`` (the gradient is
the mean of the slices' mean losses, as in the official TPU code), and :func:`seed_slice` reseeds
the global RNG before each slice, so slice k draws the same masks wherever it runs. The global
RNG, not a ``torch.Generator``: torch.compile cannot trace a draw from a user generator, which
would break the step into 9 graphs (tests/test_speed.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch


def _same(x: Any) -> Any:
    return x


@dataclass(frozen=True)
class Ranks:
    """This process's place in a data-parallel run (default: the only process)."""

    rank: int = 0
    world_size: int = 1
    wrap: Callable[[torch.nn.Module], torch.nn.Module] = _same  # e.g. DistributedDataParallel
    # Step statistics (device tensors) -> their mean over the ranks ("tokens": their sum).
    reduce: Callable[[dict[str, torch.Tensor]], dict[str, torch.Tensor]] = _same
    any: Callable[[bool], bool] = _same  # True on every rank when True on one (a stop signal)

    @property
    def main(self) -> bool:
        """Rank 0 writes the config, the log and the checkpoints; the others only train."""
        return self.rank == 0

    def check(self, batch_size: int) -> None:
        if batch_size % self.world_size:
            raise ValueError(f"train.batch_size {batch_size} (the global batch) must be a "
                             f"multiple of the number of processes, {self.world_size}")

    def slice_index(self, step: int, micro: int, grad_accum: int) -> int:
        """The global index of this rank's slice of micro-batch ``micro`` of ``step``."""
        return (step * grad_accum + micro) * self.world_size + self.rank


def seed_slice(seed: int, index: int) -> None:
    """Reseed the global RNG from (seed, slice index): the CPU's and this process's GPU's, the
    two a step draws from. Host-side only: a seed is set without waiting for the device.
    (``torch.manual_seed`` would seed every backend and device, ~130 us per micro-batch.)"""
    state = int(np.random.SeedSequence([seed, index]).generate_state(1, np.uint64)[0]) >> 1
    torch.default_generator.manual_seed(state)
    if torch.cuda.is_available():
        torch.cuda.manual_seed(state)  # the current device: a torchrun rank's own GPU
