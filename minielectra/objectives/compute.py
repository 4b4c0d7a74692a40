"""One entry point for every objective: :func:`compute` is what the training step calls.

``objective.name`` picks the objective and ``objective.procedure`` how ELECTRA's two networks
are trained; the default (``electra``, ``joint``) is exactly ``Electra.forward``. Every objective
returns an :class:`~minielectra.model.electra.ElectraOutput`: ``loss`` to minimise, ``gen_loss``
(the generator's, 0 where none runs), ``disc_loss`` (the loss of the network we keep, whatever
its head), detached scalar ``metrics`` and the per-token views it has.

:func:`build_model` and :func:`load_model` give the model an objective trains: an
:class:`~minielectra.model.electra.Electra`, or for the MLM baselines a
:class:`~.masked_lm.MaskedLMBaseline` (the same networks plus an MLM head).
"""

from __future__ import annotations

from pathlib import Path

import torch

from ..config import ModelConfig, ObjectiveConfig
from ..model import checkpoint
from ..model.electra import Electra, ElectraOutput
from . import discriminative, masked_lm

# Objectives whose kept network is a replaced-token detector (held-out AUC makes sense for them).
DISCRIMINATIVE = ("electra", "electra-15")

_OBJECTIVES = {"mlm": masked_lm.mlm, "replace-mlm": masked_lm.replace_mlm,
               "all-tokens-mlm": masked_lm.all_tokens_mlm,
               "electra-15": discriminative.electra_15}


def build_model(config: ModelConfig, objective: ObjectiveConfig | None = None) -> Electra:
    """A freshly initialised model for ``objective`` (default: ELECTRA's)."""
    objective = objective or ObjectiveConfig()
    baseline = objective.name in masked_lm.MLM_OBJECTIVES
    return (masked_lm.MaskedLMBaseline if baseline else Electra)(config, objective)


def load_model(path: str | Path, *, generator: str | Path | None = None) -> Electra:
    """:meth:`Electra.from_pretrained` for a checkpoint of any objective, an MLM baseline's
    with its head."""
    return checkpoint.load_pretrained(path, build_model, generator=generator)


def compute(model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
            token_type_ids: torch.Tensor | None = None, *,
            generator: torch.Generator | None = None, step: int = 0,
            max_steps: int = 1) -> ElectraOutput:
    """The training loss of ``model.objective`` on one batch (``step`` of ``max_steps``: only
    two-stage training depends on where the run is)."""
    net = model  # the module to call for the default objective (DDP's forward syncs gradients)
    model = getattr(net, "module", net)  # torchrun: the Electra inside the DDP wrapper
    obj = model.objective  # its name and procedure were checked once (ObjectiveConfig.validate)
    if attention_mask is None:
        attention_mask = input_ids != model.config.pad_token_id
    if obj.name == "electra" and obj.procedure == "joint":
        return net(input_ids, attention_mask, token_type_ids, generator=generator)
    if net is not model:  # the ablations call submodules, which DDP would not synchronise
        raise ValueError(f"objective {obj.name!r} / {obj.procedure!r} runs in one process only "
                         "(data-parallel training supports the default electra/joint)")
    if obj.name == "electra" and obj.procedure == "two-stage":
        return discriminative.two_stage(model, input_ids, attention_mask, token_type_ids,
                                        generator=generator, step=step, max_steps=max_steps)
    if obj.name == "electra" and obj.procedure == "adversarial":
        return discriminative.adversarial(model, input_ids, attention_mask, token_type_ids,
                                          generator=generator)
    return _OBJECTIVES[obj.name](model, input_ids, attention_mask, token_type_ids,
                                 generator=generator)
