"""The pre-training loop: the official recipe, read top to bottom.

google-research/electra ``run_pretraining.py`` (``ELECTRA_REFERENCE.md`` section 1): gradient
accumulation, clipping at global norm 1.0, the official optimiser and schedule (:mod:`.optim`),
a NaN guard that never stalls the GPU (:mod:`.step`), a tqdm bar, ``metrics.jsonl``, periodic
held-out evaluation (:mod:`.evaluate`), a wall-clock budget, checkpoints (:mod:`.checkpoints`) and
``resume=True`` that continues bit-for-bit on CPU. What happens before the first step (config
checks, data, model, the run directory) is :mod:`.setup`.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from ..config import RunConfig
from ..data.dataset import batch_iterator
from .checkpoints import (milestone_steps, prune_checkpoints, restore_trainer_state,
                          save_checkpoint, trainer_state)
from .device import resolve_device
from .evaluate import evaluate_model, heldout_batches
from .optim import build_optimizer, lr_at, set_lr
from .setup import (_model_and_data, _prepare_out_dir, check_types, refuse_earlier_run,
                    resume_point)
from .step import MetricsLog, NanGuard, train_step


def pretrain(cfg: RunConfig, *, resume: bool = False, progress: bool = True,
             until_step: int | None = None) -> dict[str, Any]:
    """Pre-train ELECTRA as ``cfg`` says; returns the held-out metrics and the checkpoint path.

    ``resume=True`` continues from the latest checkpoint in ``train.out_dir`` (same config
    required); without it, a ``train.out_dir`` that holds checkpoints is refused. ``until_step``
    stops early (with a checkpoint) as an interruption would, without changing the schedule; the
    tests use it to split a run in two.
    """
    start_time = time.perf_counter()
    check_types(cfg)
    cfg.validate()
    t = cfg.train
    device = resolve_device(t)  # refuses fp16/bf16 without a GPU, before any data work
    ckpt = resume_point(cfg) if resume else None
    if ckpt is None:
        refuse_earlier_run(cfg)

    model, train_ds, heldout_ds = _model_and_data(cfg, ckpt, device, progress)
    optimizer = build_optimizer(model, t, device)
    scaler = torch.amp.GradScaler("cuda") if t.precision == "fp16" else None
    sampler = torch.Generator(device=device).manual_seed(t.seed + 1)
    step = restore_trainer_state(ckpt, optimizer, scaler, sampler) if ckpt is not None else 0
    metrics_path, evaluated = _prepare_out_dir(cfg, model, step, resumed=ckpt is not None)

    net = torch.compile(model) if t.compile else model  # static shapes: compiles once
    batches = batch_iterator(train_ds, t.batch_size, seed=t.seed, start=step * t.grad_accum,
                             device=device)  # CPU tensors (pinned for cuda); moved in train_step
    eval_data = list(heldout_batches(heldout_ds, batch_size=t.batch_size,
                                     max_examples=t.eval_examples, device=device))
    bar = tqdm(total=t.max_steps, initial=step, disable=not progress, desc="pretrain",
               dynamic_ncols=True)
    logger, guard = MetricsLog(metrics_path, bar, start_time), NanGuard()
    last_saved = ckpt

    def evaluate_now() -> dict[str, Any]:
        with logger.paused():
            result = evaluate_model(model, eval_data, seed=t.seed, precision=t.precision)
            logger.write({"kind": "eval", "step": step, **result,
                          "elapsed_s": time.perf_counter() - start_time})
        return result

    def checkpoint() -> Path:
        with logger.paused():
            path = save_checkpoint(out_dir=t.out_dir, step=step, model=model, cfg=cfg,
                                   state=trainer_state(step, optimizer, scaler, sampler, t))
            prune_checkpoints(t.out_dir, t)
        return path

    def evaluation_due() -> bool:
        return bool(t.eval_every) and step % t.eval_every == 0 and step < t.max_steps

    if ckpt is not None and evaluation_due() and step not in evaluated:
        evaluate_now()  # the checkpoint is written first; the run stopped before evaluating it

    milestones = milestone_steps(t)
    stop = "max_steps"
    try:
        while step < t.max_steps:
            if until_step is not None and step >= until_step:
                stop = "until_step"
                break
            if t.max_minutes and time.perf_counter() - start_time >= 60 * t.max_minutes:
                stop = "max_minutes"
                break
            lr = lr_at(step, t)
            set_lr(optimizer, lr, t, step)
            stats = train_step(net, batches, optimizer, scaler, t=t, device=device,
                               sampler=sampler)
            step += 1
            bar.update(1)
            guard.add(step, stats.pop("finite"))
            logger.add(stats)
            save = step < t.max_steps and ((t.save_every and step % t.save_every == 0)
                                           or step in milestones)
            evaluate = evaluation_due()
            if step % t.log_every == 0 or save:  # a log line at each checkpoint: a resumed
                logger.flush(step, lr)            # run's log is then the straight run's
            if save or evaluate or step % t.log_every == 0:
                guard.check(last_saved)  # where the loop waits for the device anyway
            if save:
                last_saved = checkpoint()
            if evaluate:
                evaluate_now()
        logger.flush(step, lr_at(max(step - 1, 0), t))
        guard.check(last_saved)
    finally:
        bar.close()
    # The final checkpoint comes before the final evaluation: a crash there loses no training.
    if last_saved is None or last_saved.name != f"step_{step:07d}":
        last_saved = checkpoint()
    result = evaluate_now()
    summary = {"step": step, "stopped_by": stop, "checkpoint": str(last_saved),
               "out_dir": str(t.out_dir), "elapsed_s": round(time.perf_counter() - start_time, 1),
               "heldout": result}
    if progress:
        print_summary(summary)
    return summary


def print_summary(summary: dict[str, Any]) -> None:
    r = summary["heldout"]
    print(f"held-out ({r['examples']} examples): disc_auc {r['disc_auc']:.4f} (without [CLS]/"
          f"[SEP] {r['disc_auc_text']:.4f})  disc_accuracy {r['disc_accuracy']:.4f}  "
          f"disc_precision {r['disc_precision']:.4f}  disc_recall {r['disc_recall']:.4f}  "
          f"gen_accuracy {r['gen_accuracy']:.4f}")
    print(f"checkpoint: {summary['checkpoint']}  (step {summary['step']}, stopped by "
          f"{summary['stopped_by']}, {summary['elapsed_s']} s)")
