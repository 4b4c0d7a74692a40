"""The masked-language-model objectives of paper Table 5: BERT's MLM and the two steps between it
and ELECTRA (Clark et al. 2020, section 3.2, "Replace MLM" and "All-Tokens MLM").

In all three the network we keep predicts token *identities* with an MLM head; it is
``model.discriminator.encoder`` with the head ``model.disc_mlm`` (:class:`MaskedLMBaseline`, an
:class:`~minielectra.model.electra.Electra` with that head added), so the checkpoint format and
fine-tuning are those of an ELECTRA discriminator.

- ``mlm``: BERT. Mask 15% of the tokens; of those 80% become [MASK], 10% a random token, 10%
  stay as they are; predict the originals at the masked positions only. No generator runs.
- ``replace-mlm``: ELECTRA's generator corrupts the input as in ELECTRA (its own MLM loss,
  trained jointly); the kept network predicts the originals at the masked positions. The paper
  uses it to measure what [MASK] tokens in pre-training (and their absence in fine-tuning) cost.
- ``all-tokens-mlm``: the same corrupted input, but the originals of *all* tokens are predicted,
  through the paper's copy mechanism: a sigmoid gate ``D`` (the discriminator's own head) puts
  ``D`` on the input token and ``1 - D`` on the softmax,
  ``P(x_t | corrupted) = D * 1[x_t = input_t] + (1 - D) * softmax(...)[x_t]``.

Every function returns an :class:`ElectraOutput`; ``disc_loss`` is the kept network's loss and
``gen_loss`` the generator's (0 for ``mlm``). Axis letters: b batch, n sequence, p masked slots,
v vocabulary.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F

from ..config import ObjectiveConfig
from ..model.electra import (Electra, ElectraOutput, Generator, MaskedInputs, mask_tokens,
                              masked_accuracy, masked_lm_loss)

MLM_OBJECTIVES = ("mlm", "replace-mlm", "all-tokens-mlm")


class MaskedLMBaseline(Electra):
    """ELECTRA's networks plus ``disc_mlm``, an MLM head on the discriminator's encoder (whose
    output matrix is the discriminator's word embeddings). ``mlm`` runs no generator."""

    trains = MLM_OBJECTIVES

    def build(self) -> None:
        super().build(generator=self.objective.name != "mlm")  # BERT corrupts with [MASK] only
        self.disc_mlm = Generator(self.config, encoder=self.discriminator.encoder)


def bert_masking(model) -> ObjectiveConfig:
    """The objective config with BERT's 80/10/10 (ELECTRA's generator input uses 85/15/0)."""
    return dataclasses.replace(model.objective, mask_token_prob=0.8, random_token_prob=0.1)


def _fractions(masked: MaskedInputs, attention_mask: torch.Tensor) -> dict[str, torch.Tensor]:
    return {"masked_fraction": masked.weights.sum().detach() / attention_mask.sum().clamp_min(1)}


def mlm(model, input_ids, attention_mask, token_type_ids=None, *,
        generator: torch.Generator | None = None) -> ElectraOutput:
    """BERT's masked LM on the encoder we keep (the baseline of paper Tables 1 and 5)."""
    masked = mask_tokens(input_ids, attention_mask, model.config, bert_masking(model),
                         generator=generator)
    logits = model.disc_mlm.slot_logits(masked.input_ids, attention_mask, token_type_ids,
                                        masked.positions)  # (b, p, v)
    loss, accuracy = masked_lm_loss(logits, masked), masked_accuracy(logits, masked)
    metrics = {"mlm_accuracy": accuracy, **_fractions(masked, attention_mask)}
    return ElectraOutput(loss=loss, gen_loss=loss.new_zeros(()), disc_loss=loss, metrics=metrics,
                         corrupted_ids=masked.input_ids, masked=masked, gen_logits=logits)


def replace_mlm(model, input_ids, attention_mask, token_type_ids=None, *,
                generator: torch.Generator | None = None) -> ElectraOutput:
    """MLM on generator samples instead of [MASK]: loss at the masked positions only."""
    c = model.corrupt(input_ids, attention_mask, token_type_ids, generator=generator)
    logits = model.disc_mlm.slot_logits(c.corrupted_ids, attention_mask, token_type_ids,
                                        c.masked.positions)  # (b, p, v): originals from corrupted
    loss, accuracy = masked_lm_loss(logits, c.masked), masked_accuracy(logits, c.masked)
    # The generator keeps its usual MLM loss (weight gen_weight); the kept network's loss is a
    # cross-entropy like the generator's, so it gets weight 1, not ELECTRA's 50 (that weight
    # balances a binary loss against a 30k-way one).
    metrics = {"mlm_accuracy": accuracy, "gen_accuracy": masked_accuracy(c.gen_logits, c.masked),
               "replaced_fraction": c.is_replaced.sum() / attention_mask.sum().clamp_min(1),
               **_fractions(c.masked, attention_mask)}
    return ElectraOutput(loss=model.objective.gen_weight * c.gen_loss + loss,
                         gen_loss=c.gen_loss, disc_loss=loss, metrics=metrics,
                         corrupted_ids=c.corrupted_ids, is_replaced=c.is_replaced,
                         masked=c.masked, gen_logits=c.gen_logits, sampled_ids=c.sampled_ids)


def copy_log_prob(vocab_logits: torch.Tensor, gate_logits: torch.Tensor,
                  input_ids: torch.Tensor, targets: torch.Tensor, *,
                  log_probs: torch.Tensor | None = None) -> torch.Tensor:
    """``log P(target)`` under the copy mechanism, ``(b, n)``.

    ``P = D * 1[target = input] + (1 - D) * softmax(vocab_logits)[target]`` with
    ``D = sigmoid(gate_logits)``, computed in log space: ``log(1 - D) = logsigmoid(-z)``.
    ``log_probs``: ``vocab_logits``' log-softmax, when the caller has it already.
    """
    if log_probs is None:
        log_probs = vocab_logits.float().log_softmax(-1)  # (b, n, v)
    log_softmax = log_probs.gather(-1, targets[..., None])[..., 0]
    from_softmax = F.logsigmoid(-gate_logits.float()) + log_softmax
    copied = F.logsigmoid(gate_logits.float())
    copied = copied.masked_fill(input_ids != targets, float("-inf"))  # nothing to copy
    return torch.logaddexp(copied, from_softmax)


def all_tokens_mlm(model, input_ids, attention_mask, token_type_ids=None, *,
                   generator: torch.Generator | None = None) -> ElectraOutput:
    """Predict every token's original from the corrupted input, with the copy gate."""
    c = model.corrupt(input_ids, attention_mask, token_type_ids, generator=generator)
    corrupted, masked = c.corrupted_ids, c.masked
    hidden = model.discriminator.encoder(corrupted, attention_mask, token_type_ids)  # (b, n, d)
    vocab_logits = model.disc_mlm.mlm_logits(hidden)  # (b, n, v): every position this time
    # The gate is the discriminator's own head: D(x_t) ~ P(original), the mirror of ELECTRA's.
    gate_logits = model.discriminator.head(hidden)  # (b, n)
    # The step's largest tensor, (b, n, v) in float32: normalised once, for the loss and metrics.
    log_probs = vocab_logits.float().log_softmax(-1)
    log_p = copy_log_prob(vocab_logits, gate_logits, corrupted, input_ids,
                          log_probs=log_probs)  # (b, n)
    w = attention_mask.float()  # every real token, as ELECTRA's discriminator loss
    loss = -(log_p * w).sum() / (w.sum() + 1e-6)
    with torch.no_grad():
        p_copy = torch.sigmoid(gate_logits.float())
        p_token = p_copy * (corrupted == input_ids) + (1 - p_copy) * log_probs.gather(
            -1, corrupted[..., None])[..., 0].exp()  # P(the input token) under the model
        pred = torch.where(p_token > 0.5, corrupted, vocab_logits.argmax(-1))
        real = attention_mask.bool()
        slots = masked.weights.bool()
        pred_slots = pred.gather(1, masked.positions)
    metrics = {"all_token_accuracy": ((pred == input_ids) & real).sum() / real.sum().clamp_min(1),
               "mlm_accuracy": ((pred_slots == masked.targets) & slots).sum()
               / slots.sum().clamp_min(1),
               "gen_accuracy": masked_accuracy(c.gen_logits, masked),
               "replaced_fraction": c.is_replaced.sum() / real.sum().clamp_min(1),
               **_fractions(masked, attention_mask)}
    return ElectraOutput(loss=model.objective.gen_weight * c.gen_loss + loss,
                         gen_loss=c.gen_loss, disc_loss=loss, metrics=metrics,
                         corrupted_ids=corrupted, is_replaced=c.is_replaced,
                         disc_logits=-gate_logits, masked=masked, gen_logits=c.gen_logits,
                         sampled_ids=c.sampled_ids)
