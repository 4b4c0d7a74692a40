"""Fine-tuning with few labelled examples (Zhang, Wu, Katiyar, Weinberger, Artzi 2021,
"Revisiting Few-sample BERT Fine-tuning"): their three findings are ``finetune.*`` options.

Re-initialising the top layers (``reinit_layers=K``, here; ELECTRA has no pooler, so only encoder
layers), bias-corrected Adam (``bias_correction=true``: the official optimiser has none, which
makes a short run's first updates much larger than the learning rate says) and more steps
(``epochs=N``).
"""

from __future__ import annotations

from torch import nn

from ..model.transformer import init_weights


def prepare(model: nn.Module, cfg, *, initializer_range: float) -> None:
    """Give the top ``cfg.reinit_layers`` blocks of a freshly built classifier fresh
    BERT-initialised weights, in place, before its optimiser is made (torch's global generator:
    seed it first). With ``from_scratch`` every layer is already fresh: nothing to do."""
    k, layers = cfg.reinit_layers, model.encoder.layers
    if not k or cfg.from_scratch:
        return
    if k > len(layers):
        raise ValueError(f"finetune.reinit_layers={k} but the encoder has {len(layers)} layers")
    if len(layers) != model.encoder.depth:
        raise ValueError("finetune.reinit_layers needs one weight set per layer; this encoder "
                         "shares one block across layers (model.share_layers)")
    for block in list(layers)[len(layers) - k:]:
        init_weights(block, initializer_range)
