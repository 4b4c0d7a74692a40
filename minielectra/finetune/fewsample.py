"""Fine-tuning with few labelled examples (Zhang, Wu, Katiyar, Weinberger, Artzi 2021,
"Revisiting Few-sample BERT Fine-tuning").

Their three findings, each a ``finetune.*`` option here:

- **Re-initialise the top layers** (``finetune.reinit_layers=K``): the top of a pre-trained
  encoder is specialised to the pre-training task; on a few thousand examples, starting those
  layers afresh (BERT's initialisation) fine-tunes faster and more stably. ELECTRA has no pooler,
  so only encoder layers are re-initialised. With ``finetune.from_scratch`` every layer is
  already at its initialisation, so nothing is done (and the random-init control of a
  ``reinit_layers`` recipe is the same as without it).
- **Bias-corrected Adam** (``finetune.bias_correction=true``): the official optimiser omits
  Adam's bias correction, which makes the first updates of a short run much larger than the
  learning rate says.
- **More steps** (``finetune.epochs=N``): the usual 3 epochs are too few on small data.

:data:`RECIPES` names the combinations the transfer experiment
(``research/transfer.py``) measures.
"""

from __future__ import annotations

from torch import nn

from ..model.transformer import init_weights

# name -> finetune.* overrides (on top of the paper's recipe)
RECIPES: dict[str, tuple[str, ...]] = {
    "paper": (),
    "10 epochs": ("finetune.epochs=10",),
    "20 epochs": ("finetune.epochs=20",),
    "10 epochs, top layer re-initialised": ("finetune.epochs=10", "finetune.reinit_layers=1"),
    "10 epochs, bias-corrected Adam": ("finetune.epochs=10", "finetune.bias_correction=true"),
}


def reinit_top_layers(model: nn.Module, k: int, *, std: float) -> None:
    """Give the top ``k`` blocks of ``model.encoder`` fresh BERT-initialised weights (in place;
    draws from torch's global generator, so seed it first)."""
    layers = model.encoder.layers
    if k > len(layers):
        raise ValueError(f"finetune.reinit_layers={k} but the encoder has {len(layers)} layers")
    if k and len(layers) != model.encoder.depth:
        raise ValueError("finetune.reinit_layers needs one weight set per layer; this encoder "
                         "shares one block across layers (model.share_layers)")
    for block in list(layers)[len(layers) - k:]:
        init_weights(block, std)


def prepare(model: nn.Module, cfg, *, initializer_range: float) -> None:
    """Apply the few-sample options of the fine-tuning config ``cfg`` to a freshly built
    classifier (before its optimiser is made)."""
    if cfg.reinit_layers and not cfg.from_scratch:
        reinit_top_layers(model, cfg.reinit_layers, std=initializer_range)
