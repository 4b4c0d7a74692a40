"""Hugging Face hub model ids (``google/electra-small-discriminator``) wherever a checkpoint goes.

A checkpoint argument that names no local file or directory and has the form ``owner/name`` is
a hub model id. Its ``config.json``, ``vocab.txt`` and weights (``model.safetensors``, else
``pytorch_model.bin``) are downloaded once, with ``huggingface_hub``, into the Hugging Face
cache (``HF_HOME``), and the snapshot directory is used as a transformers ELECTRA directory:
the loaders convert it on reading (:mod:`.hf`), as they do a local one. A discriminator alone
(``...-discriminator``) gets a fresh generator, with a warning; fine-tuning uses only the
discriminator.

Offline (no route to the hub, or ``HF_HUB_OFFLINE=1``) a model already in the cache is used;
any other is one line saying so and how to bring a local copy.
"""

from __future__ import annotations

import re
from pathlib import Path

# owner/name as the hub spells repositories: letters, digits, "-", "_", "."; not "." or ".."
_NAME = r"[A-Za-z0-9][\w.-]*"
HUB_ID = re.compile(rf"^{_NAME}/{_NAME}$")
FILES = ("config.json", "vocab.txt")
WEIGHTS = ("model.safetensors", "pytorch_model.bin")


def is_hub_id(spec: str | Path) -> bool:
    """``owner/name`` that is not a path on this machine."""
    text = str(spec)
    return bool(HUB_ID.match(text)) and not Path(text).exists() and ".." not in text


def owner_hint(spec: str | Path) -> str:
    """For a checkpoint that is not there: a name without a folder may be a hub model id that
    lacks its owner (``electra-small-discriminator``); the words that say so, else ""."""
    text = str(spec)
    if "/" in text or Path(text).exists() or not re.fullmatch(_NAME, text):
        return ""
    return ("; a Hugging Face hub model id names its owner too (owner/name, as "
            "google/electra-small-discriminator)")


def hub_model_dir(model_id: str) -> Path:
    """The local directory of hub model ``model_id``, downloaded when not in the cache."""
    from ..data.hub import hub_unreachable

    offline = hub_unreachable()  # offline: the cache only, at once, no retries
    try:
        from huggingface_hub import snapshot_download
    except ModuleNotFoundError:
        raise ModuleNotFoundError(f"{model_id}: a Hugging Face hub model id needs the "
                                  "huggingface_hub package (pip install huggingface_hub)") from None
    try:
        path = Path(snapshot_download(model_id, allow_patterns=[*FILES, WEIGHTS[0]],
                                      local_files_only=offline is not None))
        if not (path / WEIGHTS[0]).is_file():  # an older repository: PyTorch weights only
            path = Path(snapshot_download(model_id, allow_patterns=[*FILES, WEIGHTS[1]],
                                          local_files_only=offline is not None))
    except Exception as e:  # the hub's errors (missing repo, gated, network) have many types
        if offline is not None:
            raise FileNotFoundError(
                f"{model_id}: no such local path; as a Hugging Face hub model id it is not in "
                f"the local cache, and the hub is unreachable ({offline}): where the hub is "
                f"reachable run `minielectra convert --from-hf {model_id} --out DIR`, then "
                "pass DIR") from None
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise FileNotFoundError(f"{model_id}: no such local path, and the Hugging Face hub "
                                f"could not provide it as a model ({first})") from None
    if not (path / "config.json").is_file() or not any((path / w).is_file() for w in WEIGHTS):
        raise FileNotFoundError(f"{model_id}: the hub repository has no config.json and "
                                f"{' or '.join(WEIGHTS)}: not a transformers model")
    return path
