"""Install a pre-training run's checkpoint as the package's bundled one, and print its card's figures.

    python tools/make_bundled.py --run runs/bundle            # its latest checkpoint
    python tools/make_bundled.py --run runs/bundle --dry-run  # the figures only

The checkpoint is loaded and written again with ``minielectra.model.checkpoint.save_pretrained`` into
``minielectra/assets/bundled/`` (atomically: a failure leaves the old one in place), with the
run's ``run_config.json`` and without ``trainer_state.pt`` (the optimiser state a resume needs,
twice the model's size, of no use to a reader). ``MODEL_CARD.md`` is kept: this script prints, as
JSON, what the card records; saved as ``research/results/bundled/results.json``, the card's
figures are filled from it (``python docs/_ext/results.py fill
minielectra/assets/bundled/MODEL_CARD.md``) and its ``evaluate`` block is copied into the card's
JSON block:

- ``curve``: the held-out discriminator ROC-AUC at every evaluation of the run (``metrics.jsonl``),
  the table ``minielectra.viz.report.bundled_auc_curve`` reads back from the card;
- ``evaluate``: ``minielectra evaluate --checkpoint bundled --max-seq-len N`` on all of its own
  held-out split (seed 0), for each length N of ``--lengths`` (default: the run's last length),
  the JSON block ``tests/test_bundled.py`` checks reproduces;
- ``wikitext2``: the same on WikiText-2's held-out documents;
- ``train_seconds`` (the run's clock at the checkpoint's step, resumed sessions added up),
  ``steps``, ``parameters`` and ``megabytes``.
"""

from __future__ import annotations

import minielectra  # noqa: F401  (first: its import sets OMP_WAIT_POLICY before torch loads)

import argparse
import json
import sys
from pathlib import Path

from minielectra import Electra
from minielectra.training.checkpoints import checkpoint_minutes
from minielectra.model.checkpoint import save_pretrained
from minielectra.model.storage import BUNDLED
from minielectra.training.opening import resolve_checkpoint
from minielectra.training.evaluate import evaluate
from minielectra.safeio import write_file
from minielectra.viz.report import read_metrics, series


def auc_curve(run: Path) -> dict[int, float]:
    """Held-out AUC by step, from the run's ``metrics.jsonl`` (the last record of a step wins: a
    resumed run repeats the evaluation it was stopped after)."""
    steps, aucs = series(read_metrics(run), "eval", "disc_auc")
    return dict(sorted({int(s): round(a, 3) for s, a in zip(steps, aucs)}.items()))


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, help="a `minielectra pretrain --out` directory")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the figures of the run's checkpoint, install nothing")
    parser.add_argument("--lengths", type=int, nargs="+",
                        help="evaluate at these example lengths (default: the run's last one; "
                        "a run pre-trained at two lengths is worth scoring at both)")
    args = parser.parse_args(argv)
    run = Path(args.run)
    checkpoint = resolve_checkpoint(str(run))  # the latest complete step_K
    step = int(checkpoint.name.split("_")[-1])
    model = Electra.from_pretrained(checkpoint)
    target = checkpoint  # --dry-run: the figures of the run's own checkpoint
    if not args.dry_run:
        extra = {"run_config.json": (checkpoint / "run_config.json").read_text()}
        # The directory is replaced as a whole: the card goes back in afterwards, outside
        # checksums.json (a card is text people edit; the checksums guard weights and vocab).
        card = BUNDLED / "MODEL_CARD.md"
        card_text = card.read_text() if card.is_file() else None
        target = save_pretrained(model, BUNDLED, extra_files=extra)
        if card_text is not None:
            write_file(card, card_text)
    facts = {
        "checkpoint": str(checkpoint), "installed": None if args.dry_run else str(target),
        "steps": step, "train_seconds": round(60 * checkpoint_minutes(str(checkpoint)), 1),
        "curve": auc_curve(run), "parameters": sum(p.numel() for p in model.parameters()),
        "megabytes": round((Path(target) / "model.safetensors").stat().st_size / 1e6, 2),
        "evaluate": {}, "wikitext2": {},
    }
    for n in args.lengths or [None]:
        at = evaluate(str(target), seed=0, max_seq_len=n)
        facts["evaluate"][at["max_seq_len"]] = at
        facts["wikitext2"][at["max_seq_len"]] = evaluate(str(target), corpus="wikitext-2", seed=0,
                                                         max_seq_len=n)
    json.dump(facts, sys.stdout, indent=2)
    print()
    return facts


if __name__ == "__main__":
    main()
