"""Import and export transformers ELECTRA checkpoints: name mapping and file reading/writing only.

transformers (``modeling_electra.py``) stores one network per directory: the discriminator as
``ElectraForPreTraining``, the generator as ``ElectraForMaskedLM``, each a ``config.json`` plus
``model.safetensors`` (older files: ``pytorch_model.bin``). The tensors are ours under other
names (``tutorial/appendix_official_recipe.md`` section A.7), with one difference in layout:
their attention has separate ``query``/``key``/``value`` layers, ours one fused ``qkv`` layer
whose output rows are q, k, v stacked (``attention.py``), so import concatenates and export splits.

Which weights are shared is not written in a transformers directory: google's checkpoints tie the
generator's and the discriminator's embeddings, and we find that out by comparing the tensors.

This module deliberately does not import transformers (a test-only dependency); the tests load
what :func:`export` writes with transformers and compare logits.

    export(model, "hf_out")                    # hf_out/discriminator/, hf_out/generator/
    model = load("hf_out", Electra)            # or load(disc_dir, Electra, generator=gen_dir)

It knows tensor names, never the model class (``Electra.from_pretrained`` passes itself in), so
it sits below :mod:`.electra`; the ``convert`` command is :mod:`.convert`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import Literal

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import nn

from ..config import ModelConfig, ObjectiveConfig, Tying
from ..overrides import from_dict
from ..safeio import read_json, replace_dir, write_file
from .storage import (CheckpointError, check_state, load_tokenizer,
                      order_safetensors_file, write_error)

logger = logging.getLogger(__name__)

Role = Literal["discriminator", "generator"]
ARCHITECTURES = {"discriminator": "ElectraForPreTraining", "generator": "ElectraForMaskedLM"}
# Buffers that some transformers versions wrote into the weights file; they hold no weights.
IGNORED_KEYS = {"electra.embeddings.position_ids", "electra.embeddings.token_type_ids"}
TIED_LM_HEAD = "generator_lm_head.weight"  # = the word embeddings; often absent from the file
# transformers' ElectraConfig defaults, for config.json files that leave a field out.
HF_DEFAULTS = {"vocab_size": 30522, "embedding_size": 128, "hidden_size": 256,
               "num_hidden_layers": 12, "num_attention_heads": 4, "intermediate_size": 1024,
               "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
               "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 512,
               "type_vocab_size": 2, "initializer_range": 0.02, "layer_norm_eps": 1e-12,
               "pad_token_id": 0, "position_embedding_type": "absolute"}
# ModelConfig field <- transformers config key
CONFIG_NAMES = {"vocab_size": "vocab_size", "embedding_size": "embedding_size",
                "hidden_size": "hidden_size", "num_layers": "num_hidden_layers",
                "num_heads": "num_attention_heads", "intermediate_size": "intermediate_size",
                "max_position_embeddings": "max_position_embeddings",
                "type_vocab_size": "type_vocab_size", "dropout": "hidden_dropout_prob",
                "attention_dropout": "attention_probs_dropout_prob",
                "layer_norm_eps": "layer_norm_eps", "initializer_range": "initializer_range",
                "pad_token_id": "pad_token_id"}
SPECIAL_TOKENS = {"cls_token_id": "[CLS]", "sep_token_id": "[SEP]", "mask_token_id": "[MASK]"}
# How the pair was pre-trained (masking, temperature), which transformers has no field for: our
# export writes it under this key and `load` reads it back, so a model written and read again
# corrupts text as it did (google's checkpoints have none: the paper's objective).
OBJECTIVE_KEY = "minielectra_objective"

# ------------------------------------------------------------------------ 1. the name mapping


def module_names(role: Role, num_layers: int) -> dict[str, str | tuple[str, ...]]:
    """Our module paths inside one network -> transformers' module paths.

    A tuple means one of our tensors is several of theirs, concatenated along dim 0 (the fused
    ``qkv``: heads are contiguous inside each of q, k and v in both layouts, so no reordering).
    """
    names: dict[str, str | tuple[str, ...]] = {
        "encoder.embeddings.word": "electra.embeddings.word_embeddings",
        "encoder.embeddings.position": "electra.embeddings.position_embeddings",
        "encoder.embeddings.segment": "electra.embeddings.token_type_embeddings",
        "encoder.embeddings.norm": "electra.embeddings.LayerNorm",
        "encoder.embed_proj": "electra.embeddings_project",  # only when embedding != hidden
    }
    for i in range(num_layers):
        ours, theirs = f"encoder.layers.{i}.", f"electra.encoder.layer.{i}."
        names[ours + "attn.qkv"] = tuple(theirs + f"attention.self.{p}"
                                         for p in ("query", "key", "value"))
        names[ours + "attn.out"] = theirs + "attention.output.dense"
        names[ours + "attn_norm"] = theirs + "attention.output.LayerNorm"
        names[ours + "ffn_in"] = theirs + "intermediate.dense"
        names[ours + "ffn_out"] = theirs + "output.dense"
        names[ours + "ffn_norm"] = theirs + "output.LayerNorm"
    if role == "discriminator":
        names["head_dense"] = "discriminator_predictions.dense"
        names["head_out"] = "discriminator_predictions.dense_prediction"
    else:
        names["head_dense"] = "generator_predictions.dense"
        names["head_norm"] = "generator_predictions.LayerNorm"
    return names


def _hf_names(name: str, names: dict) -> tuple[str, ...]:
    """One of our parameter names -> the transformers name(s) it is stored under."""
    if name == "output_bias":  # the generator's own output bias; its matrix is the embeddings
        return ("generator_lm_head.bias",)
    module, _, leaf = name.rpartition(".")
    theirs = names[module]
    return tuple(f"{t}.{leaf}" for t in (theirs if isinstance(theirs, tuple) else (theirs,)))


def to_hf_state(net: nn.Module, role: Role) -> dict[str, torch.Tensor]:
    """A :class:`Discriminator` or :class:`Generator` -> transformers' state dict (float32, CPU)."""
    names = module_names(role, len(net.encoder.layers))
    out = {}
    for name, tensor in net.state_dict().items():
        targets = _hf_names(name, names)
        # clone: chunks of qkv share storage, which safetensors refuses to write
        parts = tensor.detach().to("cpu", torch.float32).chunk(len(targets), dim=0)
        out.update({t: p.clone() for t, p in zip(targets, parts)})
    return out


def from_hf_state(hf_state: dict[str, torch.Tensor], net: nn.Module, role: Role, *,
                  source: str) -> dict[str, torch.Tensor]:
    """transformers' state dict -> ``net``'s, after checking every key and shape against it."""
    expected = {k: v.shape for k, v in to_hf_state(net, role).items()}
    check_state(expected, {k: v.shape for k, v in hf_state.items()}, source=source)
    names = module_names(role, len(net.encoder.layers))
    return {name: torch.cat([hf_state[t] for t in _hf_names(name, names)], dim=0)
            for name in net.state_dict()}


# -------------------------------------------------------------------------- 2. the config


def hf_config(cfg: ModelConfig, role: Role) -> dict:
    """Our (network's) config -> a transformers ElectraConfig as a JSON-able dict."""
    out = {"architectures": [ARCHITECTURES[role]], "model_type": "electra",
           "hidden_act": "gelu",  # exact erf GELU, as ours
           "position_embedding_type": "absolute", "tie_word_embeddings": True,
           "dtype": "float32"}
    out.update({theirs: getattr(cfg, ours) for ours, theirs in CONFIG_NAMES.items()})
    # Not read by transformers; lets `load` give back our special ids when there is no vocab.txt.
    out.update({k: getattr(cfg, k) for k in SPECIAL_TOKENS})
    return out


def _read_config(directory: Path) -> dict:
    config = {**HF_DEFAULTS, **read_json(directory / "config.json")}  # a JSON object, or named
    if config.get("model_type", "electra") != "electra":
        raise ValueError(f"{directory}/config.json: model_type {config['model_type']!r} is not "
                         "'electra'")
    if config["hidden_act"] != "gelu":  # ours is the exact GELU; another would silently differ
        raise ValueError(f"{directory}/config.json: hidden_act {config['hidden_act']!r} is not "
                         "supported (minielectra uses the exact 'gelu')")
    if config["position_embedding_type"] != "absolute":
        raise ValueError(f"{directory}/config.json: position_embedding_type "
                         f"{config['position_embedding_type']!r} is not supported (absolute only)")
    return config


def _special_ids(config: dict, vocab: Path | None) -> dict[str, int]:
    """[CLS]/[SEP]/[MASK] ids: written by our export, else looked up in vocab.txt, else BERT's."""
    ids = {k: config[k] for k in SPECIAL_TOKENS if k in config}
    if vocab is not None and vocab.is_file():
        lines = {t.strip(): i for i, t in enumerate(vocab.read_text(encoding="utf-8").splitlines())}
        ids = {k: lines[t] for k, t in SPECIAL_TOKENS.items() if t in lines} | ids
    return ids


def config_from_hf(disc: dict | None, gen: dict | None, *, tying: Tying,
                   vocab: Path | None = None) -> ModelConfig:
    """One ModelConfig from a discriminator config and/or a generator config (transformers')."""
    base = disc if disc is not None else gen
    fields = {**{ours: base[theirs] for ours, theirs in CONFIG_NAMES.items()},
              **_special_ids(base, vocab), "tying": tying}
    if disc is not None and gen is not None:
        cfg = ModelConfig(**fields, generator_size=gen["hidden_size"] / disc["hidden_size"])
    elif disc is None:  # only a generator: give the fresh discriminator the same shape
        cfg = ModelConfig(**fields, generator_size=1.0)
    else:  # only a discriminator: a fresh ELECTRA-Small-style generator, 1/4 wide if it can be
        try:
            cfg = ModelConfig(**fields)
        except ValueError:
            cfg = ModelConfig(**fields, generator_size=1.0)
    if disc is not None and gen is not None:
        _check_generator_shape(cfg, gen)
    if max(cfg.cls_token_id, cfg.sep_token_id, cfg.mask_token_id) >= cfg.vocab_size:
        logger.warning("no vocab.txt to take [CLS]/[SEP]/[MASK] ids from, and BERT's (%d, %d, "
                       "%d) do not fit vocab_size %d: set them in model.config before training",
                       cfg.cls_token_id, cfg.sep_token_id, cfg.mask_token_id, cfg.vocab_size)
    return cfg


def _objective(config: dict, directory: Path) -> ObjectiveConfig:
    """The pre-training objective our export wrote into ``config.json``, else the paper's."""
    try:
        return from_dict(ObjectiveConfig, config.get(OBJECTIVE_KEY, {}), prefix="objective.")
    except (KeyError, ValueError) as e:
        raise CheckpointError(f"{directory}/config.json: {OBJECTIVE_KEY}: "
                              f"{e.args[0] if e.args else e}") from None


def _check_generator_shape(cfg: ModelConfig, gen: dict) -> None:
    """Our generator is the discriminator scaled in width only; refuse any other shape."""
    derived = cfg.generator()
    wrong = [f"{theirs}: generator {gen[theirs]} vs {getattr(derived, ours)} (discriminator "
             f"scaled by {cfg.generator_size:g})"
             for ours, theirs in CONFIG_NAMES.items()
             if ours in ("vocab_size", "embedding_size", "hidden_size", "num_layers", "num_heads",
                         "intermediate_size", "max_position_embeddings", "type_vocab_size")
             and gen[theirs] != getattr(derived, ours)]
    if wrong:
        raise ValueError("this generator/discriminator pair has a shape minielectra cannot hold "
                         "(same depth and embeddings, width scaled): " + "; ".join(wrong))


# ----------------------------------------------------------------------------- 3. reading


def is_hf_dir(path: str | Path) -> bool:
    """A transformers ELECTRA directory, or one with ``discriminator/`` and/or ``generator/``."""
    path = Path(path)
    if (path / "config.json").is_file():
        config = read_json(path / "config.json")
        return config.get("model_type") == "electra" or any(
            a.startswith("Electra") for a in config.get("architectures") or [])
    return any((path / r / "config.json").is_file() for r in ("discriminator", "generator"))


def read_weights(directory: Path) -> dict[str, torch.Tensor]:
    """The tensors of ``model.safetensors`` (preferred) or ``pytorch_model.bin``."""
    if (directory / "model.safetensors").is_file():
        state = load_file(directory / "model.safetensors")
    elif (directory / "pytorch_model.bin").is_file():
        state = torch.load(directory / "pytorch_model.bin", map_location="cpu", weights_only=True)
    else:
        raise FileNotFoundError(f"{directory} has neither model.safetensors nor pytorch_model.bin")
    return {k: v for k, v in state.items() if k not in IGNORED_KEYS}


def _role(state: dict[str, torch.Tensor], directory: Path) -> Role:
    if any(k.startswith("discriminator_predictions.") for k in state):
        return "discriminator"
    if any(k.startswith("generator_predictions.") for k in state):
        return "generator"
    raise CheckpointError(f"{directory} holds neither an ElectraForPreTraining (discriminator) "
                          "nor an ElectraForMaskedLM (generator): no prediction head weights")


def _untie_lm_head(state: dict[str, torch.Tensor], directory: Path) -> None:
    """Drop ``generator_lm_head.weight``: ours is the word-embedding matrix, so it must equal it."""
    head = state.pop(TIED_LM_HEAD, None)
    word = state.get("electra.embeddings.word_embeddings.weight")
    if head is not None and word is not None and not torch.equal(head, word):
        raise CheckpointError(f"{directory}: {TIED_LM_HEAD} {tuple(head.shape)} differs from the "
                              f"word embeddings {tuple(word.shape)}; minielectra's generator "
                              "always uses the word embeddings as its output layer")


def detect_tying(disc: dict[str, torch.Tensor], gen: dict[str, torch.Tensor]) -> Tying:
    """"all" if every encoder tensor is equal, "embeddings" if the embeddings are, else "none"."""
    def same(prefix: str) -> bool:
        keys = {k for k in disc if k.startswith(prefix)}
        return bool(keys) and keys == {k for k in gen if k.startswith(prefix)} and all(
            torch.equal(disc[k], gen[k]) for k in keys)
    if not same("electra.embeddings."):  # word, position, segment and the LayerNorm
        return "none"
    return "all" if same("electra.") else "embeddings"


# ----------------------------------------------------------------------------- 4. import


def _directories(path: Path, generator: str | Path | None) -> list[Path]:
    """The network directories to read: ``path`` (+ ``generator``), or ``path``'s subdirs."""
    if not (path / "config.json").is_file():
        subdirs = [path / r for r in ("discriminator", "generator")
                   if (path / r / "config.json").is_file()]
        if not subdirs:
            raise FileNotFoundError(f"{path} has no config.json and no discriminator/ or "
                                    "generator/ subdirectory with one")
        if generator is not None:
            raise ValueError(f"{path} has discriminator/ and generator/ subdirs; "
                             "do not pass generator= as well")
        return subdirs
    return [path] + ([Path(generator)] if generator is not None else [])


def load(path: str | Path, model_class: type[nn.Module], *,
         generator: str | Path | None = None) -> nn.Module:
    """A ``model_class`` (:class:`~.electra.Electra`) from transformers discriminator and/or
    generator directories.

    ``path`` is an ``ElectraForPreTraining`` dir (with an optional ``generator=`` dir), an
    ``ElectraForMaskedLM`` dir, or a dir with ``discriminator/`` and ``generator/`` subdirs (what
    :func:`export` writes). With one network only, the other keeps a fresh initialisation (sharing
    the loaded embeddings); a warning says so.
    """
    found: dict[str, tuple[Path, dict, dict[str, torch.Tensor]]] = {}
    for d in _directories(Path(path), generator):
        state = read_weights(d)
        role = _role(state, d)
        if role in found:
            raise CheckpointError(f"{found[role][0]} and {d} both hold a {role}")
        if role == "generator":
            _untie_lm_head(state, d)
        found[role] = (d, _read_config(d), state)
    disc, gen = found.get("discriminator"), found.get("generator")
    if disc and gen:
        tying = detect_tying(disc[2], gen[2])
    else:
        tying = "embeddings"
        logger.warning("%s has no %s: it keeps a fresh random initialisation (sharing the "
                       "loaded embeddings)", path, "generator" if gen is None else "discriminator")
    first = (disc or gen)[0]  # its vocab.txt is the tokenizer
    cfg = config_from_hf(disc[1] if disc else None, gen[1] if gen else None, tying=tying,
                         vocab=first / "vocab.txt")
    model = model_class(cfg, _objective((disc or gen)[1], first))
    for role, (d, _, state) in found.items():
        net = getattr(model, role)
        net.load_state_dict(from_hf_state(state, net, role, source=str(d)))
    model.tokenizer = load_tokenizer(first)
    return model


# ----------------------------------------------------------------------------- 5. export


def export(model: nn.Module, path: str | Path) -> Path:
    """Write ``path/discriminator/`` and ``path/generator/`` that transformers loads as
    ``ElectraForPreTraining`` and ``ElectraForMaskedLM`` (atomically, replacing ``path``).

    transformers' ELECTRA has one weight set per layer: a model with ``share_layers`` (ALECTRA)
    is refused rather than written as a one-layer model. An MLM-objective model's own MLM head
    (``disc_mlm``, on the discriminator's encoder) is the model such a run trained: it goes to
    ``path/masked_lm/``, a full-size ``ElectraForMaskedLM``; its encoder is also exported as the
    discriminator's, which is what fine-tuning uses. It has no generator to export."""
    if model.config.share_layers:
        raise ValueError("model.share_layers=true (ALECTRA) has no transformers ELECTRA "
                         "equivalent (one weight set per layer there); keep it in minielectra's "
                         "format")
    path = Path(path)
    with replace_dir(path) as tmp:
        nets = [("discriminator", model.discriminator, model.config, "discriminator")]
        if model.generator is not None:  # the mlm objective runs none
            nets.append(("generator", model.generator, model.config.generator(), "generator"))
        if getattr(model, "disc_mlm", None) is not None:
            nets.append(("masked_lm", model.disc_mlm, model.config, "generator"))
        for name, net, cfg, role in nets:
            out = tmp / name
            out.mkdir()
            config = hf_config(cfg, role) | {OBJECTIVE_KEY: dataclasses.asdict(model.objective)}
            write_file(out / "config.json", json.dumps(config, indent=2) + "\n")
            # transformers refuses safetensors files without this metadata.
            try:
                save_file(to_hf_state(net, role), out / "model.safetensors",
                          metadata={"format": "pt"})
            except SafetensorError as e:  # a full disk: an OSError naming the file
                raise write_error(e, path / name / "model.safetensors") from None
            order_safetensors_file(out / "model.safetensors")  # identical weights, same bytes
            if model.tokenizer is not None:
                model.tokenizer.save(out)
    return path
