"""The pre-training loop: precision, checkpoints, resume, logging and the NaN guard.

This is the official recipe (google-research/electra ``run_pretraining.py``;
``ELECTRA_REFERENCE.md`` section 1), read top to bottom. The optimiser and the learning-rate
schedule (``model/optimization.py``) live in :mod:`minielectra.optim` and are re-exported here.

1. **Precision** (:func:`resolve_device`, :func:`autocast`): fp32 on CPU; bf16 autocast or fp16 with
   a gradient scaler on a GPU. Sampling stays in float32 (``electra.gumbel_max_sample``).
2. **Checkpoints** (:func:`save_checkpoint`): weights, optimiser, RNG and data position, written to
   a temporary directory and renamed into place, so a crash never leaves a half checkpoint. The
   last ``keep_last`` are kept, plus the paper's milestones (6.25/12.5/25/50/100% of the steps).
3. **Set-up** (:func:`prepare_data`, :func:`resume_point`, :func:`restore_trainer_state`): data,
   tokenizer, and everything a resumed run must restore.
4. **The loop** (:func:`pretrain`): gradient accumulation, clipping at global norm 1.0, a NaN
   guard that never stalls the GPU, a tqdm bar, ``metrics.jsonl``, periodic held-out evaluation,
   a wall-clock budget, and ``resume=True`` that continues bit-for-bit on CPU.

Run layout (``train.out_dir``)::

    config.json             the resolved RunConfig
    metrics.jsonl           one JSON object per logged step ("kind": "train" | "eval")
    tokenizer/              the vocabulary the run trained or loaded
    checkpoints/step_0001500/   model.safetensors, config.json, vocab.txt  (Electra.from_pretrained)
                                run_config.json, trainer_state.pt          (resume)
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
import time
import typing
from pathlib import Path
from typing import Any, Iterator

import torch
from torch import nn

from .config import RunConfig, TrainConfig
from .electra import Electra
# Re-exported: ``from minielectra.train import AdamWeightDecay, lr_at`` predates optim.py.
from .optim import (AdamWeightDecay, build_optimizer, load_optimizer_state,  # noqa: F401
                    lr_at, official_adam_hparams, param_groups, set_lr)

# ----------------------------------------------------------------------------- 1. precision


def resolve_device(t: TrainConfig) -> torch.device:
    """``auto`` -> cuda when available; refuse a device or precision this machine lacks."""
    if t.device not in ("auto", "cpu", "cuda") and not t.device.startswith("cuda:"):
        raise ValueError(f"train.device must be auto|cpu|cuda, got {t.device!r}")
    name = ("cuda" if torch.cuda.is_available() else "cpu") if t.device == "auto" else t.device
    device = torch.device(name)
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


# --------------------------------------------------------------------------- 2. checkpoints

STATE_FILE = "trainer_state.pt"
_STEP_DIR = re.compile(r"^step_(\d+)$")


def checkpoint_dir(out_dir: str | Path) -> Path:
    return Path(out_dir) / "checkpoints"


def list_checkpoints(out_dir: str | Path) -> list[tuple[int, Path]]:
    """Complete checkpoints as ``(step, path)``, oldest first. Temporary dirs are not listed."""
    root = checkpoint_dir(out_dir)
    found = []
    for p in root.iterdir() if root.is_dir() else []:
        m = _STEP_DIR.match(p.name)
        if m and (p / STATE_FILE).is_file():
            found.append((int(m.group(1)), p))
    return sorted(found)


def latest_checkpoint(out_dir: str | Path) -> Path | None:
    found = list_checkpoints(out_dir)
    return found[-1][1] if found else None


def milestone_steps(t: TrainConfig) -> set[int]:
    """The paper's partial checkpoints (fractions of ``max_steps``) plus the last step."""
    return {max(1, round(f * t.max_steps)) for f in t.milestones} | {t.max_steps}


def save_checkpoint(out_dir: str | Path, step: int, model: Electra, state: dict[str, Any],
                    cfg: RunConfig) -> Path:
    """Write ``checkpoints/step_N``: the model directory (``Electra.from_pretrained`` loads it)
    plus ``run_config.json`` and ``trainer_state.pt``, all published by one atomic rename
    (:func:`minielectra.checkpoint.atomic_dir`), so a reader sees all of it or nothing."""
    from .checkpoint import save_pretrained

    buffer = io.BytesIO()
    torch.save(state, buffer)
    run_config = json.dumps(cfg.to_dict(), indent=2) + "\n"
    final = checkpoint_dir(out_dir) / f"step_{step:07d}"
    return save_pretrained(model, final, extra_files={"run_config.json": run_config,
                                                      STATE_FILE: buffer.getvalue()})


def prune_checkpoints(out_dir: str | Path, t: TrainConfig) -> list[Path]:
    """Delete all but the last ``keep_last`` checkpoints, never a milestone; returns the deleted."""
    keep = milestone_steps(t)
    found = list_checkpoints(out_dir)
    recent = {s for s, _ in found[-max(1, t.keep_last):]}
    deleted = []
    for s, p in found:
        if s not in keep and s not in recent:
            shutil.rmtree(p)
            deleted.append(p)
    for p in checkpoint_dir(out_dir).glob(".step_*.tmp-*"):  # leftovers of a crashed write
        shutil.rmtree(p, ignore_errors=True)
    return deleted


# Settings that may change between a run and its resume: they do not change the trajectory.
RESUMABLE_CHANGES = {"train.device", "train.compile", "train.log_every", "train.eval_every",
                     "train.eval_examples", "train.save_every", "train.keep_last",
                     "train.max_minutes", "train.out_dir", "data.cache_dir", "data.num_workers"}


def check_resumable(saved: RunConfig, cfg: RunConfig) -> None:
    """Refuse to resume a checkpoint written by a different configuration, naming the keys."""
    a, b = _flatten(saved.to_dict()), _flatten(cfg.to_dict())
    diff = sorted(k for k in a.keys() | b.keys()
                  if a.get(k) != b.get(k) and k not in RESUMABLE_CHANGES)
    if diff:
        shown = ", ".join(f"{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in diff)
        raise ValueError(f"cannot resume: the checkpoint was trained with another config ({shown})")


def _flatten(d: dict, prefix: str = "") -> dict[str, Any]:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[prefix + k] = list(v) if isinstance(v, tuple) else v
    return out


# ------------------------------------------------------------------------------ 3. set-up


def check_types(cfg: RunConfig) -> None:
    """Refuse a config whose values do not have their declared types (library callers can pass
    anything; the CLI parses ``--set`` values already). ints are accepted where floats are."""
    for section in ("model", "objective", "data", "train"):
        obj = getattr(cfg, section)
        for name, hint in typing.get_type_hints(type(obj)).items():
            value, ok = getattr(obj, name), True
            origin, args = typing.get_origin(hint), typing.get_args(hint)
            if origin is typing.Literal:
                ok = value in args
            elif hint is float:
                ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            elif hint is int:
                ok = isinstance(value, int) and not isinstance(value, bool)
            elif hint in (bool, str):
                ok = isinstance(value, hint)
            elif origin is tuple:
                ok = isinstance(value, (tuple, list)) and all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
            elif type(None) in args:
                types = tuple(a for a in args if isinstance(a, type))
                ok = value is None or isinstance(value, types)
            if not ok:
                raise ValueError(f"{section}.{name} expects {hint}, got {value!r}")


def prepare_data(cfg: RunConfig, *, tokenizer=None, progress: bool = True):
    """Corpus -> WordPiece vocabulary (trained unless given) -> train and held-out datasets."""
    from .corpus import open_corpus
    from .pretraining_data import build_dataset
    from .tokenizer import resolve_tokenizer

    d = cfg.data
    corpus = open_corpus(d.corpus, cache_dir=d.cache_dir)
    if tokenizer is None:  # trained on the training documents only
        tokenizer = resolve_tokenizer(d, corpus.split(d.held_out_fraction)[0])
    common = dict(max_seq_len=d.max_seq_len, held_out_fraction=d.held_out_fraction,
                  seed=cfg.train.seed, short_seq_prob=d.short_seq_prob,
                  single_segment_prob=d.single_segment_prob, cache_dir=d.cache_dir,
                  num_workers=d.num_workers, progress=progress)
    train = build_dataset(corpus, tokenizer, split="train", **common)
    heldout = build_dataset(corpus, tokenizer, split="heldout", **common)
    return tokenizer, train, heldout


def set_token_ids(cfg: RunConfig, tokenizer) -> None:
    """The model's vocabulary and special ids come from the tokenizer, not the preset."""
    cfg.model.vocab_size = tokenizer.vocab_size
    cfg.model.pad_token_id, cfg.model.cls_token_id = tokenizer.pad_id, tokenizer.cls_id
    cfg.model.sep_token_id, cfg.model.mask_token_id = tokenizer.sep_id, tokenizer.mask_id


def rng_state(sampler: torch.Generator) -> dict[str, Any]:
    """Everything random in a step: dropout (global RNGs) and masking/sampling (``sampler``)."""
    state = {"torch": torch.get_rng_state(), "sampler": sampler.get_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any], sampler: torch.Generator) -> None:
    torch.set_rng_state(state["torch"])
    sampler.set_state(state["sampler"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def trainer_state(step: int, optimizer, scaler, sampler: torch.Generator,
                  t: TrainConfig) -> dict[str, Any]:
    """What resuming needs besides the weights. The schedule is a function of the step, and the
    data position is the number of batches consumed (``batch_iterator(start=...)``)."""
    return {"step": step, "optimizer": optimizer.state_dict(),
            "scheduler": {"schedule": t.schedule, "step": step, "lr": lr_at(step, t)},
            "scaler": scaler.state_dict() if scaler is not None else None,
            "rng": rng_state(sampler),
            "data": {"batches_consumed": step * t.grad_accum, "seed": t.seed}}


def resume_point(cfg: RunConfig) -> Path:
    """The latest checkpoint of ``train.out_dir``, refused unless it was written by ``cfg``."""
    ckpt = latest_checkpoint(cfg.train.out_dir)
    if ckpt is None:
        raise FileNotFoundError(f"--resume: no checkpoint in {checkpoint_dir(cfg.train.out_dir)}")
    saved = RunConfig.load(ckpt / "run_config.json")
    for k in ("vocab_size", "pad_token_id", "cls_token_id", "sep_token_id", "mask_token_id"):
        setattr(cfg.model, k, getattr(saved.model, k))  # resolved from the tokenizer, not set
    check_resumable(saved, cfg)
    return ckpt


def refuse_earlier_run(cfg: RunConfig) -> None:
    """A fresh run must not mix its checkpoints with an earlier run's in ``train.out_dir``:
    pruning would delete them, and ``--resume`` would later pick whichever step is largest."""
    found = list_checkpoints(cfg.train.out_dir)
    if found:
        raise ValueError(
            f"{checkpoint_dir(cfg.train.out_dir)} already holds {len(found)} checkpoint(s) of an "
            f"earlier run (latest step {found[-1][0]}): delete them, choose another --out "
            "(train.out_dir), or continue that run with --resume")


def restore_trainer_state(ckpt: Path, optimizer, scaler, sampler: torch.Generator) -> int:
    """Load optimiser, scaler and RNG states from ``ckpt``; returns the step to continue from.
    The optimiser keeps this device's settings (fused on a GPU), see ``load_optimizer_state``."""
    state = torch.load(ckpt / STATE_FILE, map_location="cpu", weights_only=True)
    load_optimizer_state(optimizer, state["optimizer"])
    if scaler is not None and state.get("scaler"):
        scaler.load_state_dict(state["scaler"])
    set_rng_state(state["rng"], sampler)
    return state["step"]


# ------------------------------------------------------------------------------ 4. the loop



class TrainingDiverged(RuntimeError):
    """The loss (or gradient norm) became NaN/inf; the last good checkpoint is kept."""


def train_step(model: nn.Module, batches: Iterator[dict], optimizer: torch.optim.Optimizer,
               scaler, *, t: TrainConfig, device: torch.device,
               sampler: torch.Generator) -> dict[str, torch.Tensor]:
    """One update: ``grad_accum`` micro-batches, clip at ``grad_clip``, optimiser step.

    Returns detached per-step sums (``tokens``) and means (losses, metrics, ``grad_norm``), and
    ``finite``, a 0-dim bool tensor that is False when the loss (or, without an fp16 gradient
    scaler, the gradient norm) was NaN/inf. ``finite`` is not read here: reading a GPU value makes
    the CPU wait until the GPU has finished the step, which would empty the queue every step. The
    loop reads all the flags at once when it waits anyway (:class:`_NanGuard`).
    """
    optimizer.zero_grad(set_to_none=True)
    stats: dict[str, torch.Tensor] = {}
    for _ in range(t.grad_accum):
        batch = {k: v.to(device, non_blocking=True) for k, v in next(batches).items()}
        with autocast(device, t.precision):
            out = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"],
                        generator=sampler)
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


class _NanGuard:
    """Keeps each step's ``finite`` flag on the device and reads them all in one go, at the
    points where the loop waits for the device anyway (log lines, evaluations, checkpoints).

    A NaN step has already updated the weights when it is found, so nothing is saved after it:
    the loop checks before every checkpoint, and the last one saved is the last good one.
    """

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


class _Logger:
    """Averages step statistics between log lines; writes ``metrics.jsonl`` and the tqdm bar."""

    def __init__(self, path: Path, bar, start_time: float):
        self.path, self.bar, self.start = path, bar, start_time
        self.sums: dict[str, torch.Tensor] = {}
        self.steps, self.last_time, self.excluded = 0, time.perf_counter(), 0.0

    def add(self, stats: dict[str, torch.Tensor]) -> None:
        for k, v in stats.items():
            self.sums[k] = self.sums.get(k, 0.0) + v
        self.steps += 1

    def write(self, record: dict[str, Any]) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps(record) + "\n")

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
        tokens = float(self.sums.pop("tokens"))
        seconds = now - self.last_time - self.excluded
        record = {"kind": "train", "step": step, "lr": lr,
                  **{k: float(v) / self.steps for k, v in self.sums.items()},
                  "tokens_per_s": tokens / max(seconds, 1e-9), "elapsed_s": now - self.start}
        self.write(record)
        self.bar.set_postfix(loss=f"{record['loss']:.3f}",
                             disc_acc=f"{record['disc_accuracy']:.3f}",
                             tok_s=f"{record['tokens_per_s']:.0f}", refresh=False)
        self.sums, self.steps, self.last_time, self.excluded = {}, 0, now, 0.0
        return record


def _truncate_metrics(path: Path, step: int) -> list[dict[str, Any]]:
    """On resume, drop the log lines of steps after the checkpoint (they will be redone), and a
    line that does not parse: the last one, cut short by a crash in the middle of writing it.
    Returns the records kept."""
    if not path.exists():
        return []
    keep = []
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and record.get("step", 0) <= step:
            keep.append(record)
    path.write_text("".join(json.dumps(r) + "\n" for r in keep))
    return keep


def _model_and_data(cfg: RunConfig, ckpt: Path | None, device: torch.device, progress: bool):
    """The model (fresh, or the checkpoint's weights) and the train and held-out datasets."""
    torch.manual_seed(cfg.train.seed)  # first: the initial weights are a function of the seed
    loaded = Electra.from_pretrained(ckpt) if ckpt is not None else None
    tokenizer, train_ds, heldout_ds = prepare_data(
        cfg, tokenizer=loaded.tokenizer if loaded is not None else None, progress=progress)
    set_token_ids(cfg, tokenizer)
    model = Electra(cfg.model, cfg.objective)
    if loaded is not None:
        model.load_state_dict(loaded.state_dict())
    model.tokenizer = tokenizer
    return model.to(device).train(), train_ds, heldout_ds


def _prepare_out_dir(cfg: RunConfig, model: Electra, step: int,
                     resumed: bool) -> tuple[Path, set[int]]:
    """``config.json``, ``tokenizer/`` and ``metrics.jsonl`` (emptied, or cut back to ``step``);
    returns the log's path and the steps already evaluated."""
    out = Path(cfg.train.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cfg.save(out / "config.json")
    model.tokenizer.save(out / "tokenizer")
    metrics_path = out / "metrics.jsonl"
    kept = []
    if resumed:
        kept = _truncate_metrics(metrics_path, step)
    else:
        metrics_path.write_text("")
    return metrics_path, {r["step"] for r in kept if r.get("kind") == "eval"}


def pretrain(cfg: RunConfig, *, resume: bool = False, progress: bool = True,
             until_step: int | None = None) -> dict[str, Any]:
    """Pre-train ELECTRA as ``cfg`` says; returns the held-out metrics and the checkpoint path.

    ``resume=True`` continues from the latest checkpoint in ``train.out_dir`` (same config
    required); without it, a ``train.out_dir`` that holds checkpoints is refused. ``until_step``
    stops early (with a checkpoint) as an interruption would, without changing the schedule; the
    tests use it to split a run in two.
    """
    from tqdm.auto import tqdm

    from .evaluate import evaluate_model, heldout_batches
    from .pretraining_data import batch_iterator

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
    logger, guard = _Logger(metrics_path, bar, start_time), _NanGuard()
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
