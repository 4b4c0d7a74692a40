"""Lesson 05's check: the learner's training step, three steps beside the library's on a tiny
model; a disagreement is traced to the step it comes from (the loss, the schedule, clipping,
the cleared gradients)."""

from __future__ import annotations

import copy
import math
from typing import Callable

import torch

from ..config import ModelConfig, ObjectiveConfig, TrainConfig
from ..model.electra import (Electra, gumbel_max_sample, mask_tokens, masked_lm_loss,
                             replace_tokens, replaced_bce)
from ..training.optim import build_optimizer, lr_at, set_lr
from ..training.ranks import seed_slice
from .judge import NotYet


# ------------------------------------------------------------- 05 one step of ELECTRA's loop


TINY = ModelConfig(vocab_size=40, embedding_size=16, hidden_size=16, num_layers=1, num_heads=2,
                   intermediate_size=32, max_position_embeddings=16, generator_size=0.5,
                   cls_token_id=1, sep_token_id=2, mask_token_id=3)
TINY_TRAIN = TrainConfig(batch_size=4, max_steps=10, learning_rate=2e-2, warmup_steps=2,
                         device="cpu", seed=3, grad_clip=0.5)


def library_step(model, opt, batch, step: int, t: TrainConfig, obj: ObjectiveConfig):
    """One update of :func:`~minielectra.training.minimal.minimal_pretrain`; returns the loss."""
    seed_slice(t.seed, step)
    ids, attn, types = batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]
    masked = mask_tokens(ids, attn, model.config, obj)
    gen_logits = model.generator.slot_logits(masked.input_ids, attn, types, masked.positions)
    gen_loss = masked_lm_loss(gen_logits, masked)
    sampled = gumbel_max_sample(gen_logits, temperature=obj.temperature)
    corrupted, is_replaced = replace_tokens(ids, attn, masked, sampled)
    disc_loss = replaced_bce(model.discriminator(corrupted, attn, types), is_replaced,
                             attn.float())
    loss = obj.gen_weight * gen_loss + obj.disc_weight * disc_loss
    set_lr(opt, lr_at(step, t), t, step)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), t.grad_clip)
    opt.step()
    return loss


def _step_setup():
    torch.manual_seed(0)
    obj = ObjectiveConfig()
    model = Electra(TINY, obj)
    g = torch.Generator().manual_seed(0)
    batches = []
    for _ in range(3):
        ids = torch.randint(4, TINY.vocab_size, (4, 12), generator=g)
        ids[:, 0], ids[:, -1] = TINY.cls_token_id, TINY.sep_token_id
        attn = torch.ones_like(ids)
        attn[1, 9:] = 0  # one padded row
        batches.append({"input_ids": ids * attn, "attention_mask": attn,
                        "token_type_ids": torch.zeros_like(ids)})
    return model, obj, batches


def _run_steps(step_fn, model, obj, batches):
    opt = build_optimizer(model, TINY_TRAIN, torch.device("cpu"))
    out = []
    for step, batch in enumerate(batches):
        seed_slice(99, step)  # a step that forgets to reseed draws from this state
        loss = step_fn(model, opt, batch, step, TINY_TRAIN, obj)
        out.append({"loss": float(torch.as_tensor(loss).detach()), "lr": opt.param_groups[0]["lr"],
                    "grad_norm": float(torch.nn.utils.get_total_norm(
                        [p.grad for p in model.parameters() if p.grad is not None])),
                    "params": [p.detach().clone() for p in model.parameters()]})
    return out


def check_step(electra_step: Callable) -> Callable:
    """Lesson 05: ``electra_step(model, opt, batch, step, t, obj) -> loss``: seed the step,
    mask, generate, sample, discriminate, the joint loss, then the update. Three steps on a
    tiny model, side by side with the library's."""
    model, obj, batches = _step_setup()
    ref = _run_steps(library_step, copy.deepcopy(model), obj, batches)
    try:
        got = _run_steps(electra_step, model, obj, batches)
    except NotImplementedError:
        print("`electra_step` is not written yet: fill in its stub above and run this cell "
              "again. The lesson goes on with the library's version.")
        return library_step
    bad = lambda msg: NotYet(f"`electra_step` is not right yet: {msg}")  # noqa: E731
    for step, (r, s) in enumerate(zip(ref, got)):
        if not math.isclose(s["loss"], r["loss"], rel_tol=1e-4):
            if step == 0:
                gen_only = ObjectiveConfig(disc_weight=1.0)
                m2, _, _ = _step_setup()
                plain = _run_steps(library_step, m2, gen_only, batches[:1])[0]["loss"]
                if math.isclose(s["loss"], plain, rel_tol=1e-4):
                    raise bad("the loss adds the two losses as they are; the discriminator's "
                              "is weighted by obj.disc_weight (50).")
                raise bad("the first step's loss differs: did you reseed with "
                          "seed_slice(t.seed, step) first, and compute the generator's loss on "
                          "the masked slots and the discriminator's on every real token?")
            raise bad(f"step {step + 1}'s loss differs though step 1's agrees: is every step "
                      "seeded with seed_slice(t.seed, step), with its own step number?")
        if not math.isclose(s["lr"], r["lr"], rel_tol=1e-6):
            raise bad(f"the learning rate at step {step + 1} is {s['lr']:.3g}, not lr_at(step, "
                      f"t) = {r['lr']:.3g}: set it on every parameter group before the update.")
        if s["grad_norm"] > TINY_TRAIN.grad_clip * 1.001:
            raise bad(f"the gradient norm is {s['grad_norm']:.2f} at the update, above "
                      f"t.grad_clip = {TINY_TRAIN.grad_clip}: clip it with "
                      "clip_grad_norm_ after backward() and before opt.step().")
        if not all(torch.allclose(a, b, rtol=1e-4, atol=1e-6)
                   for a, b in zip(s["params"], r["params"])):
            raise bad("the gradients accumulate across steps: did you clear them with "
                      "opt.zero_grad() before backward()?" if step > 0 else
                      "the weights after the first update differ: call loss.backward(), then "
                      "clip, then opt.step(), once each.")
    print("`electra_step` is right: three steps give the library's losses, learning rates and "
          "weights.")
    return electra_step
