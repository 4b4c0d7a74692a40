"""minielectra: a readable, complete PyTorch ELECTRA (Clark et al. 2020).

    >>> from minielectra import Electra, ElectraConfig
    >>> model = Electra(ElectraConfig(vocab_size=1000, hidden_size=64, num_heads=2))
"""

from .config import (DataConfig, ModelConfig, ObjectiveConfig, RunConfig, TrainConfig,
                     apply_overrides, preset, PRESETS)
from .electra import Discriminator, Electra, ElectraOutput, Generator

ElectraConfig = ModelConfig  # the public name of the model's shape

__version__ = "0.1.0"
__all__ = ["Electra", "ElectraConfig", "ElectraOutput", "Generator", "Discriminator",
           "ModelConfig", "ObjectiveConfig", "DataConfig", "TrainConfig", "RunConfig",
           "apply_overrides", "preset", "PRESETS"]
