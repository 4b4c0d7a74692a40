"""What the command line says besides results: ``--help`` with defaults and an example
(:class:`HelpFormatter`), one-line errors naming the culprit (:func:`error_line`), and what to
run after pre-training (:func:`next_commands`).
"""

from __future__ import annotations

import argparse
import errno
import pickle
import shlex

# Errors that bad input, a bad file or a full disk cause: the user's to fix, so one line that
# names the culprit and no traceback (-v shows it). Anything else is a bug and keeps its traceback.
USER_ERRORS = (KeyError, ValueError, OSError, RuntimeError, EOFError, pickle.UnpicklingError)


def error_line(e: BaseException) -> str:
    """The exception's message on one line (its lines joined), naming the file of an OSError."""
    if isinstance(e, KeyError) and e.args:
        msg = str(e.args[0])
    elif isinstance(e, OSError) and e.filename is not None and e.strerror:
        msg = f"{e.filename}: {e.strerror}"
        if e.errno == errno.ENOSPC:
            msg += " (free some space, or write elsewhere: --out)"
    elif isinstance(e, OSError) and e.errno == errno.ENOSPC:  # a write that names no file
        msg = (f"{e.strerror}: the disk of the output or of the cache (MINIELECTRA_CACHE, "
               "default ~/.cache/minielectra) is full; free some space, or write elsewhere")
    else:
        msg = str(e) or type(e).__name__
    lines = [line.strip() for line in msg.splitlines() if line.strip()]
    more = f"; ... ({len(lines) - 6} more)" if len(lines) > 6 else ""
    return "; ".join(lines[:6]) + more


# One example per command under its --help (a command with its own epilog keeps that).
EXAMPLES = {
    "prepare": "minielectra prepare --corpus wikitext-103 --out data/wt103",
    "pretrain": "minielectra pretrain --preset nano --out runs/nano",
    "evaluate": "minielectra evaluate --checkpoint runs/nano --corpus my_text.txt --split all",
    "finetune": "minielectra finetune --checkpoint bundled --train reviews.csv --dev "
                "reviews_dev.csv --out runs/reviews",
    "glue": "minielectra glue --checkpoint runs/nano --tasks sst2 rte --max-train-examples 2000",
    "predict": 'minielectra predict --model runs/reviews "a warm, funny film" '
               '"a boring, lifeless mess"',
    "convert": "minielectra convert --from-hf google/electra-small-discriminator --out "
               "ckpt/small",
    "experiment": "minielectra experiment tying --preset nano --budget 500 --out experiments",
    "experiment efficiency": "minielectra experiment efficiency --preset mini --budget 6000 "
                             "--budgets 1.0 --seeds 5",
    "experiment toy-grammar": "minielectra experiment toy-grammar --sweep --seeds 5",
    "lessons": "minielectra lessons ~/electra-lessons",
    "squad-eval": "minielectra squad-eval dev-v2.0.json preds.json --na-prob-file na_probs.json",
}


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Each option's default at the end of its help line, unless the line says it already."""

    def _get_help_string(self, action):
        text = action.help or ""
        if not action.option_strings or "default" in text or action.required or \
                action.default in (None, [], argparse.SUPPRESS):
            return text
        return text + (" (default: off)" if action.default is False else
                       " (default: %(default)s)")


def finish_help(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.formatter_class = HelpFormatter
    if parser.epilog is None:  # `minielectra --help`: the first hour, in order
        parser.epilog = "examples (each command's --help has more):\n" + "\n".join(
            f"  {EXAMPLES[name]}" for name in ("pretrain", "evaluate", "finetune", "predict"))
    for action in parser._subparsers._group_actions:
        for name, p in action.choices.items():
            _finish_command(p, name)
            for nested in p._subparsers._group_actions if p._subparsers else ():
                for sub_name, q in nested.choices.items():  # experiment NAME
                    _finish_command(q, f"{name} {sub_name}",
                                    f"minielectra {name} {sub_name} --seeds 2 --out experiments")
    return parser


def _finish_command(p: argparse.ArgumentParser, name: str, example: str | None = None) -> None:
    p.formatter_class = HelpFormatter
    example = EXAMPLES.get(name, example)
    if p.epilog is None and example:
        p.epilog = f"example:\n  {example}"


def next_commands(run: str) -> str:
    """What a user runs after pre-training: evaluate, the report, fine-tuning on their own data
    (its recipe: ``finetune.run.OWN_DATA_RECIPE``) and ``predict``."""
    q = shlex.quote(run)
    # beside the run, not in it: viz refuses an output inside the --run it reads
    report = shlex.quote(run.rstrip("/") + "-report.html")
    model = shlex.quote(run.rstrip("/") + "-finetuned")
    return ("next:\n"
            f"  minielectra evaluate --checkpoint {q}              # held-out figures (JSON)\n"
            f"  minielectra viz --run {q} --out {report}"
            "   # the run's report\n"
            f"  minielectra finetune --checkpoint {q} --train TRAIN.csv --dev DEV.csv \\\n"
            f"      --out {model}   # your labelled data\n"
            f'  minielectra predict --model {model} "a text to label"')


def time_cap_note(result: dict, *, max_steps: int, max_minutes: float, argv: list[str]) -> str:
    """The line a run stopped by ``train.max_minutes`` ends with, and how to continue it."""
    again = list(argv) + ([] if "--resume" in argv else ["--resume"])
    return (f"minielectra pretrain: stopped by the time cap train.max_minutes={max_minutes:g} at "
            f"step {result['step']} of {max_steps} (checkpoint saved: {result['checkpoint']}); "
            f"continue with: {shlex.join(['minielectra', *again])} (add --set "
            "train.max_minutes=0 for no cap)")
