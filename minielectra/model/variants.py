"""Options beyond the paper's ELECTRA: each off by default, each one a reader can skip.

The model of section 2 is what the defaults build. These options change it for a study of their
own; each is one ``ModelConfig`` field, and this is the list of them and where each lives:

- ``model.extra_norm``: two more LayerNorms in every block, as LTG-BERT (Samuel et al. 2023)
  takes them from NormFormer (Shleifer et al. 2021) for pre-training on little data: one on the
  merged heads before the attention's output projection, one on the FFN's activations before
  its second layer. The block stays post-LN otherwise. :func:`extra_norm` builds them; without
  the option those two places hold nothing. transformers' ELECTRA has no such layers, so the
  export refuses the option (:mod:`.hf`).
- ``model.position_init="sinusoidal"``: the learned position table starts as Vaswani et al.'s
  sines and cosines (:func:`.transformer.init_sinusoidal_positions`).
- ``model.share_layers``: ALBERT's one block applied ``num_layers`` times (ALECTRA,
  :class:`.transformer.Encoder`).
- ``model.tying="gdes"``: DeBERTaV3's gradient-disentangled embedding sharing (:mod:`.gdes`).
- ``model.attention="reference"``: the softmax written out instead of the fused kernel, the same
  function, for reading and for tests (:mod:`.attention`).
"""

from __future__ import annotations

from torch import nn

from ..config import ModelConfig


def extra_norm(width: int, cfg: ModelConfig) -> nn.LayerNorm | None:
    """A LayerNorm over ``width`` features where ``model.extra_norm`` puts one, else None (no
    module: the model, its printout and its checkpoints are those without the option)."""
    return nn.LayerNorm(width, eps=cfg.layer_norm_eps) if cfg.extra_norm else None
