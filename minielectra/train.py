"""The pre-training loop: optimiser, schedule, precision, checkpoints, resume and logging.

This is the official recipe (google-research/electra ``run_pretraining.py`` and
``model/optimization.py``; ``ELECTRA_REFERENCE.md`` section 1), read top to bottom:

1. **Schedule** (:func:`lr_at`): warmup times linear decay, in the official form
   ``peak * (1 - step/T) * min(1, step/warmup)`` or the usual "ramp up, then decay" form.
2. **Optimiser** (:class:`AdamWeightDecay`): Adam with decoupled weight decay 0.01, not on
   LayerNorm or bias parameters, eps 1e-6 and, by default, *no bias correction* (as the official
   optimiser). On a GPU we use torch's fused AdamW with hyper-parameters rescaled so that it
   computes exactly the same update (:func:`official_adam_hparams`).
3. **Precision** (:func:`resolve_device`, :func:`autocast`): fp32 on CPU; bf16 autocast or fp16 with
   a gradient scaler on a GPU. Sampling stays in float32 (``electra.gumbel_max_sample``).
4. **Checkpoints** (:func:`save_checkpoint`): weights, optimiser, RNG and data position, written to
   a temporary directory and renamed into place, so a crash never leaves a half checkpoint. The
   last ``keep_last`` are kept, plus the paper's milestones (6.25/12.5/25/50/100% of the steps).
5. **The loop** (:func:`pretrain`): gradient accumulation, clipping at global norm 1.0, a NaN
   guard, a tqdm bar, ``metrics.jsonl``, periodic held-out evaluation, a wall-clock budget, and
   ``resume=True`` that continues bit-for-bit on CPU.

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
import math
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

# ------------------------------------------------------------------------------ 1. schedule


def lr_at(step: int, t: TrainConfig) -> float:
    """The learning rate of the update made at ``step`` (0-based), as in the official code.

    ``official``: ``peak * (1 - step/T) * min(1, step/warmup)``: TF's ``polynomial_decay`` line
    from the very first step, multiplied by the warmup ramp, so it never quite reaches the peak.
    ``linear``: ramp from 0 to the peak over ``warmup`` steps, then decay linearly to 0 at ``T``.
    """
    peak, total, warmup = t.learning_rate, t.max_steps, t.warmup_steps
    step = min(step, total)
    if t.schedule == "official":
        ramp = min(1.0, step / warmup) if warmup > 0 else 1.0
        return peak * (1 - step / total) * ramp
    if step < warmup:
        return peak * step / warmup
    return peak * (total - step) / max(1, total - warmup)


# ----------------------------------------------------------------------------- 2. optimiser


def param_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Two groups: decayed weights, and LayerNorm/bias parameters that are not decayed.

    The official optimiser skips any variable named ``LayerNorm`` or ``bias``; the generator's
    ``output_bias`` is a bias too. ``named_parameters`` yields a shared (tied) tensor once, so
    the embeddings both networks hold are updated, and decayed, once per step.
    """
    norm_params = {id(p) for m in model.modules() if isinstance(m, nn.LayerNorm)
                   for p in m.parameters()}
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        skip = id(p) in norm_params or name.rsplit(".", 1)[-1].endswith("bias")
        (no_decay if skip else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0}]


class AdamWeightDecay(torch.optim.Optimizer):
    """The official ``AdamWeightDecayOptimizer``, readable, with optional bias correction.

    For each parameter ``w`` with gradient ``g`` (``t`` counts updates from 1)::

        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g^2
        m_hat, v_hat = m, v                                  # official: no bias correction
        m_hat, v_hat = m / (1 - b1^t), v / (1 - b2^t)        # bias_correction=True (= AdamW)
        w = w - lr * (m_hat / (sqrt(v_hat) + eps) + weight_decay * w)

    The decay is *decoupled* (Loshchilov & Hutter): it is not part of the gradient, so Adam's
    scaling does not touch it. Without bias correction the first updates are small (``m`` starts
    at 0), which acts as an extra warmup; short runs learn faster with it on.
    State keys match ``torch.optim.AdamW`` (``step``, ``exp_avg``, ``exp_avg_sq``).
    """

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-6, weight_decay: float = 0.0, *, bias_correction: bool = False):
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        bias_correction=bias_correction)
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for group in self.param_groups:
            b1, b2 = group["betas"]
            lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = torch.tensor(0.0)
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                state["step"] += 1
                m, v, t = state["exp_avg"], state["exp_avg_sq"], state["step"].item()
                m.lerp_(p.grad, 1 - b1)  # m = b1 m + (1 - b1) g
                v.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
                step_size, denom = lr, v.sqrt()
                if group["bias_correction"]:
                    step_size = lr / (1 - b1 ** t)
                    denom = denom / math.sqrt(1 - b2 ** t)
                if wd:
                    p.mul_(1 - lr * wd)  # uses the weight before this update, like the official
                p.addcdiv_(m, denom.add_(eps), value=-step_size)
        return loss


def official_adam_hparams(lr: float, eps: float, weight_decay: float, betas: tuple[float, float],
                          t: int) -> tuple[float, float, float]:
    """``(lr', eps', wd')`` that make bias-corrected AdamW compute the *uncorrected* update.

    AdamW's update is ``lr' * (m / c1) / (sqrt(v / c2) + eps')`` with ``c1 = 1 - b1^t``,
    ``c2 = 1 - b2^t``. Choosing ``lr' = lr * c1 / sqrt(c2)`` and ``eps' = eps / sqrt(c2)`` turns it
    into ``lr * m / (sqrt(v) + eps)``, and ``wd' = wd * lr / lr'`` keeps the decay ``lr * wd * w``.
    This lets the GPU use torch's fused AdamW kernel for the official optimiser.
    """
    c1, c2 = 1 - betas[0] ** t, 1 - betas[1] ** t
    return lr * c1 / math.sqrt(c2), eps / math.sqrt(c2), weight_decay * math.sqrt(c2) / c1


def build_optimizer(model: nn.Module, t: TrainConfig,
                    device: torch.device) -> torch.optim.Optimizer:
    """The readable optimiser on CPU; torch's fused AdamW (same update) on a GPU."""
    groups = param_groups(model, t.weight_decay)
    betas = (t.adam_beta1, t.adam_beta2)
    if device.type != "cuda":
        return AdamWeightDecay(groups, lr=t.learning_rate, betas=betas, eps=t.adam_eps,
                               bias_correction=t.bias_correction)
    for g in groups:  # set_lr rescales these per step when emulating no bias correction
        g["base_weight_decay"], g["official_rescale"] = g["weight_decay"], not t.bias_correction
    return torch.optim.AdamW(groups, lr=t.learning_rate, betas=betas, eps=t.adam_eps, fused=True)


def set_lr(optimizer: torch.optim.Optimizer, lr: float, t: TrainConfig, step: int) -> None:
    """Set the hyper-parameters of update ``step`` (0-based).

    For the fused AdamW the step count is the loop's: with fp16, updates the gradient scaler
    skips still count, which shifts the emulated correction slightly during the first steps.
    """
    for group in optimizer.param_groups:
        group["lr"] = lr
        if group.get("official_rescale"):
            group["lr"], group["eps"], group["weight_decay"] = official_adam_hparams(
                lr, t.adam_eps, group["base_weight_decay"], group["betas"], step + 1)


# ----------------------------------------------------------------------------- 3. precision


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


# --------------------------------------------------------------------------- 4. checkpoints

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


# ------------------------------------------------------------------------------ 5. set-up


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
                ok = isinstance(value, (tuple, list))
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


def restore_trainer_state(ckpt: Path, optimizer, scaler, sampler: torch.Generator) -> int:
    """Load optimiser, scaler and RNG states from ``ckpt``; returns the step to continue from."""
    state = torch.load(ckpt / STATE_FILE, map_location="cpu", weights_only=True)
    optimizer.load_state_dict(state["optimizer"])
    if scaler is not None and state.get("scaler"):
        scaler.load_state_dict(state["scaler"])
    set_rng_state(state["rng"], sampler)
    return state["step"]


# ------------------------------------------------------------------------------ 6. the loop


class TrainingDiverged(RuntimeError):
    """The loss (or gradient norm) became NaN/inf; the last good checkpoint is kept."""


def train_step(model: nn.Module, batches: Iterator[dict], optimizer: torch.optim.Optimizer,
               scaler, *, t: TrainConfig, device: torch.device,
               sampler: torch.Generator) -> dict[str, torch.Tensor]:
    """One update: ``grad_accum`` micro-batches, clip, NaN check, optimiser step.

    Returns detached per-step sums (``tokens``) and means (losses, metrics, ``grad_norm``).
    Raises :class:`TrainingDiverged` *before* the update when the loss is not finite.
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
    if not finite.item():
        raise TrainingDiverged("non-finite loss")
    if scaler is not None:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    return stats


class _Logger:
    """Averages step statistics between log lines; writes ``metrics.jsonl`` and the tqdm bar."""

    def __init__(self, path: Path, bar, start_time: float):
        self.path, self.bar, self.start = path, bar, start_time
        self.sums: dict[str, torch.Tensor] = {}
        self.steps, self.last_time = 0, time.perf_counter()

    def add(self, stats: dict[str, torch.Tensor]) -> None:
        for k, v in stats.items():
            self.sums[k] = self.sums.get(k, 0.0) + v
        self.steps += 1

    def write(self, record: dict[str, Any]) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps(record) + "\n")

    def flush(self, step: int, lr: float) -> dict[str, Any] | None:
        if not self.steps:
            return None
        now = time.perf_counter()
        tokens = float(self.sums.pop("tokens"))
        record = {"kind": "train", "step": step, "lr": lr,
                  **{k: float(v) / self.steps for k, v in self.sums.items()},
                  "tokens_per_s": tokens / max(now - self.last_time, 1e-9),
                  "elapsed_s": now - self.start}
        self.write(record)
        self.bar.set_postfix(loss=f"{record['loss']:.3f}",
                             disc_acc=f"{record['disc_accuracy']:.3f}",
                             tok_s=f"{record['tokens_per_s']:.0f}", refresh=False)
        self.sums, self.steps, self.last_time = {}, 0, now
        return record


def _truncate_metrics(path: Path, step: int) -> None:
    """On resume, drop the log lines of steps after the checkpoint (they will be redone)."""
    if path.exists():
        keep = [ln for ln in path.read_text().splitlines()
                if ln.strip() and json.loads(ln).get("step", 0) <= step]
        path.write_text("".join(ln + "\n" for ln in keep))


def pretrain(cfg: RunConfig, *, resume: bool = False, progress: bool = True,
             until_step: int | None = None) -> dict[str, Any]:
    """Pre-train ELECTRA as ``cfg`` says; returns the held-out metrics and the checkpoint path.

    ``resume=True`` continues from the latest checkpoint in ``train.out_dir`` (same config
    required). ``until_step`` stops early (with a checkpoint) as an interruption would, without
    changing the schedule; the tests use it to split a run in two.
    """
    from tqdm.auto import tqdm

    from .evaluate import evaluate_model, heldout_batches
    from .pretraining_data import batch_iterator

    start_time = time.perf_counter()
    check_types(cfg)
    cfg.validate()
    t = cfg.train
    device = resolve_device(t)  # refuses fp16/bf16 without a GPU, before any data work
    out = Path(t.out_dir)
    ckpt = resume_point(cfg) if resume else None

    # Data and model. Seeding first makes the initial weights a function of train.seed.
    torch.manual_seed(t.seed)
    loaded = Electra.from_pretrained(ckpt) if ckpt is not None else None
    tokenizer, train_ds, heldout_ds = prepare_data(
        cfg, tokenizer=loaded.tokenizer if loaded is not None else None, progress=progress)
    set_token_ids(cfg, tokenizer)
    model = Electra(cfg.model, cfg.objective)
    if loaded is not None:
        model.load_state_dict(loaded.state_dict())
    model.tokenizer = tokenizer
    model.to(device).train()
    optimizer = build_optimizer(model, t, device)
    scaler = torch.amp.GradScaler("cuda") if t.precision == "fp16" else None
    sampler = torch.Generator(device=device).manual_seed(t.seed + 1)

    step = restore_trainer_state(ckpt, optimizer, scaler, sampler) if ckpt is not None else 0

    out.mkdir(parents=True, exist_ok=True)
    cfg.save(out / "config.json")
    tokenizer.save(out / "tokenizer")
    metrics_path = out / "metrics.jsonl"
    if ckpt is not None:
        _truncate_metrics(metrics_path, step)
    else:
        metrics_path.write_text("")

    net = torch.compile(model) if t.compile else model  # static shapes: compiles once
    batches = batch_iterator(train_ds, t.batch_size, seed=t.seed, start=step * t.grad_accum,
                             device=device)  # CPU tensors (pinned for cuda); moved in train_step
    eval_data = list(heldout_batches(heldout_ds, batch_size=t.batch_size,
                                     max_examples=t.eval_examples, device=device))

    def evaluate_now() -> dict[str, Any]:
        result = evaluate_model(model, eval_data, seed=t.seed, precision=t.precision)
        logger.write({"kind": "eval", "step": step, **result,
                      "elapsed_s": time.perf_counter() - start_time})
        return result

    def checkpoint() -> Path:
        state = trainer_state(step, optimizer, scaler, sampler, t)
        path = save_checkpoint(out, step, model, state, cfg)
        prune_checkpoints(out, t)
        return path

    bar = tqdm(total=t.max_steps, initial=step, disable=not progress, desc="pretrain",
               dynamic_ncols=True)
    logger = _Logger(metrics_path, bar, start_time)
    milestones = milestone_steps(t)
    last_saved = ckpt
    stop = "max_steps"
    while step < t.max_steps:
        if until_step is not None and step >= until_step:
            stop = "until_step"
            break
        if t.max_minutes and time.perf_counter() - start_time >= 60 * t.max_minutes:
            stop = "max_minutes"
            break
        lr = lr_at(step, t)
        set_lr(optimizer, lr, t, step)
        try:
            stats = train_step(net, batches, optimizer, scaler, t=t, device=device,
                               sampler=sampler)
        except TrainingDiverged:
            bar.close()
            raise TrainingDiverged(
                f"loss became NaN/inf at step {step + 1}; stopped without saving. Last good "
                f"checkpoint: {last_saved or 'none'}") from None
        step += 1
        bar.update(1)
        logger.add(stats)
        if step % t.log_every == 0:
            logger.flush(step, lr)
        if t.eval_every and step % t.eval_every == 0 and step < t.max_steps:
            evaluate_now()
        if step < t.max_steps and ((t.save_every and step % t.save_every == 0)
                                   or step in milestones):
            last_saved = checkpoint()
    logger.flush(step, lr_at(max(step - 1, 0), t))
    bar.close()
    result = evaluate_now()
    saved_now = last_saved is not None and last_saved.name == f"step_{step:07d}"
    path = last_saved if saved_now else checkpoint()
    summary = {"step": step, "stopped_by": stop, "checkpoint": str(path), "out_dir": str(out),
               "elapsed_s": round(time.perf_counter() - start_time, 1), "heldout": result}
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
