"""What ``finetune --out DIR`` holds: a model folder (classification or SQuAD), its result and,
with ``--seeds N --keep-all``, every run's model in ``seed-N/``. Written through
:func:`minielectra.outputs.output_folder` (``replace=True``): locked, checked before training,
published all at once; interrupted or failed, ``DIR`` is as it was."""

from __future__ import annotations

from ..ownership import Layout
from ..safeio import read_json

FINETUNED = Layout("finetune", ("model.safetensors", "finetune.json", "vocab.txt",
                                "tokenizer_config.json", "checksums.json", "result.json",
                                "predictions.json", "na_probs.json", "seed-*"),
                  lambda folder: "task" in read_json(folder / "result.json"))
