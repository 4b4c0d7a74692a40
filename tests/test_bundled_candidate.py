"""research/bundled_candidate.py: lesson 06's hand-made replacements, scored as the lesson scores
them, for the bundled checkpoint and a candidate to replace it."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "research"))

import bundled_candidate  # noqa: E402
from minielectra.viz.scoring import load_checkpoint  # noqa: E402


def test_probes_are_lesson_06_s_and_score_the_replaced_word():
    got = bundled_candidate.probes(load_checkpoint("bundled"))
    assert list(got) == [f"{old} -> {new} ({kind})" for _, old, new, kind in bundled_candidate.PROBES]
    assert all(0.0 <= p <= 1.0 for p in got.values())
    # what the suite page reads from it: the lesson's first grammar slip is caught with P > 0.9,
    # and on these probes broken grammar scores above broken meaning on average
    assert got["walked -> of (grammar)"] > 0.9
    grammar = [p for k, p in got.items() if k.endswith("(grammar)")]
    meaning = [p for k, p in got.items() if k.endswith("(meaning)")]
    assert sum(grammar) / len(grammar) > sum(meaning) / len(meaning)
