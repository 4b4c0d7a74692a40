"""The pre-training loop: the official recipe (``run_pretraining.py``), read top to bottom.

Gradient accumulation, clipping, the official optimiser and schedule (:mod:`.optim`), a NaN
guard that never stalls the GPU (:mod:`.step`), logs, held-out evaluation (:mod:`.evaluate`),
a time budget, checkpoints and a bit-exact ``resume`` (:mod:`.checkpoints`); what happens before
the first step is :mod:`.setup`, and Ctrl-C saves the last completed step (:mod:`.interrupt`).
"""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path
from typing import Any, Callable

import torch

from ..config import RunConfig
from ..data.dataset import batch_iterator, prefetch
from .checkpoints import (checkpoint_dir, milestone_steps, prune_checkpoints,
                          restore_trainer_state, save_checkpoint, trainer_state)
from .compiling import compile_module
from .device import resolve_device
from .evaluate import evaluate_model, heldout_batches
from .inputs import long_stage, prepare_data
from .interrupt import Interrupted, SigintFlag, deferred_sigint
from .optim import build_optimizer, lr_at, set_lr
from ..outputs import output_folder
from .setup import (RUN_DIR, RUN_FILES, model_and_data, prepare_out_dir, refuse_earlier_run,
                    resume_point, run_inputs)
from ..progress import beside_bars, progress_bar
from .ranks import Ranks, seed_slice
from .step import MetricsLog, NanGuard, train_step


def pretrain(cfg: RunConfig, *, resume: bool = False, progress: bool = True,
             until_step: int | None = None,
             on_record: Callable[[dict[str, Any]], None] | None = None,
             on_start: Callable[[], None] | None = None,
             ranks: Ranks = Ranks()) -> dict[str, Any]:
    """Pre-train ELECTRA as ``cfg`` says; returns the held-out metrics and the checkpoint path.

    ``resume=True`` continues from the latest checkpoint in ``train.out_dir`` (same config
    required). ``until_step`` stops early (with a checkpoint) without changing the schedule.
    ``on_record`` gets every record written to ``metrics.jsonl``; ``on_start()`` runs once the
    run is set up (its folder held, its data built, every check passed). ``ranks``: this
    process's place in a data-parallel run (:mod:`.ranks`). Ctrl-C (or SIGTERM) saves the last
    completed step and raises :class:`.interrupt.Interrupted`.
    """
    cfg.validate()  # types and ranges: refused before the lock creates train.out_dir
    resolve_device(cfg.train)
    # One run per directory (rank 0 holds it for a data-parallel run), released when we return;
    # a run refused before it wrote anything (data, resume checks) leaves no run.lock behind.
    folder = (output_folder(cfg.train.out_dir, RUN_DIR, files=RUN_FILES, inputs=run_inputs(cfg),
                            what="run")
              if ranks.main else contextlib.nullcontext())
    with folder:
        run = Run(cfg, resume=resume, progress=progress, on_record=on_record, ranks=ranks)
        if on_start is not None:
            with beside_bars():  # the bar is drawn already: its lines go above it
                on_start()
        with deferred_sigint() as run.sigint:  # Ctrl-C waits for the step in flight
            stop = run.train(until_step)
        summary = run.finish(stop)
    if progress:
        print_summary(summary)
    return summary


class Run:
    """One pre-training run: what it holds between steps, and the loop's named pieces."""

    sigint = SigintFlag()  # pretrain() sets a live one: Ctrl-C is then read between steps

    def __init__(self, cfg: RunConfig, *, resume: bool, progress: bool,
                 on_record: Callable[[dict[str, Any]], None] | None = None,
                 ranks: Ranks = Ranks()):
        self.start_time = time.perf_counter()  # cfg is checked already (pretrain)
        self.cfg, self.t, self.ranks = cfg, cfg.train, ranks
        t = self.t
        ranks.check(t.batch_size)
        self.device = resolve_device(t)  # refuses fp16/bf16 without a GPU, before any data work
        ckpt = resume_point(cfg) if resume else None
        if ckpt is None:
            refuse_earlier_run(cfg)

        self.model, train_ds, heldout_ds = model_and_data(cfg, ckpt, self.device, progress)
        self.optimizer = build_optimizer(self.model, t, self.device)
        self.scaler = torch.amp.GradScaler("cuda") if t.precision == "fp16" else None
        # no generator of its own: the step draws from the global RNG, reseeded per slice (.ranks)
        self.step = (restore_trainer_state(ckpt, self.optimizer, self.scaler)
                     if ckpt is not None else 0)
        metrics_path, evaluated = None, set(range(self.step + 1))  # only rank 0 writes
        if ranks.main:
            metrics_path, evaluated = prepare_out_dir(cfg, self.model, self.step,
                                                       resumed=ckpt is not None)

        self.net = ranks.wrap(self.model)  # DDP: gradients averaged over the ranks
        # static shapes: one graph for the whole run (tests/test_speed.py), two for a two-length
        # one; never symbolic ones, which the masking's random draws on a CPU cannot take
        self.net = compile_module(self.net, self.device, dynamic=False) if t.compile else self.net
        self.stages = {False: (0, t.batch_size, train_ds, heldout_ds)}
        self.long = long_stage(cfg)  # (its first step, its config) for a two-length run
        if self.long is not None:  # built now: a corpus too small for it fails before step 1
            first, long = self.long
            ranks.check(long.train.batch_size)
            _, train_long, heldout_long = prepare_data(long, tokenizer=self.model.tokenizer,
                                                       progress=progress)
            self.stages[True] = (first, long.train.batch_size, train_long, heldout_long)
        self.read_stage(long=self.long is not None and self.step > self.long[0])
        self.bar = progress_bar(total=t.max_steps, initial=self.step, disable=not progress,
                                desc="pretrain", dynamic_ncols=True)
        self.log = MetricsLog(metrics_path, self.bar, self.start_time, on_record=on_record,
                              reduce=ranks.reduce)
        self.guard, self.last_saved = NanGuard(), ckpt
        self.milestones = milestone_steps(t)
        if ckpt is not None and self.evaluation_due() and self.step not in evaluated:
            self.evaluate()  # the checkpoint is written first; the run stopped before evaluating

    def read_stage(self, long: bool) -> None:
        """The batches and held-out examples from ``self.step`` on: the run's length, or (a
        two-length run, from its first long step) the long one, each read from its own start."""
        t = self.t
        first, batch_size, train_ds, heldout_ds = self.stages[long]
        # CPU tensors (pinned for cuda), moved to the device in train_step.
        self.batches = batch_iterator(train_ds, batch_size, seed=t.seed,
                                      start=(self.step - first) * t.grad_accum, device=self.device,
                                      rank=self.ranks.rank, world_size=self.ranks.world_size)
        if self.device.type == "cuda":  # the next batches are gathered while the GPU steps
            self.batches = prefetch(self.batches)
        self.eval_data = list(heldout_batches(heldout_ds, batch_size=batch_size,
                                              max_examples=t.eval_examples, device=self.device))
        self.seq_len = int(heldout_ds.input_ids.shape[1])

    def evaluate(self) -> dict[str, Any]:
        with self.log.paused():
            result = evaluate_model(self.model, self.eval_data, seed=self.t.seed,
                                    precision=self.t.precision)
            length = {"max_seq_len": self.seq_len} if self.long is not None else {}
            self.log.write({"kind": "eval", "step": self.step, **result, **length,
                            "elapsed_s": time.perf_counter() - self.start_time})
        return result

    def checkpoint(self) -> Path:
        if not self.ranks.main:  # rank 0 writes; the others hold the same weights
            return checkpoint_dir(self.t.out_dir) / f"step_{self.step:07d}"
        with self.log.paused():
            state = trainer_state(self.step, self.optimizer, self.scaler, self.t)
            path = save_checkpoint(out_dir=self.t.out_dir, step=self.step, model=self.model,
                                   cfg=self.cfg, state=state)
            prune_checkpoints(self.t.out_dir, self.t)
        return path

    def reseed(self, micro: int) -> None:
        """Dropout and masking of this rank's slice of micro-batch ``micro`` (see :mod:`.ranks`)."""
        seed_slice(self.t.seed, self.ranks.slice_index(self.step, micro, self.t.grad_accum))

    def evaluation_due(self) -> bool:
        t = self.t
        return bool(t.eval_every) and self.step % t.eval_every == 0 and self.step < t.max_steps

    def stop_reason(self, until_step: int | None) -> str | None:
        if self.step >= self.t.max_steps:
            return "max_steps"
        if until_step is not None and self.step >= until_step:
            return "until_step"
        late = bool(self.t.max_minutes) and (time.perf_counter() - self.start_time
                                             >= 60 * self.t.max_minutes)
        if self.ranks.world_size > 1:  # all ranks stop at one step: agree at log steps only,
            late = self.step % self.t.log_every == 0 and self.ranks.any(late)  # (they sync there)
        return "max_minutes" if late else None

    def interrupt_requested(self) -> bool:
        """Ctrl-C reaches each process of a ``torchrun`` launch on its own: they agree at log
        steps, where they synchronise anyway (as for ``max_minutes``)."""
        if self.ranks.world_size == 1:
            return self.sigint.requested
        return self.step % self.t.log_every == 0 and self.ranks.any(self.sigint.requested)

    def train(self, until_step: int | None = None) -> str:
        """Step until a stop condition; returns which one stopped the run."""
        t = self.t
        try:
            while (stop := self.stop_reason(until_step)) is None:
                if self.long is not None and self.step == self.long[0]:
                    self.read_stage(long=True)  # the last steps, at the long length
                lr = lr_at(self.step, t)
                set_lr(self.optimizer, lr, t, self.step)
                stats = train_step(self.net, self.batches, self.optimizer, self.scaler, t=t,
                                   device=self.device, sampler=None, step=self.step,
                                   reseed=self.reseed)  # global RNG, reseeded per slice
                self.step += 1
                self.bar.update(1)
                self.guard.add(self.step, stats.pop("finite"))
                self.log.add(stats)
                self.after_step(lr)
                if self.interrupt_requested():
                    raise KeyboardInterrupt
            self.log.flush(self.step, lr_at(max(self.step - 1, 0), t))
            self.guard.check(self.last_saved)
        except KeyboardInterrupt:
            self.save_interrupted()
        finally:
            self.bar.close()
        return stop

    def after_step(self, lr: float) -> None:
        """Log, check for NaN, checkpoint and evaluate when due (in that order)."""
        t, step = self.t, self.step
        save = step < t.max_steps and ((t.save_every and step % t.save_every == 0)
                                       or step in self.milestones)
        evaluate = self.evaluation_due()
        if step % t.log_every == 0 or save:  # a log line at each checkpoint: a resumed
            self.log.flush(step, lr)          # run's log is then the straight run's
        if save or evaluate or step % t.log_every == 0:
            self.guard.check(self.last_saved)  # where the loop waits for the device anyway
        if save:
            self.last_saved = self.checkpoint()
        if evaluate:
            self.evaluate()

    def save_interrupted(self) -> None:
        """After Ctrl-C: log and save the last completed step (never after a NaN step), then
        raise :class:`Interrupted`."""
        self.log.flush(self.step, lr_at(max(self.step - 1, 0), self.t))
        self.guard.check(self.last_saved)
        if self.step > 0:
            self.checkpoint_if_new()
        raise Interrupted(self.step, self.last_saved, signum=self.sigint.signum) from None

    def checkpoint_if_new(self) -> None:
        if self.last_saved is None or self.last_saved.name != f"step_{self.step:07d}":
            self.last_saved = self.checkpoint()

    def finish(self, stop: str) -> dict[str, Any]:
        """The final checkpoint, then the final evaluation: a crash there loses no training."""
        self.checkpoint_if_new()
        result = self.evaluate()
        return {"step": self.step, "stopped_by": stop, "checkpoint": str(self.last_saved),
                "out_dir": str(self.t.out_dir),
                "elapsed_s": round(time.perf_counter() - self.start_time, 1), "heldout": result}


def print_summary(summary: dict[str, Any]) -> None:
    """Two lines for people, on stderr: stdout is the command's JSON, for scripts."""
    r = summary["heldout"]
    if "disc_auc" not in r:  # an MLM objective (objectives.masked_lm): no discriminator
        print(f"held-out ({r['examples']} examples): mlm_accuracy {r['mlm_accuracy']:.4f}  "
              f"mlm_loss {r['mlm_loss']:.4f}", file=sys.stderr)
    else:
        print(f"held-out ({r['examples']} examples): disc_auc {r['disc_auc']:.4f} (without [CLS]/"
              f"[SEP] {r['disc_auc_text']:.4f})  disc_accuracy {r['disc_accuracy']:.4f}  "
              f"disc_precision {r['disc_precision']:.4f}  disc_recall {r['disc_recall']:.4f}  "
              f"gen_accuracy {r['gen_accuracy']:.4f}", file=sys.stderr)
    print(f"checkpoint: {summary['checkpoint']}  (step {summary['step']}, stopped by "
          f"{summary['stopped_by']}, {summary['elapsed_s']} s)", file=sys.stderr)
