"""ELECTRA pre-training in one readable loop: the algorithm and nothing else.

Each step: take a batch, mask 15% of it, let the generator predict the masked tokens, sample
replacements from it, let the discriminator find them, add the two losses (the discriminator's
weighted by 50), take an optimiser step. Paper section 2; the official code's
``run_pretraining.py``. The pieces are the library's own (:mod:`minielectra.model.electra`), called
in the order ``Electra.forward`` calls them.

The library's loop (:func:`.loop.pretrain`) does the same updates and adds what a real run needs;
``tests/test_minimal.py`` checks that both give the same losses, step for step.

Example::

    from minielectra import minimal_pretrain, preset, apply_overrides
    cfg = apply_overrides(preset("nano"), ["train.max_steps=20"])
    history = minimal_pretrain(cfg)          # [{"step": 1, "loss": ..., ...}, ...]
"""

from __future__ import annotations

import torch

from ..config import RunConfig
from ..data.dataset import batch_iterator
from ..model.electra import (Electra, gumbel_max_sample, mask_tokens, masked_lm_loss,
                             replace_tokens, replaced_bce)
from .device import resolve_device
from .inputs import prepare_data, set_token_ids
from .optim import build_optimizer, lr_at, set_lr
from .ranks import seed_slice


def minimal_pretrain(cfg: RunConfig, *, steps: int | None = None) -> list[dict[str, float]]:
    """Pre-train ELECTRA as ``cfg`` says for ``steps`` updates (default ``train.max_steps``);
    returns each step's losses. Same seed, same losses as :func:`.loop.pretrain`."""
    t, obj = cfg.validate().train, cfg.objective
    if t.grad_accum != 1 or t.precision != "fp32" or obj.name != "electra":
        raise ValueError("minimal_pretrain takes one fp32 batch a step of ELECTRA's objective "
                         "(train.grad_accum=1, train.precision=fp32, objective.name=electra); "
                         "pretrain() does the rest")
    device = resolve_device(t)
    torch.manual_seed(t.seed)  # first: the initial weights are a function of the seed
    tokenizer, train_ds, _ = prepare_data(cfg, progress=False)
    set_token_ids(cfg, tokenizer)  # the model's vocabulary and special ids: the tokenizer's
    model = Electra(cfg.model, obj).to(device).train()
    optimizer = build_optimizer(model, t, device)
    batches = batch_iterator(train_ds, t.batch_size, seed=t.seed, device=device)
    history = []
    for step in range(t.max_steps if steps is None else steps):
        seed_slice(t.seed, step)  # this step's masks, samples and dropout, as pretrain() draws
        batch = {k: v.to(device) for k, v in next(batches).items()}
        ids, attn, types = batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]

        # 1. mask: pick ~15% of the positions; 85% of those become [MASK]
        masked = mask_tokens(ids, attn, model.config, obj)
        # 2. the generator predicts the original token at each masked slot: (b, p, v)
        gen_logits = model.generator.slot_logits(masked.input_ids, attn, types, masked.positions)
        gen_loss = masked_lm_loss(gen_logits, masked)
        # 3. sample a replacement from the generator (no gradient through the sample)
        sampled = gumbel_max_sample(gen_logits, temperature=obj.temperature)
        corrupted, is_replaced = replace_tokens(ids, attn, masked, sampled)  # (b, n) each
        # 4. the discriminator says, for every token, whether it was replaced: (b, n)
        disc_logits = model.discriminator(corrupted, attn, types)
        disc_loss = replaced_bce(disc_logits, is_replaced, attn.float())
        # 5. one loss for both networks; they meet in the shared embeddings
        loss = obj.gen_weight * gen_loss + obj.disc_weight * disc_loss

        # 6. step: the official schedule, clipping at global norm 1.0, Adam with weight decay
        set_lr(optimizer, lr_at(step, t), t, step)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), t.grad_clip)
        optimizer.step()
        history.append({"step": step + 1, "loss": loss.item(), "gen_loss": gen_loss.item(),
                        "disc_loss": disc_loss.item()})
    return history
