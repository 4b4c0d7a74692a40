"""minielectra: a readable, complete PyTorch ELECTRA (Clark et al. 2020).

    >>> from minielectra import Electra, ElectraConfig
    >>> model = Electra(ElectraConfig(vocab_size=1000, hidden_size=64, num_heads=2))
"""

import os

# Idle OpenMP threads sleep instead of spinning. Must be set before torch is first imported. On the
# 2-core machines this project is tuned on, spinning threads made `nano` ~10x slower whenever one
# other busy process shared the CPU (research/learning_curve.py). Set it yourself to override.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from .config import (DataConfig, ModelConfig, ObjectiveConfig, RunConfig, TrainConfig,
                     apply_overrides, preset, PRESETS)
from .model.electra import Discriminator, Electra, ElectraOutput, Generator
from .training.minimal import minimal_pretrain

ElectraConfig = ModelConfig  # the public name of the model's shape

__version__ = "0.1.0"
__all__ = ["Electra", "ElectraConfig", "ElectraOutput", "Generator", "Discriminator",
           "ModelConfig", "ObjectiveConfig", "DataConfig", "TrainConfig", "RunConfig",
           "apply_overrides", "preset", "PRESETS", "minimal_pretrain"]
