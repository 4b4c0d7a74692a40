"""minielectra: a readable, complete PyTorch ELECTRA (Clark et al. 2020).

    >>> from minielectra import Electra, ElectraConfig
    >>> model = Electra(ElectraConfig(vocab_size=1000, hidden_size=64, num_heads=2))

``import minielectra`` loads the model and its configuration; the rest (data, training,
checkpoint files and the transformers interop, views, fine-tuning, experiments) loads when first
used, so a script that only builds a model starts as fast as torch does.
"""

import importlib
import os

# Idle OpenMP threads sleep instead of spinning. Must be set before torch is first imported. On the
# 2-core machines this project is tuned on, spinning threads made `nano` ~10x slower whenever one
# other busy process shared the CPU (research/learning_curve.py). Set it yourself to override.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from .config import (DataConfig, ModelConfig, ObjectiveConfig, RunConfig, TrainConfig,
                     apply_overrides, preset, PRESETS)
from .model.electra import Discriminator, Electra, ElectraOutput, Generator

ElectraConfig = ModelConfig  # the public name of the model's shape

__version__ = "0.1.0"
__all__ = ["Electra", "ElectraConfig", "ElectraOutput", "Generator", "Discriminator",
           "ModelConfig", "ObjectiveConfig", "DataConfig", "TrainConfig", "RunConfig",
           "apply_overrides", "preset", "PRESETS", "minimal_pretrain"]

# Public names from the layers above the model: imported when first asked for (PEP 562).
_LATER = {"minimal_pretrain": "minielectra.training.minimal"}


def __getattr__(name: str):
    if name not in _LATER:
        raise AttributeError(f"module 'minielectra' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LATER[name]), name)
    globals()[name] = value  # once: later lookups are ordinary
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LATER])
