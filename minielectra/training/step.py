"""One training step, and the bookkeeping around it that never stalls a GPU.

:func:`train_step` returns its statistics as device tensors; nothing in it reads a value back to
the host (a ``.item()`` makes the CPU wait for the GPU to finish, emptying its queue every step).
:class:`NanGuard` keeps each step's "finite" flag and reads them all at once where the loop waits
anyway; :class:`MetricsLog` sums the statistics on the device and converts them at log lines.
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import torch
from torch import nn

from ..config import TrainConfig
from ..objectives.compute import compute
from .device import autocast

_nothing = contextlib.nullcontext  # a model without DDP's no_sync


class TrainingDiverged(RuntimeError):
    """The loss (or gradient norm) became NaN/inf; the last good checkpoint is kept."""


def train_step(model: nn.Module, batches: Iterator[dict], optimizer: torch.optim.Optimizer,
               scaler, *, t: TrainConfig, device: torch.device,
               sampler: torch.Generator | None, step: int = 0,
               reseed: Callable[[int], None] | None = None) -> dict[str, torch.Tensor]:
    """One update: ``grad_accum`` micro-batches, clip at ``grad_clip``, optimiser step.

    Returns detached per-step sums (``tokens``) and means (losses, metrics, ``grad_norm``), and
    ``finite``, a 0-dim bool tensor, False when the loss (or, without an fp16 scaler, the
    gradient norm) was NaN/inf; unread here (:class:`NanGuard`). ``reseed(i)`` is called before
    micro-batch ``i`` (see :mod:`.ranks`).
    """
    optimizer.zero_grad(set_to_none=True)
    stats: dict[str, torch.Tensor] = {}
    for micro in range(t.grad_accum):
        if reseed is not None:
            reseed(micro)
        batch = {k: v.to(device, non_blocking=True) for k, v in next(batches).items()}
        # Data-parallel: the ranks average their gradients once, after the last micro-batch.
        last = micro == t.grad_accum - 1
        sync = contextlib.nullcontext() if last else getattr(model, "no_sync", _nothing)()
        with sync, autocast(device, t.precision):
            # objective.name picks the loss; the default is Electra.forward (objectives.compute)
            out = compute(model, batch["input_ids"], batch["attention_mask"],
                          batch["token_type_ids"], generator=sampler, step=step,
                          max_steps=t.max_steps)
        loss = out.loss / t.grad_accum
        (scaler.scale(loss) if scaler is not None else loss).backward()
        parts = {"loss": out.loss, "gen_loss": out.gen_loss, "disc_loss": out.disc_loss,
                 **out.metrics}
        for k, v in parts.items():
            stats[k] = stats.get(k, 0.0) + v.detach().float() / t.grad_accum
        stats["tokens"] = stats.get("tokens", 0) + batch["attention_mask"].sum()
    if scaler is not None:
        scaler.unscale_(optimizer)  # clip the true gradients, not the scaled ones
    stats["grad_norm"] = torch.nn.utils.clip_grad_norm_(model.parameters(), t.grad_clip)
    # With fp16 an inf gradient is routine (the scaler skips that step); anything else is fatal.
    finite = torch.isfinite(stats["loss"])
    if scaler is None:
        finite = finite & torch.isfinite(stats["grad_norm"])
    stats["finite"] = finite
    if scaler is not None:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    return stats


class NanGuard:
    """Keeps each step's ``finite`` flag on the device and reads them all in one go where the
    loop waits anyway; it checks before every checkpoint, so the last one saved is good."""

    def __init__(self):
        self.pending: list[tuple[int, torch.Tensor]] = []

    def add(self, step: int, finite: torch.Tensor) -> None:
        self.pending.append((step, finite))

    def check(self, last_saved: Path | None) -> None:
        if not self.pending:
            return
        steps, flags = zip(*self.pending)
        self.pending = []
        ok = torch.stack(flags).tolist()  # the one host-device sync
        if not all(ok):
            raise TrainingDiverged(
                f"loss became NaN/inf at step {steps[ok.index(False)]}; stopped without saving. "
                f"Last good checkpoint: {last_saved or 'none'}")


class MetricsLog:
    """Averages step statistics between log lines; writes ``metrics.jsonl`` and the progress bar."""

    def __init__(self, path: Path | None, bar, start_time: float, *,
                 on_record: Callable[[dict[str, Any]], None] | None = None,
                 reduce: Callable[[dict], dict] | None = None):
        self.path, self.bar, self.start, self.on_record = path, bar, start_time, on_record
        self.reduce = reduce  # data-parallel: the mean over the ranks (path None: not rank 0)
        self.sums: dict[str, torch.Tensor] = {}
        self.steps, self.last_time, self.excluded = 0, time.perf_counter(), 0.0

    def add(self, stats: dict[str, torch.Tensor]) -> None:
        for k, v in stats.items():
            self.sums[k] = self.sums.get(k, 0.0) + v
        self.steps += 1

    def write(self, record: dict[str, Any]) -> None:
        if self.path is None:
            return
        with open(self.path, "a") as f:
            f.write(json.dumps(record) + "\n")
        if self.on_record is not None:
            self.on_record(record)

    @contextlib.contextmanager
    def paused(self):
        """Time spent in here (evaluation, checkpoints) is left out of tokens/s."""
        begin = time.perf_counter()
        try:
            yield
        finally:
            self.excluded += time.perf_counter() - begin

    def flush(self, step: int, lr: float) -> dict[str, Any] | None:
        if not self.steps:
            return None
        now = time.perf_counter()
        if self.reduce is not None:
            self.sums = self.reduce(self.sums)
        tokens = float(self.sums.pop("tokens"))
        seconds = now - self.last_time - self.excluded
        record = {"kind": "train", "step": step, "lr": lr,
                  **{k: float(v) / self.steps for k, v in self.sums.items()},
                  "tokens_per_s": tokens / max(seconds, 1e-9), "elapsed_s": now - self.start}
        self.write(record)
        # disc_accuracy for ELECTRA's objectives, mlm_accuracy for the MLM ones (objectives)
        accuracy = record.get("disc_accuracy", record.get("mlm_accuracy", float("nan")))
        self.bar.set_postfix(loss=f"{record['loss']:.3f}", acc=f"{accuracy:.3f}",
                             tok_s=f"{record['tokens_per_s']:.0f}", refresh=False)
        self.sums, self.steps, self.last_time, self.excluded = {}, 0, now, 0.0
        return record
