"""The one machine behind every config section (pre-training's, fine-tuning's, SQuAD's, the
experiments' options): ``--set section.key=value``, JSON read back into dataclasses, a type check.

A *section* is a dataclass with fields of type ``int``, ``float``, ``bool``, ``str``,
``Literal[...]``, ``X | None`` or ``tuple[X, ...]``; a *config* is a dataclass of sections
(:class:`~.config.RunConfig`) or a dict ``{name: section}``. Ranges are each section's
``validate()``.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import typing
from collections.abc import Iterable, Mapping
from typing import Any, Literal


@functools.cache
def field_types(cls: type) -> dict[str, Any]:
    """A dataclass's field names and their (resolved) types."""
    return typing.get_type_hints(cls)


def apply_overrides(cfg: Any, overrides: Iterable[str]) -> Any:
    """Set ``section.key=value`` strings on ``cfg`` (returned), each value parsed as its field's
    type. A mistyped key is a KeyError that names the nearest valid keys."""
    sections = dict(cfg) if isinstance(cfg, Mapping) else {
        f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)
        if dataclasses.is_dataclass(getattr(cfg, f.name))}  # a dataclass: its section fields
    sections = dict(sorted(sections.items()))
    keys = [f"{name}.{f.name}" for name, s in sections.items() for f in dataclasses.fields(s)]
    for item in overrides:
        key, eq, raw = item.partition("=")
        key = key.strip()
        if not eq:
            raise ValueError(f"override {item!r} is not of the form section.key=value")
        if key not in keys:
            raise unknown_key(key, keys)
        name, _, field = key.partition(".")
        section = sections[name]
        setattr(section, field, parse_value(raw.strip(), field_types(type(section))[field], key))
    return cfg


def override_keys(overrides: Iterable[str]) -> set[str]:
    """The ``section.key`` names that ``section.key=value`` strings set."""
    return {o.partition("=")[0].strip() for o in overrides}


_BOOLS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def parse_value(raw: str, hint: Any, key: str) -> Any:
    """The text of an override (or a flag) as a value of type ``hint``, or a ValueError naming
    ``key``."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if raw.lower() in ("none", "null") and type(None) in args:
        return None
    if type(None) in args:  # X | None
        return parse_value(raw, next(a for a in args if a is not type(None)), key)
    if origin is Literal:
        value = raw.strip("'\"")
        if value not in args:
            raise ValueError(f"{key} must be one of {list(args)}, got {value!r}")
        return value
    if origin is tuple:
        parts = [p for p in raw.strip("()[] ").split(",") if p.strip()]
        return tuple(parse_value(p.strip(), args[0], key) for p in parts)
    try:
        if hint is bool:
            return _BOOLS[raw.lower()]
        if hint is int:
            f = float(raw)
            if f != int(f):
                raise ValueError
            return int(f)
        if hint is float:
            return float(raw)
        if hint is str:
            return raw.strip("'\"")
    except (ValueError, OverflowError, KeyError):  # OverflowError: an int of inf, or 1e400
        raise ValueError(f"{key} expects {type_name(hint)}, got {raw!r}") from None
    raise TypeError(f"cannot parse {key} of type {hint}")


def fits(value: Any, hint: Any) -> bool:
    """Whether ``value`` has the type ``hint`` (an int where a float belongs is fine)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if value is None:
        return type(None) in args
    if origin is Literal:
        return value in args
    if origin is tuple:
        return isinstance(value, (list, tuple)) and all(fits(v, args[0]) for v in value)
    if args:  # X | None
        return any(fits(value, a) for a in args if a is not type(None))
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint) if isinstance(hint, type) else True


def type_name(hint: Any) -> str:
    """``int``, ``one of ['a', 'b']``, ``str or None``, ``a list of float``."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Literal:
        return f"one of {list(args)}"
    if origin is tuple:
        return f"a list of {type_name(args[0])}"
    if type(None) in args:
        return " or ".join(type_name(a) for a in args if a is not type(None)) + " or None"
    return getattr(hint, "__name__", str(hint))


def check_types(cfg: Any, prefix: str = "") -> None:
    """Refuse a value that does not have its field's type (library callers can set anything;
    parsed text has the type already), naming the key and the value. Recurses into sections."""
    for name, hint in field_types(type(cfg)).items():
        value = getattr(cfg, name)
        if dataclasses.is_dataclass(hint):
            check_types(value, f"{prefix}{name}.")
        elif not fits(value, hint):
            raise ValueError(f"{prefix}{name} expects {type_name(hint)}, got {value!r}")


def checked(section: Any, prefix: str) -> Any:
    """``section`` after the type check and its own range checks (``validate()``)."""
    check_types(section, prefix)
    section.validate()
    return section


# Keys that configs and checkpoints written by earlier versions may hold, each with the one value
# still read (as if the key were absent): options the package no longer has.
RETIRED = {"model.extra_norm": False}


def from_dict(cls: type, d: Any, prefix: str = "") -> Any:
    """A dataclass ``cls`` from a JSON object, recursing into sections; an unknown key or a
    value of the wrong type is refused, naming it (``prefix`` + key)."""
    if not isinstance(d, dict):
        raise ValueError(f"{prefix.rstrip('.') or 'the config'} must be a JSON object, got "
                         f"{type(d).__name__}")
    hints = field_types(cls)
    for k in set(d) & {key.removeprefix(prefix) for key in RETIRED if key.startswith(prefix)}:
        if d[k] != RETIRED[prefix + k]:  # a model this version does not build
            raise ValueError(f"{prefix + k}={d[k]!r}: an option this version of minielectra does "
                             "not have; only its default, "
                             f"{prefix + k}={RETIRED[prefix + k]!r}, reads")
        d = {key: v for key, v in d.items() if key != k}  # the default: read as if absent
    unknown = set(d) - set(hints)
    if unknown:
        raise KeyError(f"unknown config key(s) {sorted(prefix + k for k in unknown)}; "
                       f"valid: {sorted(prefix + n for n in hints)}")
    kwargs = {}
    for k, v in d.items():
        if dataclasses.is_dataclass(hints[k]):
            kwargs[k] = from_dict(hints[k], v, prefix + k + ".")
        elif not fits(v, hints[k]):
            raise ValueError(f"{prefix + k} expects {type_name(hints[k])}, got {v!r}")
        else:
            kwargs[k] = tuple(v) if isinstance(v, list) else v
    return cls(**kwargs)


def unknown_key(key: str, keys: list[str]) -> KeyError:
    """A mistyped dotted key: "did you mean" the closest of ``keys`` (the same field in another
    section, a field whose initials it is, as ``lr``, near spellings of the key or section), else
    what is valid there."""
    field_name, section = key.rpartition(".")[2], key.partition(".")[0]
    initials = {k: "".join(w[:1] for w in k.rpartition(".")[2].split("_")) for k in keys}
    close = [k for k in keys if field_name in (k.rpartition(".")[2], initials[k]) and k != key]
    sections = sorted({k.partition(".")[0] for k in keys})
    listing = (f"valid keys: {[k for k in keys if k.startswith(section + '.')]}"
               if section in sections else f"sections: {sections}")
    candidates = keys + ([] if section in sections else sections)
    close += [k for k in difflib.get_close_matches(key, candidates, n=3, cutoff=0.7)
              if k not in close]
    if not close:
        return KeyError(f"unknown config key {key!r}; {listing}")
    more = f" ({listing})" if listing.startswith("sections") else ""
    return KeyError(f"unknown config key {key!r}; did you mean {' or '.join(close[:3])}?{more}")
