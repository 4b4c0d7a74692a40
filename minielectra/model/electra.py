"""ELECTRA: replaced token detection (Clark, Luong, Le, Manning, ICLR 2020).

Read top to bottom, this file is the paper's section 2:

1. **Mask** about 15% of the tokens (:func:`mask_tokens`).
2. A small **generator**, a masked language model, predicts the originals at the masked
   positions (:class:`Generator`), trained with the usual MLM cross-entropy.
3. **Sample** a replacement for each masked token from the generator's softmax
   (:func:`gumbel_max_sample`); no gradient flows back through the sample.
4. Put the samples into the original text (:func:`replace_tokens`): some are the original token
   again (those count as *original*), the rest are plausible fakes.
5. The **discriminator** (:class:`Discriminator`) labels *every* token as original or replaced.
   Its loss is over all tokens, not 15%, which is where ELECTRA's efficiency comes from.
6. Train both at once on ``L_MLM + 50 * L_Disc`` (:class:`Electra`). Only the discriminator is
   kept for fine-tuning.

Facts about the official implementation (google-research/electra) are cited where they are used;
see ``tutorial/appendix_official_recipe.md`` sections A.1-A.2. Axis letters: b batch, n sequence,
p masked slots per sequence, d width, v vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from ..config import ModelConfig, ObjectiveConfig
from .cpu import Linear, linear
from .transformer import Embeddings, Encoder, init_sinusoidal_positions, init_weights

# ----------------------------------------------------------------------------- 1. masking


@dataclass
class MaskedInputs:
    """The masked copy of a batch and where it was masked."""

    input_ids: torch.Tensor  # (b, n) with [MASK] at most selected positions
    positions: torch.Tensor  # (b, p) selected positions; slots with weight 0 are unused
    weights: torch.Tensor  # (b, p) 1.0 for a used slot, 0.0 for an unused one
    targets: torch.Tensor  # (b, p) the original ids at `positions`


def max_predictions(seq_len: int, mask_prob: float) -> int:
    """Masked slots per sequence: ``int((mask_prob + 0.005) * n)``, 19 at n=128 (official)."""
    return max(1, int((mask_prob + 0.005) * seq_len))


def _scatter(x: torch.Tensor, positions: torch.Tensor, values: torch.Tensor,
             active: torch.Tensor) -> torch.Tensor:
    """Write ``values`` (b, p) into ``x`` (b, n) at ``positions`` where ``active``.

    Inactive slots write into a spare column that is then dropped, so shapes stay static (one
    torch.compile graph). Two active slots on one position (only with replacement) receive the
    integer mean of their values, which is what the official ``scatter_update`` does.
    """
    b, n = x.shape
    spare = torch.full_like(positions, n)
    idx = torch.where(active, positions, spare)
    padded = torch.cat([x, x[:, :1]], dim=1)  # (b, n + 1)
    out = padded.scatter_reduce(1, idx, values.to(x.dtype), reduce="mean", include_self=False)
    return out[:, :n]


def mask_tokens(input_ids: torch.Tensor, attention_mask: torch.Tensor, cfg: ModelConfig,
                obj: ObjectiveConfig, *, generator: torch.Generator | None = None) -> MaskedInputs:
    """Choose positions to mask and replace most of them with [MASK] (official ``mask()``).

    Per sequence, ``round(mask_prob * non-padding tokens)`` positions (at least 1, at most
    :func:`max_predictions`) are drawn among the candidates: every real token except [CLS],
    [SEP] and [MASK]. Of these, ``mask_token_prob`` become [MASK], ``random_token_prob`` a random
    token and the rest keep their original id (official: 85% [MASK], 15% kept, 0% random;
    BERT: 80% [MASK], 10% random, 10% kept).
    """
    b, n = input_ids.shape
    p = max_predictions(n, obj.mask_prob)
    device = input_ids.device
    specials = torch.tensor([cfg.cls_token_id, cfg.sep_token_id, cfg.mask_token_id,
                             cfg.pad_token_id], device=device)
    candidates = attention_mask.bool() & ~torch.isin(input_ids, specials)  # (b, n)
    num_tokens = attention_mask.sum(-1).float()  # the official count includes [CLS] and [SEP]
    count = torch.round(num_tokens * obj.mask_prob).long().clamp(1, p)  # (b,)

    if obj.mask_sampling == "with_replacement":
        # The official code draws p positions from a categorical over candidates, so the same
        # position can come twice: fewer distinct tokens are masked than `count` says.
        probs = candidates.float() + (~candidates.any(-1, keepdim=True)).float()  # no NaN rows
        positions = torch.multinomial(probs, p, replacement=True, generator=generator)
    else:
        # Random scores, candidates first: the top p are a uniform sample without replacement.
        scores = torch.rand(b, n, device=device, generator=generator)
        scores = scores.masked_fill(~candidates, -1.0)
        positions = scores.topk(p, dim=-1).indices  # (b, p)
        count = torch.minimum(count, candidates.sum(-1))
    slot = torch.arange(p, device=device)
    used = (slot[None, :] < count[:, None]) & candidates.gather(1, positions)  # (b, p)

    u = torch.rand(b, p, device=device, generator=generator)
    to_mask = used & (u < obj.mask_token_prob)
    to_random = used & (u >= obj.mask_token_prob) & (u < obj.mask_token_prob + obj.random_token_prob)
    # Any id, specials included, as BERT's 10% random tokens (the official ELECTRA uses none).
    random_ids = torch.randint(cfg.vocab_size, (b, p), device=device, generator=generator)
    masked = _scatter(input_ids, positions, torch.full_like(positions, cfg.mask_token_id), to_mask)
    masked = _scatter(masked, positions, random_ids, to_random)
    return MaskedInputs(masked, positions, used.float(), input_ids.gather(1, positions))


# ------------------------------------------------------------------- 2. the generator (an MLM)


class Generator(nn.Module):
    """A narrow BERT with an MLM head whose output matrix *is* the word-embedding matrix."""

    def __init__(self, cfg: ModelConfig, *, encoder: Encoder | None = None,
                 embeddings: Embeddings | None = None):
        super().__init__()
        self.encoder = encoder if encoder is not None else Encoder(cfg, embeddings=embeddings)
        self.head_dense = Linear(cfg.hidden_size, cfg.embedding_size)
        self.head_norm = nn.LayerNorm(cfg.embedding_size, eps=cfg.layer_norm_eps)
        self.output_bias = nn.Parameter(torch.zeros(cfg.vocab_size))

    def mlm_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """``(..., d_g)`` hidden states -> ``(..., v)`` vocabulary logits."""
        h = self.head_norm(F.gelu(self.head_dense(hidden)))  # (..., embedding_size)
        return linear(h, self.encoder.embeddings.word.weight, self.output_bias)  # h @ W^T + b

    def slot_logits(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                    token_type_ids: torch.Tensor | None, positions: torch.Tensor) -> torch.Tensor:
        """Vocabulary logits at ``positions`` (b, p) only: ``(b, p, v)``. The output projection
        is a small model's largest matmul; at the p masked slots (about 1/7 of the positions)
        it costs a seventh."""
        hidden = self.encoder(input_ids, attention_mask, token_type_ids)  # (b, n, d_g)
        slots = positions[..., None].expand(-1, -1, hidden.shape[-1])
        return self.mlm_logits(hidden.gather(1, slots))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        """Logits over the vocabulary at every position: ``(b, n, v)``."""
        return self.mlm_logits(self.encoder(input_ids, attention_mask, token_type_ids))


# ------------------------------------------------------------------------------ 3. sampling


def gumbel_max_sample(logits: torch.Tensor, *, temperature: float = 1.0,
                      generator: torch.Generator | None = None) -> torch.Tensor:
    """One sample per row of ``softmax(logits / temperature)`` by the Gumbel-max trick.

    ``argmax(logits + g)`` with ``g = -log(-log(u))``, ``u ~ U(0, 1)`` is an exact sample. It
    runs in float32: in half precision the noise is too coarse (a known PyTorch fp16 Gumbel bug)
    and rare tokens are never drawn. The ``1e-9`` terms are the official code's.
    """
    logits = logits.detach().float() / temperature  # no gradient through the sample
    u = torch.rand(logits.shape, device=logits.device, generator=generator)
    gumbel = -torch.log(-torch.log(u + 1e-9) + 1e-9)
    return (logits + gumbel).argmax(dim=-1)


# ------------------------------------------------------------------------ 4. replacing tokens


def replace_tokens(input_ids: torch.Tensor, attention_mask: torch.Tensor, masked: MaskedInputs,
                   sampled: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Put the generator's samples ``(b, p)`` into the *original* ids.

    Returns ``(corrupted_ids, is_replaced)``, both ``(b, n)``. A sample equal to the original is
    labelled original: the paper found this "moderately improves results" (section 2).
    """
    corrupted = _scatter(input_ids, masked.positions, sampled, masked.weights.bool())
    is_replaced = (corrupted != input_ids) & attention_mask.bool()
    return corrupted, is_replaced


# ------------------------------------------------------------------------ 5. the discriminator


class Discriminator(nn.Module):
    """A BERT encoder with a per-token head: dense -> GELU -> dense(1) = logit of "replaced"."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.encoder = Encoder(cfg)
        self.head_dense = Linear(cfg.hidden_size, cfg.hidden_size)
        self.head_out = Linear(cfg.hidden_size, 1)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        """Per-token logits of P(replaced): ``(b, n)``.

        As in transformers, ``attention_mask=None`` attends to every position: pass the mask
        for padded batches.
        """
        return self.head(self.encoder(input_ids, attention_mask, token_type_ids))

    def head(self, h: torch.Tensor) -> torch.Tensor:
        """``(b, n, d)`` hidden states -> ``(b, n)`` logits of "replaced"."""
        return self.head_out(F.gelu(self.head_dense(h))).squeeze(-1)


# ------------------------------------------------------------------------- 6. the objective


def masked_lm_loss(logits: torch.Tensor, masked: MaskedInputs) -> torch.Tensor:
    """Cross-entropy ``(b, p, v)`` logits vs the originals, averaged over the used slots."""
    b, p, v = logits.shape
    # Rows of v contiguous logits: the softmax of a transposed (b, v, p) view strides over
    # memory, and ran ~2x slower on a CPU.
    token_ce = F.cross_entropy(logits.float().reshape(b * p, v), masked.targets.reshape(b * p),
                               reduction="none").view(b, p)
    return (token_ce * masked.weights).sum() / (masked.weights.sum() + 1e-6)


@torch.no_grad()
def masked_accuracy(logits: torch.Tensor, masked: MaskedInputs) -> torch.Tensor:
    """The share of used slots where the argmax is the original token (detached)."""
    w = masked.weights
    return ((logits.argmax(-1) == masked.targets).float() * w).sum() / w.sum().clamp_min(1)


def replaced_bce(logits: torch.Tensor, is_replaced: torch.Tensor,
                 weights: torch.Tensor) -> torch.Tensor:
    """The discriminator's binary cross-entropy, averaged with ``weights`` (1: a token counts)."""
    token_bce = F.binary_cross_entropy_with_logits(logits.float(), is_replaced.float(),
                                                   reduction="none")
    return (token_bce * weights).sum() / (weights.sum() + 1e-6)


@dataclass(frozen=True, kw_only=True)
class CorruptedBatch:
    """Steps 1-4 on one batch (:meth:`Electra.corrupt`): what the discriminator is shown."""

    masked: MaskedInputs  # step 1: the generator's input and where it was masked
    gen_logits: torch.Tensor  # (b, p, v) step 2: the generator's logits at the masked slots
    gen_loss: torch.Tensor  # the generator's MLM loss over the used slots
    sampled_ids: torch.Tensor  # (b, p) step 3: one sample per slot
    corrupted_ids: torch.Tensor  # (b, n) step 4: the originals with the samples put in
    is_replaced: torch.Tensor  # (b, n) bool: the discriminator's labels


@dataclass(kw_only=True)
class ElectraOutput:
    """Everything one forward pass computed: losses, metrics, and per-token views."""

    loss: torch.Tensor  # gen_weight * gen_loss + disc_weight * disc_loss
    gen_loss: torch.Tensor
    disc_loss: torch.Tensor
    metrics: dict[str, torch.Tensor] = field(default_factory=dict)  # detached scalars
    corrupted_ids: torch.Tensor | None = None  # (b, n) what the discriminator saw
    is_replaced: torch.Tensor | None = None  # (b, n) bool labels
    disc_logits: torch.Tensor | None = None  # (b, n)
    masked: MaskedInputs | None = None
    gen_logits: torch.Tensor | None = None  # (b, p, v) at the masked slots
    sampled_ids: torch.Tensor | None = None  # (b, p)


class Electra(nn.Module):
    """Generator + discriminator + the ELECTRA objective; ``forward`` returns the training loss."""

    # The objectives these networks train (minielectra.objectives); the MLM baselines of paper
    # Table 5 add a head of their own (objectives.masked_lm.MaskedLMBaseline).
    trains = ("electra", "electra-15")

    def __init__(self, config: ModelConfig, objective: ObjectiveConfig | None = None):
        super().__init__()
        self.config = config  # checked when it was made (ModelConfig.__post_init__)
        self.objective = objective or ObjectiveConfig()
        if self.objective.name not in self.trains:
            raise ValueError(f"{type(self).__name__} does not train objective.name="
                             f"{self.objective.name!r}: build the model with "
                             "minielectra.objectives.compute.build_model")
        self.tokenizer = None  # attached by from_pretrained when the checkpoint has one
        self.build()
        self.reset_parameters()

    def build(self, *, generator: bool = True) -> None:
        """The discriminator and the generator, sharing what ``model.tying`` says (paper 3.2)."""
        config, gen_cfg = self.config, self.config.generator()
        self.discriminator = Discriminator(config)
        shared = self.discriminator.encoder.embeddings
        if not generator:  # a discriminator alone (BERT's baseline corrupts with [MASK])
            self.generator = None
        elif config.tying == "all":  # one encoder for both; only the heads differ
            self.generator = Generator(gen_cfg, encoder=self.discriminator.encoder)
        elif config.tying == "embeddings":  # paper default: word, position, segment + LayerNorm
            self.generator = Generator(gen_cfg, embeddings=shared)
        else:
            self.generator = Generator(gen_cfg)

    def reset_parameters(self) -> None:
        init_weights(self, self.config.initializer_range)
        if self.config.position_init == "sinusoidal":
            init_sinusoidal_positions(self, self.config.initializer_range)
        # The official code leaves these two at TF's default, Glorot uniform.
        generator = [self.generator.encoder.embed_proj] if self.generator is not None else []
        for m in (self.discriminator.encoder.embed_proj, *generator,
                  self.discriminator.head_out):
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None, *,
                generator: torch.Generator | None = None) -> ElectraOutput:
        if attention_mask is None:
            attention_mask = input_ids != self.config.pad_token_id
        obj = self.objective
        c = self.corrupt(input_ids, attention_mask, token_type_ids, generator=generator)

        disc_logits = self.discriminator(c.corrupted_ids, attention_mask, token_type_ids)  # (b, n)
        # Over every real token, [CLS] and [SEP] included: ELECTRA's efficiency.
        disc_loss = replaced_bce(disc_logits, c.is_replaced, attention_mask.float())
        loss = obj.gen_weight * c.gen_loss + obj.disc_weight * disc_loss

        return ElectraOutput(
            loss=loss, gen_loss=c.gen_loss, disc_loss=disc_loss,
            metrics=step_metrics(c.gen_logits, c.masked, disc_logits, c.is_replaced,
                                 attention_mask),
            corrupted_ids=c.corrupted_ids, is_replaced=c.is_replaced, disc_logits=disc_logits,
            masked=c.masked, gen_logits=c.gen_logits, sampled_ids=c.sampled_ids)

    def corrupt(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                token_type_ids: torch.Tensor | None = None, *,
                generator: torch.Generator | None = None) -> CorruptedBatch:
        """Steps 1-4: mask, let the generator predict, sample, replace."""
        masked = mask_tokens(input_ids, attention_mask, self.config, self.objective,
                             generator=generator)
        # The generator predicts the originals, with vocabulary logits at the masked slots only.
        gen_logits = self.generator.slot_logits(masked.input_ids, attention_mask, token_type_ids,
                                                masked.positions)  # (b, p, v)
        gen_loss = masked_lm_loss(gen_logits, masked)

        sampled = gumbel_max_sample(gen_logits, temperature=self.objective.temperature,
                                    generator=generator)
        corrupted, is_replaced = replace_tokens(input_ids, attention_mask, masked, sampled)
        return CorruptedBatch(masked=masked, gen_logits=gen_logits, gen_loss=gen_loss,
                              sampled_ids=sampled, corrupted_ids=corrupted,
                              is_replaced=is_replaced)

    # ---------------------------------------------------------------------- checkpoints
    @classmethod
    def from_pretrained(cls, path: str | Path, *, generator: str | Path | None = None) -> "Electra":
        """Load a minielectra checkpoint directory or a transformers ELECTRA directory.

        For transformers checkpoints ``path`` holds the discriminator (ElectraForPreTraining) and
        ``generator`` optionally the generator (ElectraForMaskedLM). The model comes back in
        training mode, ready to continue pre-training; call ``.eval()`` for inference.
        """
        from . import checkpoint  # the file formats load when first used
        return checkpoint.load_pretrained(path, cls, generator=generator)

    def save_pretrained(self, path: str | Path) -> Path:
        """Write minielectra's format: ``model.safetensors``, ``config.json``, tokenizer."""
        from . import checkpoint
        return checkpoint.save_pretrained(self, path)


@torch.no_grad()
def step_metrics(gen_logits, masked, disc_logits, is_replaced, attention_mask) -> dict:
    """Detached scalar tensors (no host sync here; callers call ``float()`` when they log)."""
    w = masked.weights
    real = attention_mask.bool()
    pred = disc_logits > 0
    tp = (pred & is_replaced).sum().float()
    n_real = real.sum().float().clamp_min(1)
    return {
        "gen_accuracy": masked_accuracy(gen_logits, masked),
        "disc_accuracy": ((pred == is_replaced) & real).sum() / n_real,
        "disc_precision": tp / (pred & real).sum().clamp_min(1),
        "disc_recall": tp / is_replaced.sum().clamp_min(1),
        "replaced_fraction": is_replaced.sum() / n_real,
        "masked_fraction": w.sum() / n_real,
    }
