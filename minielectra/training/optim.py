"""The official optimiser and learning-rate schedule (google-research/electra
``model/optimization.py``; values and sources: ``tutorial/appendix_official_recipe.md`` A.1).

In file order: the schedule, the parameter groups, the optimiser (Adam with decoupled weight
decay and, by default, no bias correction), torch's fused AdamW made to compute the same update
on a GPU, and resuming with this machine's settings. Fine-tuning uses the same.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from ..config import TrainConfig

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


# ---------------------------------------------------------------------- 2. parameter groups


def param_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Two groups: decayed weights, and LayerNorm/bias parameters (the official optimiser
    skips any variable named ``LayerNorm`` or ``bias``). ``named_parameters`` yields a tied
    tensor once, so the shared embeddings are updated, and decayed, once per step."""
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


# ----------------------------------------------------------------------------- 3. optimiser


class AdamWeightDecay(torch.optim.Optimizer):
    """The official ``AdamWeightDecayOptimizer``, readable, with optional bias correction.

    For each parameter ``w`` with gradient ``g`` (``t`` counts updates from 1)::

        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g^2
        m_hat, v_hat = m, v                                  # official: no bias correction
        m_hat, v_hat = m / (1 - b1^t), v / (1 - b2^t)        # bias_correction=True (= AdamW)
        w = w - lr * (m_hat / (sqrt(v_hat) + eps) + weight_decay * w)

    The decay is *decoupled* (Loshchilov & Hutter): Adam's scaling does not touch it. Without
    bias correction the early updates are *larger*, by ``(1 - b1^t) / sqrt(1 - b2^t)`` (6.5 at
    t=10): the official 10,000 warm-up steps hide that, the CPU presets' short warmups do not,
    hence ``bias_correction=True`` there (tutorial chapter 05 has the numbers). State keys
    match ``torch.optim.AdamW``, so a GPU checkpoint (fused AdamW) resumes here and vice versa.
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
            for t, params in self._by_step_count(group).items():
                self._update(group, t, params)
        return loss

    def _by_step_count(self, group) -> dict[float, list[torch.Tensor]]:
        """The group's parameters with a gradient, by their update count ``t`` after this one
        (one list unless some parameter missed an earlier update)."""
        out: dict[float, list[torch.Tensor]] = {}
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self.state[p]
            if not state:  # the step count lives on the CPU: reading it never waits for a GPU
                state["step"] = torch.tensor(0.0)
                state["exp_avg"] = torch.zeros_like(p)
                state["exp_avg_sq"] = torch.zeros_like(p)
            state["step"] += 1
            out.setdefault(state["step"].item(), []).append(p)
        return out

    def _update(self, group, t: float, params: list[torch.Tensor]) -> None:
        """The update above for ``params``, all at update ``t``. Each ``_foreach`` call applies
        one operation to every tensor of the list: the arithmetic of a per-parameter loop, in
        one call instead of one per parameter (a small model has ~60 of them)."""
        b1, b2 = group["betas"]
        lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
        grads = [p.grad for p in params]
        m = [self.state[p]["exp_avg"] for p in params]
        v = [self.state[p]["exp_avg_sq"] for p in params]
        torch._foreach_lerp_(m, grads, 1 - b1)  # m = b1 m + (1 - b1) g
        torch._foreach_mul_(v, b2)
        torch._foreach_addcmul_(v, grads, grads, value=1 - b2)
        step_size, denom = lr, torch._foreach_sqrt(v)
        if group["bias_correction"]:
            step_size = lr / (1 - b1 ** t)
            torch._foreach_div_(denom, math.sqrt(1 - b2 ** t))
        if wd:
            torch._foreach_mul_(params, 1 - lr * wd)  # the weight before this update (official)
        torch._foreach_add_(denom, eps)
        torch._foreach_addcdiv_(params, m, denom, value=-step_size)


# ------------------------------------------------------------------------------ 4. on a GPU


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
    """Set the hyper-parameters of update ``step`` (0-based). For the fused AdamW the step
    count is the loop's: with fp16, updates the scaler skips still count."""
    for group in optimizer.param_groups:
        group["lr"] = lr
        if group.get("official_rescale"):
            group["lr"], group["eps"], group["weight_decay"] = official_adam_hparams(
                lr, t.adam_eps, group["base_weight_decay"], group["betas"], step + 1)


# -------------------------------------------------------------------------------- 5. resume


def load_optimizer_state(optimizer: torch.optim.Optimizer, saved: dict[str, Any]) -> None:
    """Load the moments and step counts of ``saved``, keeping ``optimizer``'s own settings:
    ``Optimizer.load_state_dict`` would bring a GPU checkpoint's ``fused=True`` to a CPU (or
    lack ``bias_correction``). The settings follow from the config and this device."""
    ours = [{k: v for k, v in g.items() if k != "params"} for g in optimizer.param_groups]
    if len(ours) != len(saved["param_groups"]):
        raise ValueError(f"optimizer state has {len(saved['param_groups'])} parameter groups, "
                         f"this optimizer {len(ours)}")
    groups = [{**settings, "params": g["params"]}
              for settings, g in zip(ours, saved["param_groups"])]
    optimizer.load_state_dict({"state": saved["state"], "param_groups": groups})
