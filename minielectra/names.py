"""Names a user types (``--set`` keys): when one is mistyped, the nearest valid ones.

The tests' layer 0, beside :mod:`.config`: nothing here imports the package.
"""

from __future__ import annotations

import difflib


def unknown_key(key: str, keys: list[str]) -> KeyError:
    """A mistyped dotted key: "did you mean" the closest of ``keys`` (the same field in another
    section, a field whose initials it is, as ``lr``, then near spellings of the key or, when its
    section is unknown, of a section), else what is valid there (the section's keys, or the
    sections)."""
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
