"""ELECTRA's variants that keep a discriminator (paper section 3.2 and appendix F).

- ``electra-15`` (Table 5): ELECTRA, but the discriminator's loss comes only from the ~15% of
  positions that were masked, as an MLM's does. It isolates the gain of learning from all tokens.
- ``two-stage`` training: train the generator alone (MLM) for ``two_stage_fraction`` of the
  steps; then initialise the discriminator's encoder with the generator's (they must have the same
  shape: ``model.generator_size=1.0``), freeze the generator and train only the discriminator.
  With ``model.tying=embeddings`` the shared embeddings go on learning from the discriminator;
  ``tying=none`` freezes the generator entirely, as the paper describes.
- ``adversarial`` generator: the generator is also trained to *fool* the discriminator. The
  sample is discrete, so the gradient is REINFORCE's: reward = the discriminator's loss on the
  sampled token, ``-(r - b) log p_G(sample)``. Our baseline ``b`` is the batch's mean reward
  (the paper learns one: a simpler variant). The MLE loss stays at ``gen_weight`` (set it to 0
  for a purely adversarial generator). The paper reports its generator's MLM accuracy, 58% vs
  65% for an MLE one: ``gen_accuracy`` in our logs.

Axis letters: b batch, n sequence, p masked slots, v vocabulary.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..config import ObjectiveConfig
from ..model.electra import ElectraOutput, masked_accuracy, replaced_bce


def electra_15(model, input_ids, attention_mask, token_type_ids=None, *,
               generator: torch.Generator | None = None) -> ElectraOutput:
    """ELECTRA with the discriminator's BCE averaged over the masked slots only."""
    out = model(input_ids, attention_mask, token_type_ids, generator=generator)
    w = out.masked.weights  # (b, p)
    logits = out.disc_logits.gather(1, out.masked.positions).float()  # (b, p)
    labels = out.is_replaced.gather(1, out.masked.positions)
    out.disc_loss = replaced_bce(logits, labels, w)
    obj = model.objective
    out.loss = obj.gen_weight * out.gen_loss + obj.disc_weight * out.disc_loss
    return out


def switch_step(obj: ObjectiveConfig, max_steps: int) -> int:
    """The first step of two-stage training's second stage."""
    return max(1, round(obj.two_stage_fraction * max_steps))


def two_stage(model, input_ids, attention_mask, token_type_ids=None, *,
              generator: torch.Generator | None = None, step: int,
              max_steps: int) -> ElectraOutput:
    """Stage 1 (``step < switch``): the generator's MLM loss alone. Stage 2: the discriminator's
    loss alone, the generator run without gradients; at the switch the discriminator's encoder
    is overwritten with the generator's (a function of the step, so a resumed run agrees)."""
    switch = switch_step(model.objective, max_steps)
    obj = model.objective
    if step < switch:
        c = model.corrupt(input_ids, attention_mask, token_type_ids, generator=generator)
        zero = c.gen_loss.new_zeros(())
        metrics = {"gen_accuracy": masked_accuracy(c.gen_logits, c.masked), "stage": zero + 1}
        return ElectraOutput(loss=obj.gen_weight * c.gen_loss, gen_loss=c.gen_loss,
                             disc_loss=zero, metrics=metrics, masked=c.masked,
                             gen_logits=c.gen_logits)
    if step == switch:
        with torch.no_grad():
            model.discriminator.encoder.load_state_dict(model.generator.encoder.state_dict())
    with torch.no_grad():  # frozen: no graph, no gradient
        c = model.corrupt(input_ids, attention_mask, token_type_ids, generator=generator)
    disc_logits = model.discriminator(c.corrupted_ids, attention_mask, token_type_ids)  # (b, n)
    disc_loss = replaced_bce(disc_logits, c.is_replaced, attention_mask.float())
    metrics = {"gen_accuracy": masked_accuracy(c.gen_logits, c.masked),
               "stage": c.gen_loss.new_ones(()) * 2,
               "disc_accuracy": (((disc_logits > 0) == c.is_replaced) & attention_mask.bool()).sum()
               / attention_mask.sum().clamp_min(1)}
    return ElectraOutput(loss=obj.disc_weight * disc_loss, gen_loss=c.gen_loss,
                         disc_loss=disc_loss, metrics=metrics, corrupted_ids=c.corrupted_ids,
                         is_replaced=c.is_replaced, disc_logits=disc_logits, masked=c.masked,
                         gen_logits=c.gen_logits, sampled_ids=c.sampled_ids)


def reinforce_loss(out: ElectraOutput) -> torch.Tensor:
    """The policy-gradient loss of an adversarial generator: ``-(r - b) log p_G(sample)`` over
    the used slots, ``r`` the discriminator's BCE on the sampled token (detached), ``b`` its
    mean. Minimising it raises the probability of samples the discriminator gets wrong."""
    w = out.masked.weights  # (b, p)
    positions = out.masked.positions
    logits = out.disc_logits.gather(1, positions).detach().float()  # (b, p)
    labels = out.is_replaced.gather(1, positions).float()
    reward = F.binary_cross_entropy_with_logits(logits, labels, reduction="none")  # (b, p)
    baseline = (reward * w).sum() / w.sum().clamp_min(1)
    log_p = out.gen_logits.float().log_softmax(-1).gather(-1, out.sampled_ids[..., None])[..., 0]
    return -((reward - baseline) * log_p * w).sum() / w.sum().clamp_min(1)


def adversarial(model, input_ids, attention_mask, token_type_ids=None, *,
                generator: torch.Generator | None = None) -> ElectraOutput:
    """Joint ELECTRA plus ``adversarial_weight`` times the REINFORCE loss of the generator."""
    out = model(input_ids, attention_mask, token_type_ids, generator=generator)
    adv = reinforce_loss(out)
    out.loss = out.loss + model.objective.adversarial_weight * adv
    out.metrics["adversarial_loss"] = adv.detach()
    return out
