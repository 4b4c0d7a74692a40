"""The "##c" symbols of a WordPiece vocabulary, numbered before training so that it is reproducible.

``tokenizers``' WordPiece trainer (a BPE trainer) numbers the continuation symbols ``"##c"`` in the
order it meets them in a hash map, which differs from process to process, and it breaks ties
between equally frequent merges by those numbers: the same text gave a different vocabulary in
each run, and so different weights from the same seed. Passed as extra special tokens (which the
trainer numbers first, in the order given), sorted, they get the same numbers every time.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

# CJK ideographs: BERT's normaliser puts spaces around each, so none continues a word.
_CJK = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
        (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


def _is_punctuation_or_cjk(c: str) -> bool:
    """BERT's punctuation (ASCII symbols and Unicode P*) and CJK ideographs: the pre-tokenizer
    makes each its own word, so no "##c" symbol of them exists."""
    cp = ord(c)
    return (33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126 or
            unicodedata.category(c).startswith("P") or
            any(a <= cp <= b for a, b in _CJK))


def continuation_symbols(texts: Iterable[str], normalizer) -> list[str]:
    """``"##c"`` for every character ``c`` that continues a word of ``texts`` (follows a
    character of the same word, as BERT's pre-tokenizer splits them), sorted."""
    found: set[str] = set()
    seen: set[str] = set()
    blank: dict[int, str] = {}  # punctuation -> " ": then words are what whitespace separates
    for text in texts:
        text = normalizer.normalize_str(text)
        new = set(text) - seen
        if new:
            seen |= new
            blank.update({ord(c): " " for c in new if _is_punctuation_or_cjk(c)})
        found.update(_CONTINUES.findall(text.translate(blank)))
    return ["##" + c for c in sorted(found)]


_CONTINUES = re.compile(r"(?<=\S)\S")  # a character right after another in one word
