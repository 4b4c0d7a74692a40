"""Does pre-training pay off when fine-tuning on little data? ``python research/transfer.py``

Each *row* is one change, to the pre-training (a run of ``--preset`` with some overrides, for
``--pretrain-steps`` steps) or to the fine-tuning recipe (``finetune.*`` overrides) of a given
checkpoint (``--checkpoint``, default the bundled one), or both. For every row, training-set size
(``--sizes``, fixed random subsets of SST-2) and seed, the same recipe fine-tunes the pre-trained
encoder and a freshly initialised one of the same shape and tokenizer; the *gain* is their
difference, paired by seed (same subset, same data order, same head initialisation). The row also
records what the diagnostics of ``research/diagnose_transfer.py`` found to matter: the
effective rank of the word embeddings, the held-out discriminator ROC-AUC, and the pre-training
minutes on this machine.

Every fine-tuning run is a file (``OUT/transfer/finetune/<hash>.json``, the hash of what determines
it: the pre-trained weights themselves, not their path) and every pre-training run
a resumable run directory (:mod:`.runs`), so an interrupted experiment continues where it stopped
and rows that share a run (the random-init arm of rows with the same fine-tuning recipe and
shape) compute it once. The report (JSON, Markdown, SVG): :mod:`.transfer_report`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch

from minielectra.config import preset as preset_config
from minielectra.experiments.runs import (RunSpec, arm_config, pretrain_run, read_record, slug,
                                          write_record)
from minielectra.finetune.run import finetune
from minielectra.training.opening import open_checkpoint
from minielectra.model.electra import Electra
from minielectra.training.checkpoints import checkpoint_minutes as run_minutes

from transfer_report import summarise, write_report


@dataclass(frozen=True)
class Row:
    label: str
    pretrain: tuple[str, ...] | None = None  # None: the --checkpoint as it is
    finetune: tuple[str, ...] = ()


EPOCHS_10 = ("finetune.epochs=10",)
ROWS: dict[str, Row] = {
    # fine-tuning changes, on the given checkpoint
    "paper": Row("paper's recipe (3 epochs)"),
    "epochs-10": Row("10 epochs", finetune=EPOCHS_10),
    "epochs-20": Row("20 epochs", finetune=("finetune.epochs=20",)),
    "reinit-1": Row("10 epochs, top layer re-initialised",
                    finetune=EPOCHS_10 + ("finetune.reinit_layers=1",)),
    "adam": Row("10 epochs, bias-corrected Adam",
                finetune=EPOCHS_10 + ("finetune.bias_correction=true",)),
    # pre-training changes (a fresh run of --preset), fine-tuned for 10 epochs
    "pt-embeddings": Row("pre-train: tied embeddings (the preset)", (), EPOCHS_10),
    "pt-generator-1/4": Row("pre-train: generator 1/4", ("model.generator_size=0.25",),
                            EPOCHS_10),
    "pt-mask-0.25": Row("pre-train: masking rate 25%", ("objective.mask_prob=0.25",), EPOCHS_10),
    "pt-no-unmasking": Row("pre-train: every selected token masked (BabyBERTa)",
                           ("objective.mask_token_prob=1.0",), EPOCHS_10),
    "pt-vocab-8k": Row("pre-train: 8,192-piece vocabulary (BabyBERTa's 8k)",
                       ("data.vocab_size=8192", "model.vocab_size=8192"), EPOCHS_10),
    "pt-sinusoidal": Row("pre-train: position table started as sinusoids",
                         ("model.position_init=sinusoidal",), EPOCHS_10),
}
# The committed results also hold two rows whose options are not in the package: "pt-gdes"
# (model.tying=gdes, DeBERTaV3's gradient-disentangled embedding sharing) and "pt-extra-norm"
# (model.extra_norm, LTG-BERT's two extra LayerNorms a block). Neither paid (results.md); both
# re-run at commit e1398f8 of this repository, where the options and these rows live.
FINETUNE_ROWS = ("paper", "epochs-10", "epochs-20", "reinit-1", "adam")
# The bundled checkpoint's pre-training time: its model card's 3013 s on this machine (the
# installed run's own clock, 4602 s, was slowed by two other jobs on the two cores).
BUNDLED_MINUTES = 50.2


def effective_rank(weight: torch.Tensor) -> float:
    """exp(entropy) of the normalised squared singular values of the centred matrix: ~the number
    of directions in use (a random (v, e) matrix: close to e)."""
    s = torch.linalg.svdvals(weight.double() - weight.double().mean(0))
    p = s ** 2 / (s ** 2).sum()
    return float(torch.exp(-(p * p.clamp_min(1e-300).log()).sum()))


def random_twin(model: Electra, seed: int = 0) -> Electra:
    """The random-init arm's model: ``model``'s discriminator shape and tokenizer, with the
    default tying and an equal-size generator. Tying and generator size shape how the random
    numbers are drawn (the generator is initialised between the discriminator's weights and its
    projection), not what a random discriminator is; fixing them makes every row of one shape
    share one random-init arm (``finetune.from_scratch`` draws it from this config)."""
    cfg = dataclasses.replace(model.config, tying="embeddings", generator_size=1.0)
    torch.manual_seed(seed)
    twin = Electra(cfg, model.objective)
    twin.tokenizer = model.tokenizer
    return twin


def digest(data: Any) -> str:
    return hashlib.sha1(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:12]


def shape_key(twin: Electra) -> dict:
    """What a random-init arm depends on: the twin's config and the vocabulary."""
    tok = twin.tokenizer
    return {"model": dataclasses.asdict(twin.config),
            "vocab": None if tok is None else [tok.vocab_hash, tok.lowercase]}


def weights_key(model: Electra) -> str:
    """What a pre-trained arm depends on: its weights, config and vocabulary, not the path they
    were read from (a path can hold another checkpoint later: ``bundled`` after an upgrade, a run
    directory continued with ``--resume``), so a cached result is never another model's."""
    h = hashlib.sha1(json.dumps(shape_key(model), sort_keys=True, default=str).encode())
    for name, tensor in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(tensor.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:12]


def finetune_run(model: Electra, *, arm: str, identity: dict, task: str, size: int, seed: int,
                 overrides: Sequence[str], cache: Path, run: bool = True) -> dict | None:
    """One fine-tuning run (cached by what determines it): score, final loss, seconds. With
    ``run=False`` only a cached run comes back (None if there is none)."""
    overrides = list(overrides) + (["finetune.from_scratch=true"] if arm == "random" else [])
    if arm == "random":  # re-initialising layers of a random encoder is a no-op (fewsample)
        overrides = [o for o in overrides if not o.startswith("finetune.reinit_layers=")]
    key = digest({"identity": identity, "task": task, "size": size, "seed": seed,
                   "overrides": sorted(overrides)})
    path = cache / f"{key}.json"
    done = read_record(path)
    if done is not None or not run:
        return done
    start = time.perf_counter()
    r = finetune(model, task, seed=seed, max_train_examples=size, overrides=overrides,
                 progress=False, save_model=False)
    run = r["runs"][0]
    result = {"arm": arm, "task": task, "size": size, "seed": seed, "overrides": overrides,
              "score": r["score"], "final_train_loss": run["final_train_loss"],
              "steps": run["steps"], "seconds": round(time.perf_counter() - start, 1)}
    cache.mkdir(parents=True, exist_ok=True)
    write_record(path, result)
    return result


def checkpoint_minutes(checkpoint: str) -> float | None:
    """Pre-training minutes behind ``checkpoint``: the bundled model's (its model card's), or a
    run's clock (:func:`minielectra.training.checkpoints.checkpoint_minutes`)."""
    if str(checkpoint) == "bundled":
        return BUNDLED_MINUTES
    return run_minutes(checkpoint)


def checkpoint_facts(checkpoint: str, out: Path, key: str) -> dict:
    """Held-out AUC (``minielectra evaluate``, 512 examples) and pre-training minutes
    (:func:`checkpoint_minutes`) of a given checkpoint, cached under its :func:`weights_key`."""
    from minielectra.training.evaluate import evaluate
    path = out / f"checkpoint-{slug(str(checkpoint))}-{key}.json"
    done = read_record(path)
    if done is not None:
        return done
    heldout = evaluate(checkpoint, max_examples=512)
    facts = {"disc_auc": heldout.get("disc_auc"), "minutes": checkpoint_minutes(checkpoint)}
    out.mkdir(parents=True, exist_ok=True)
    write_record(path, facts)
    return facts


def pretrained_row(row: Row, *, checkpoint: str, preset: str, steps: int,
                   overrides: Sequence[str], out: Path, progress: bool,
                   run: bool = True) -> tuple[Electra, dict] | None:
    """The row's pre-trained model and its facts (AUC, minutes, steps, :func:`weights_key`);
    with ``run=False``, None for a pre-training run that has not finished."""
    if row.pretrain is None:
        model, _ = open_checkpoint(checkpoint)
        key = weights_key(model)  # hashed once: the facts' cache and every fine-tuning run's
        return model, {"checkpoint": str(checkpoint), "weights_key": key,
                       **checkpoint_facts(checkpoint, out, key)}
    cfg = arm_config(preset_config(preset), list(overrides) + list(row.pretrain), steps=steps,
                     seed=0, out_dir=Path("x"))
    spec = RunSpec(row.label, 0, 1.0, cfg)
    cfg.train.out_dir = str(out.parent / "runs" / spec.name)
    if not run and read_record(Path(cfg.train.out_dir) / "pretrain.json") is None:
        return None
    done = pretrain_run(spec, progress=progress)
    model = Electra.from_pretrained(done["checkpoint"])
    return model, {"checkpoint": done["checkpoint"], "weights_key": weights_key(model),
                   "steps": done["steps"], "disc_auc": done["heldout"].get("disc_auc"),
                   "minutes": done["train_seconds"] / 60}


def measure_row(name: str, row: Row, *, steps: int | None, sizes: Sequence[int], seeds: int,
                checkpoint: str, preset: str, task: str, overrides: Sequence[str],
                finetune_overrides: Sequence[str], out: Path, progress: bool,
                run: bool = True) -> dict | None:
    pretrained = pretrained_row(row, checkpoint=checkpoint, preset=preset, steps=steps or 0,
                                overrides=overrides, out=out, progress=progress, run=run)
    if pretrained is None:
        return None
    model, facts = pretrained
    twin = random_twin(model)
    ranks = {"pretrained": effective_rank(model.discriminator.encoder.embeddings.word.weight.detach()),
             "random_init": effective_rank(twin.discriminator.encoder.embeddings.word.weight.detach()),
             "dims": model.config.embedding_size}
    # an option given both by --set and by the row counts once (the runs' cache keys agree)
    recipe = list(dict.fromkeys(list(finetune_overrides) + list(row.finetune)))
    identity = {"pretrained": facts["weights_key"], "random": shape_key(twin)}
    runs = []
    for size in sizes:
        for seed in range(seeds):
            for arm, m in (("pretrained", model), ("random", twin)):
                r = finetune_run(m, arm=arm, identity=identity[arm], task=task, size=size,
                                 seed=seed, overrides=recipe, cache=out / "finetune", run=run)
                if r is None:
                    continue
                runs.append(r)
                if progress and run:
                    print(f"[transfer] {name} n={size} seed {seed} {arm}: {r['score']:.1f} "
                          f"({r['seconds']:.0f} s)", flush=True)
    if not run and not any(r["arm"] == "pretrained" for r in runs):  # --report-only: a row
        # or checkpoint nothing was measured for (its random arm may be another row's)
        return None
    return {"name": name, "label": row.label, "pretrain": row.pretrain, "finetune": recipe,
            "pretrain_steps": steps if row.pretrain is not None else None,
            **facts, "effective_rank": ranks, "runs": runs}


def run_transfer(*, rows: Sequence[str] = FINETUNE_ROWS, sizes: Sequence[int] = (2000, 8000),
                 seeds: int = 5, checkpoint: str | Sequence[str] = "bundled",
                 preset: str = "mini",
                 pretrain_steps: Sequence[int] = (1000,), task: str = "sst2",
                 out: str | Path = "experiments", overrides: Sequence[str] = (),
                 report_only: bool = False, progress: bool = True) -> dict[str, Any]:
    """Measure ``rows`` (keys of :data:`ROWS`) and write ``OUT/transfer/results.{json,md}`` and
    ``gain_vs_minutes.svg``. Pre-training rows run once per entry of ``pretrain_steps`` (the
    points of the gain-vs-minutes curve); fine-tuning rows once per ``checkpoint`` (several: the
    kept ``step_K`` checkpoints of one long run are another such curve). ``overrides``:
    ``finetune.*`` ones go to every fine-tuning run, the others to every pre-training run.
    ``report_only``: run nothing, report the runs already made (an interrupted experiment's seeds
    so far)."""
    unknown = [r for r in rows if r not in ROWS]
    if unknown:
        raise ValueError(f"unknown transfer row(s) {unknown}; valid: {sorted(ROWS)}")
    if seeds < 1 or not sizes or min(sizes) < 1 or not pretrain_steps or min(pretrain_steps) < 4:
        raise ValueError("transfer needs --seeds >= 1, --sizes >= 1 and --pretrain-steps >= 4")
    checkpoints = [checkpoint] if isinstance(checkpoint, (str, Path)) else list(checkpoint)
    if not checkpoints:
        raise ValueError("transfer needs at least one --checkpoint")
    ft = [o for o in overrides if o.startswith("finetune.")]
    pt = [o for o in overrides if not o.startswith("finetune.")]
    out = Path(out) / "transfer"
    measured, start = [], time.perf_counter()
    with contextlib.redirect_stdout(sys.stderr):  # stdout: the JSON the CLI prints
        for name in rows:
            row = ROWS[name]
            # a pre-training row: one run per budget; a fine-tuning row: each checkpoint
            points = ([(s, checkpoints[0]) for s in pretrain_steps] if row.pretrain is not None
                      else [(None, c) for c in checkpoints])
            for steps, ckpt in points:
                m = measure_row(name, row, steps=steps, sizes=sizes, seeds=seeds,
                                checkpoint=ckpt, preset=preset, task=task, overrides=pt,
                                finetune_overrides=ft, out=out, progress=progress,
                                run=not report_only)
                if m is not None:
                    measured.append(m)
    setup = {"rows": list(rows), "sizes": list(sizes), "seeds": seeds, "task": task,
             "checkpoint": [str(c) for c in checkpoints], "preset": preset,
             "pretrain_steps": list(pretrain_steps), "overrides": list(overrides),
             "report_only": report_only,
             "wall_seconds": round(time.perf_counter() - start, 1)}
    report = write_report(summarise(measured, sizes), measured, setup=setup, out=out)
    return {"experiment": "transfer", "out": str(out), "files": report["files"],
            "summary": report["summary"]}


def main(argv: Sequence[str] | None = None) -> None:
    import argparse
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", nargs="+", choices=sorted(ROWS), default=list(FINETUNE_ROWS),
                   help="rows to measure (default: the fine-tuning ones)")
    p.add_argument("--sizes", type=int, nargs="+", default=[2000, 8000],
                   help="SST-2 training sentences (default 2000 8000)")
    p.add_argument("--seeds", type=int, default=1, help="fine-tuning seeds (default 1)")
    p.add_argument("--checkpoint", nargs="+", default=["bundled"],
                   help="for the fine-tuning rows; several (e.g. a run's kept step_K "
                   "checkpoints) make a gain-vs-minutes curve")
    p.add_argument("--preset", default="mini", help="the pre-training rows' preset (default mini)")
    p.add_argument("--pretrain-steps", type=int, nargs="+", default=[1000],
                   help="budgets of the pre-training rows (the curve's points)")
    p.add_argument("--out", default="experiments", help="runs and report in OUT/transfer")
    p.add_argument("--report-only", action="store_true",
                   help="run nothing: report the runs made so far")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="a pre-training or finetune.* override, repeatable")
    a = p.parse_args(argv)
    result = run_transfer(rows=a.rows, sizes=a.sizes, seeds=a.seeds, checkpoint=a.checkpoint,
                          preset=a.preset, pretrain_steps=a.pretrain_steps, out=a.out,
                          overrides=a.set, report_only=a.report_only)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
