"""The English experiments' fair arms (the paper's generator for every ELECTRA-family arm) and
the word-order probe on English sentences."""

import pytest

from minielectra.experiments import runner
from minielectra.experiments.specs import EXPERIMENTS
from minielectra.experiments.swap_probe import swap_examples


@pytest.mark.parametrize("name", ["efficiency", "table5"])
def test_every_electra_family_arm_gets_the_papers_generator(name):
    specs = runner.plan(name, budget=100, preset="nano")  # nano's own generator is 1/32
    for spec in specs:
        m = spec.cfg.model
        assert m.generator_size == 0.25, spec.arm
        if spec.cfg.objective.name != "mlm":  # the MLM runs no generator
            assert m.generator().hidden_size == m.hidden_size // 4


def test_generator_size_sweep_covers_an_eighth_to_equal_width():
    sizes = [spec.cfg.model.generator_size for spec in runner.plan("generator-size", budget=100)]
    assert sizes == [0.125, 0.25, 0.5, 1.0]
    assert {a.label for a in EXPERIMENTS["generator-size"].arms} == {
        "generator 1/8", "generator 1/4", "generator 1/2", "generator 1"}


def test_swap_examples_transpose_one_neighbouring_pair_in_every_other_sentence():
    texts = ["the cat sat on the mat today", "a b", "one two three four five six",
             "the cat sat on the mat today", "we saw a very big red fox run",
             "it is what it is said here", "x y z w v u t s r q p o n m l"]
    out = swap_examples(texts, seed=1)
    kept = ["the cat sat on the mat today", "one two three four five six",
            "we saw a very big red fox run", "it is what it is said here"]  # 5-12 words, once
    assert [e.label for e in out] == [0, 1, 0, 1]
    for e, original in zip(out, kept):
        a, b = e.text_a.split(), original.split()
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        if e.label:
            assert diff == []
        else:
            assert len(diff) == 2 and diff[1] == diff[0] + 1
            assert (a[diff[0]], a[diff[1]]) == (b[diff[1]], b[diff[0]])


def test_budgets_picks_a_subset_and_refuses_others():
    specs = runner.plan("efficiency", budget=100, seeds=2, budgets=[1.0])
    assert [(s.arm, s.budget, s.seed) for s in specs] == [
        ("ELECTRA", 1.0, 0), ("ELECTRA", 1.0, 1), ("BERT (MLM)", 1.0, 0), ("BERT (MLM)", 1.0, 1)]
    with pytest.raises(ValueError, match="runs at"):
        runner.plan("efficiency", budget=100, budgets=[0.3])
