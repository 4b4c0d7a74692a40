"""Training FLOPs per step of each objective, counted from the config (for equal-compute runs).

Two counts live here.

**Ours** (:func:`train_flops_per_step`, the experiments' compute measure): matrix
multiplications only, 2 FLOPs per multiply-add, the backward pass twice the forward (a matmul's
gradient needs one product for its input and one for its weight), so a trained part costs 3x
its forward and a part run without gradients (two-stage's frozen generator) 1x. Embedding
lookups, softmaxes, LayerNorms and the loss are left out: they are a few percent of a
transformer's work. ``tests/test_objectives.py`` checks it against ``torch.utils.flop_counter``,
which counts what PyTorch actually runs.

**The official script's** (:func:`official_train_flops`): google-research/electra
``flops_computation.py``, whose figures the paper's appendix D quotes. It counts the backward
pass *equal* to the forward (2x), embedding lookups as dense one-hot matrix products (``2 e v``
per token), and softmax, LayerNorm, GELU and dropout at a few FLOPs per activation. For
ELECTRA-Small it gives 1.29e12 per step where ours gives 1.15e12 (see tutorial chapter 08).

Axis letters: b batch, n sequence, p masked slots, d width, f FFN width, e embedding width,
v vocabulary, L layers.
"""

from __future__ import annotations

from ..config import ModelConfig, RunConfig
from ..model.electra import max_predictions
from .discriminative import switch_step


def encoder_flops(cfg: ModelConfig, b: int, n: int) -> int:
    """One forward pass of an encoder over ``(b, n)`` tokens."""
    d, f, e = cfg.hidden_size, cfg.intermediate_size, cfg.embedding_size
    projection = 2 * b * n * e * d if e != d else 0
    per_layer = (2 * b * n * d * 3 * d  # fused q, k, v
                 + 2 * 2 * b * n * n * d  # q k^T and (attention) v
                 + 2 * b * n * d * d  # output projection
                 + 2 * 2 * b * n * d * f)  # FFN in and out
    return projection + cfg.num_layers * per_layer  # a shared block still runs num_layers times


def mlm_head_flops(cfg: ModelConfig, b: int, slots: int) -> int:
    """The MLM head at ``slots`` positions per sequence: dense to e, then the (b, slots, v)
    logits against the word-embedding matrix."""
    return 2 * b * slots * (cfg.hidden_size * cfg.embedding_size
                            + cfg.embedding_size * cfg.vocab_size)


def disc_head_flops(cfg: ModelConfig, b: int, n: int) -> int:
    """The discriminator's head (dense d -> d, then d -> 1) at every position."""
    return 2 * b * n * (cfg.hidden_size * cfg.hidden_size + cfg.hidden_size)


def forward_parts(cfg: RunConfig) -> dict[str, int]:
    """Forward FLOPs of one micro-batch, split into the generator's and the kept network's."""
    m, b, n = cfg.model, cfg.train.batch_size, cfg.data.max_seq_len
    p = max_predictions(n, cfg.objective.mask_prob)
    g = m.generator()
    generator = encoder_flops(g, b, n) + mlm_head_flops(g, b, p)
    encoder = encoder_flops(m, b, n)
    kept = {"electra": encoder + disc_head_flops(m, b, n),
            "electra-15": encoder + disc_head_flops(m, b, n),
            "mlm": encoder + mlm_head_flops(m, b, p),
            "replace-mlm": encoder + mlm_head_flops(m, b, p),
            "all-tokens-mlm": encoder + mlm_head_flops(m, b, n) + disc_head_flops(m, b, n),
            }[cfg.objective.name]
    return {"generator": 0 if cfg.objective.name == "mlm" else generator, "kept": kept}


def train_flops_per_step(cfg: RunConfig, *, stage: int | None = None) -> int:
    """Training FLOPs of one optimiser step (``grad_accum`` micro-batches). For two-stage
    training ``stage`` 1 (generator alone) or 2 (discriminator, frozen generator) is required."""
    parts = forward_parts(cfg)
    if cfg.objective.procedure == "two-stage":
        if stage not in (1, 2):
            raise ValueError("two-stage training: pass stage=1 or stage=2")
        per_batch = (3 * parts["generator"] if stage == 1
                     else parts["generator"] + 3 * parts["kept"])
    else:
        per_batch = 3 * (parts["generator"] + parts["kept"])
    return per_batch * cfg.train.grad_accum


def run_flops(cfg: RunConfig, steps: int | None = None) -> int:
    """Training FLOPs of ``steps`` steps (default ``train.max_steps``)."""
    steps = cfg.train.max_steps if steps is None else steps
    if cfg.objective.procedure != "two-stage":
        return steps * train_flops_per_step(cfg)
    first = min(steps, switch_step(cfg.objective, cfg.train.max_steps))
    return (first * train_flops_per_step(cfg, stage=1)
            + (steps - first) * train_flops_per_step(cfg, stage=2))


# The official script's FLOPs per activation of the element-wise operations it counts.
DROPOUT_FLOPS = 4  # random number, compare, mask, rescale
LAYER_NORM_FLOPS = 5  # mean, variance, scale, shift
GELU_FLOPS = 8  # the tanh approximation
SOFTMAX_FLOPS = 5  # max, subtract, exp, sum, divide
OFFICIAL_OUTPUT_FRACTION = 0.15625  # the script's share of positions with an output softmax


def _official_block(h: int, i: int, heads: int, s: int) -> float:
    """The script's forward FLOPs of one encoder block over one sequence of length ``s``."""
    attention = (3 * 2 * h * h + 3 * h  # q, k, v and their biases
                 + 2 * h * s + 2 * h * s  # q k^T, then the weighted average of v
                 + (SOFTMAX_FLOPS + DROPOUT_FLOPS + 1) * s * heads  # softmax, dropout, 1/sqrt(d)
                 + 2 * h * h + h + DROPOUT_FLOPS * h + h  # output projection, bias, dropout, add
                 + LAYER_NORM_FLOPS)  # the script counts this LayerNorm once, not once per unit
    ffn = (2 * h * i + GELU_FLOPS * i + i + 2 * h * i + h + DROPOUT_FLOPS * h + h
           + LAYER_NORM_FLOPS * h)
    return (attention + ffn) * s


def _official_inputs(h: int, e: int, v: int, s: int) -> float:
    """Embeddings as one-hot products (tokens, then positions and the 2 token types)."""
    per_token = (2 * e * v + 2 * e * (s + 2) + 2 * e + (LAYER_NORM_FLOPS + DROPOUT_FLOPS) * e
                 + (2 * h * e + h if e != h else 0))  # the projection to the hidden width
    return per_token * s


def _official_mlm_head(h: int, e: int, v: int, s: int) -> float:
    per_token = (2 * e * v + 2 * h * e + e + (GELU_FLOPS + LAYER_NORM_FLOPS) * e
                 + SOFTMAX_FLOPS * v + 2 * v)
    return OFFICIAL_OUTPUT_FRACTION * per_token * s


def _official_network(m: ModelConfig, *, e: int, s: int, discriminator: bool) -> float:
    """Forward FLOPs of one sequence through an encoder and its head, the script's way."""
    h = m.hidden_size
    head = (s * (2 * h * h + h + GELU_FLOPS * h + 2 * h) if discriminator
            else _official_mlm_head(h, e, m.vocab_size, s))
    return (m.num_layers * _official_block(h, m.intermediate_size, m.num_heads, s)
            + _official_inputs(h, e, m.vocab_size, s) + head)


def official_train_flops(cfg: RunConfig) -> float:
    """One training step of ``cfg`` counted as google-research/electra ``flops_computation.py``
    counts it: 2 x forward, one-hot embeddings, element-wise operations included, the
    generator's MLM head at the script's fixed 15.6% of positions (whatever
    ``objective.mask_prob``). ``objective.name`` ``electra``: discriminator plus generator (its
    embedding width the discriminator's when ``model.tying`` shares embeddings, else its own
    hidden width, as the script assumes); ``mlm``: one BERT-style network."""
    m, b, s = cfg.model, cfg.train.batch_size, cfg.data.max_seq_len
    name = cfg.objective.name
    if name == "mlm":
        forward = _official_network(m, e=m.embedding_size, s=s, discriminator=False)
    elif name == "electra":
        g = m.generator()
        forward = (_official_network(m, e=m.embedding_size, s=s, discriminator=True)
                   + _official_network(g, e=m.embedding_size if m.tying != "none"
                                       else g.hidden_size, s=s, discriminator=False))
    else:
        raise ValueError(f"official_train_flops counts objective.name electra or mlm, "
                         f"got {name!r}")
    return 2.0 * b * forward * cfg.train.grad_accum


def counted_flops(cfg: RunConfig, *, batch_size: int = 2, step: int = 0) -> int:
    """What ``torch.utils.flop_counter.FlopCounterMode`` counts in one training step (forward
    and backward) of a fresh model of ``cfg`` on random ids, ``batch_size`` rows, attention
    written out (torch counts nothing for the fused CPU attention kernel). Compare it with
    :func:`train_flops_per_step` of the same batch size."""
    import dataclasses

    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from .compute import build_model, compute

    m = dataclasses.replace(cfg.model, attention="reference")
    model = build_model(m, dataclasses.replace(cfg.objective))
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, m.vocab_size, (batch_size, cfg.data.max_seq_len), generator=g)
    ids[:, 0], ids[:, -1] = m.cls_token_id, m.sep_token_id
    mask = torch.ones_like(ids)
    with FlopCounterMode(display=False) as counter:
        out = compute(model, ids, mask, generator=g, step=step, max_steps=cfg.train.max_steps)
        out.loss.backward()
    return counter.get_total_flops()
