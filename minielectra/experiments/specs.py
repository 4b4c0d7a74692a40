"""What each experiment compares: its arms (config overrides), budgets, and the paper's numbers.

Budgets are fractions of ``--budget``, the steps of the reference arm. ``equal="flops"`` gives
every arm the reference's training FLOPs; ``equal="steps"`` the same steps (the paper's
generator-size figure). Every ELECTRA-family arm gets the paper's generator, 1/4 of the
discriminator's width (``nano``'s 1/32 is tuned for AUC per CPU minute, not for the encoder).
Paper numbers are GLUE dev scores of base-scale models, for orientation only.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Arm:
    label: str
    overrides: tuple[str, ...] = ()
    paper: float | None = None  # the paper's GLUE score for this arm, where it reports one


@dataclass(frozen=True)
class Experiment:
    name: str
    question: str
    arms: tuple[Arm, ...]
    budgets: tuple[float, ...] = (1.0,)
    equal: str = "flops"  # "flops" or "steps"
    paper_note: str = ""
    extra: tuple[str, ...] = field(default_factory=tuple)  # overrides every arm shares


PAPER_GENERATOR = ("model.generator_size=0.25",)  # ELECTRA-Small's and the paper's default

ELECTRA = Arm("ELECTRA", ("objective.name=electra",), 85.0)
MLM = Arm("BERT (MLM)", ("objective.name=mlm",), 82.2)

EXPERIMENTS: dict[str, Experiment] = {e.name: e for e in (
    Experiment(
        "efficiency", "ELECTRA vs BERT-style MLM at equal training FLOPs, at several budgets "
        "(and at equal wall time, read off the same runs)",
        (ELECTRA, MLM), budgets=(0.125, 0.25, 0.5, 1.0), extra=PAPER_GENERATOR,
        paper_note="Paper Table 1 / Figure 4: at equal compute ELECTRA-Small 79.9 vs BERT-Small "
        "75.1 GLUE dev; the gap is largest for small models and short training."),
    Experiment(
        "table5", "Where does ELECTRA's gain come from? The five objectives of paper Table 5",
        (ELECTRA, Arm("All-Tokens MLM", ("objective.name=all-tokens-mlm",), 84.3),
         Arm("Replace MLM", ("objective.name=replace-mlm",), 82.4),
         Arm("ELECTRA 15%", ("objective.name=electra-15",), 82.4), MLM),
        extra=PAPER_GENERATOR,
        paper_note="Paper Table 5 (GLUE dev, base size, same training): ELECTRA 85.0, "
        "All-Tokens MLM 84.3, Replace MLM 82.4, ELECTRA 15% 82.4, BERT 82.2."),
    Experiment(
        "generator-size", "How large should the generator be? (paper Figure 3 left)",
        tuple(Arm(f"generator {label}", (f"model.generator_size={size}",))
              for label, size in (("1/8", 0.125), ("1/4", 0.25), ("1/2", 0.5), ("1", 1.0))),
        equal="steps",
        paper_note="Paper Figure 3 left: generators 1/4-1/2 of the discriminator's size work "
        "best; an equal-size generator can make the task too hard."),
    Experiment(
        "tying", "Weight sharing between generator and discriminator (paper section 3.2)",
        (Arm("no tying", ("model.tying=none",), 83.6),
         Arm("tied embeddings", ("model.tying=embeddings",), 84.3),
         Arm("all weights tied", ("model.tying=all",), 84.4)),
        extra=("model.generator_size=1.0",),
        paper_note="Paper section 3.2 (equal-size generator and discriminator, 500k steps): no "
        "tying 83.6, tied token embeddings 84.3, all weights tied 84.4."),
    Experiment(
        "alectra", "ALECTRA: ALBERT-style cross-layer sharing, for ELECTRA and for MLM",
        (ELECTRA, Arm("ALECTRA (shared layers)", ("objective.name=electra",
                                                  "model.share_layers=true")),
         MLM, Arm("ALBERT-style MLM (shared layers)", ("objective.name=mlm",
                                                       "model.share_layers=true"))),
        paper_note="Not in the paper: lmtuners' ALECTRA blog reports ALBERT-style sharing "
        "works with replaced token detection at a fraction of the parameters."),
    Experiment(
        "procedures", "Training procedures of paper section 3.2: joint, two-stage, adversarial",
        (Arm("joint (ELECTRA)", ("objective.procedure=joint",)),
         Arm("two-stage", ("objective.procedure=two-stage",)),
         Arm("adversarial", ("objective.procedure=adversarial",))),
        extra=("model.generator_size=1.0", "model.tying=none"),
        paper_note="Paper Figure 3 right: joint maximum-likelihood training beats two-stage and "
        "adversarial training; the adversarial generator reaches 58% MLM accuracy vs 65%."),
)}


def get_experiment(name: str) -> Experiment:
    if name not in EXPERIMENTS:
        raise KeyError(f"unknown experiment {name!r}; valid: {sorted(EXPERIMENTS)}")
    return EXPERIMENTS[name]
