"""What each ``minielectra experiment NAME`` takes: its options, one typed field each.

A field is a flag of the subcommand (``words_per_class`` is ``--words-per-class``), parsed by
:mod:`minielectra.overrides`, and a keyword argument of :func:`.runner.run_experiment` or
:func:`.toy_grammar.run_toy_grammar`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..presets import PRESETS

TOY_GRAMMAR = ("toy-grammar", "ELECTRA against BERT's MLM at equal training FLOPs on a toy "
               "language whose vocabulary size is a knob")


def option(default: Any, help: str) -> Any:
    return field(default=default, metadata={"help": help})


@dataclass
class PaperOptions:
    """Every paper experiment: pre-train each arm, judge its encoder, write the report."""

    preset: str = option("nano", f"the config every arm starts from, one of {sorted(PRESETS)}")
    budget: int | None = option(None, "steps of the reference ELECTRA at the largest budget "
                                "(default: the preset's train.max_steps); other arms get "
                                "equal FLOPs")
    seeds: int = option(1, "pre-training (and fine-tuning) seeds")
    corpus: str | None = option(None, "pre-training corpus (default: the preset's)")
    out: str = option("experiments", "runs in OUT/runs, the report in OUT/NAME")
    probe_tasks: tuple[str, ...] | None = option(None, "GLUE tasks to probe (default: those "
                                                 "in the data dir)")
    finetune_tasks: tuple[str, ...] | None = option(None, "GLUE tasks to fine-tune on "
                                                    "(default: sst2, if present)")
    probe_examples: int = option(4000, "training sentences of each probe")
    finetune_examples: int = option(2000, "training sentences of each fine-tuning run")


@dataclass
class EfficiencyOptions(PaperOptions):
    budgets: tuple[float, ...] | None = option(None, "only these fractions of the budget, of "
                                               "0.125 0.25 0.5 1 (default: all)")


@dataclass
class ToyGrammarOptions:
    """The toy language: ELECTRA and an MLM at equal FLOPs, probed for word order."""

    words_per_class: int = option(1000, "words in each of its 6 word classes")
    seeds: int = option(4, "pre-training seeds")
    steps: int = option(600, "ELECTRA's steps; the MLM gets equal training FLOPs")
    sweep: bool = option(False, "also 3 and 200 words per class")
    out: str = option("experiments/toy-grammar", "where the report goes")


def options_for(name: str) -> type:
    """The options dataclass of experiment ``name``."""
    return {"efficiency": EfficiencyOptions, TOY_GRAMMAR[0]: ToyGrammarOptions}.get(
        name, PaperOptions)
