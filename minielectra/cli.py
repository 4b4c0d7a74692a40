"""``minielectra <command>``: a thin argparse layer; each command is one library function.

The parser of every command is here; what each does with its arguments is :mod:`.commands`, and
the table of commands and functions is ``docs/reference/cli.md``."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import shlex
import sys
import typing

from . import __version__
from .commands import (cmd_prepare, cmd_pretrain, cmd_evaluate, cmd_finetune, cmd_glue,
                      cmd_predict, cmd_squad_eval, cmd_convert, cmd_experiment, cmd_lessons,
                      cmd_viz)
from .commands import pretrain_config  # noqa: F401  (part of the API: tests, notebooks)
from .config import PRESETS
from .experiments.options import TOY_GRAMMAR, options_for
from .experiments.specs import EXPERIMENTS
from .overrides import field_types, parse_value, type_name
from .safeio import sigterm_raises
from .usage import USER_ERRORS, error_line, finish_help


LONG, LONG_HELP = ["truncate", "windows"], ("texts over finetune.max_seq_len tokens: cut, or "
                                             "read whole in overlapping windows, logits averaged")
PRECISION = dict(choices=["fp32", "bf16"], default="fp32", help="number format: fp32, or "
                 "bf16 autocast on a GPU or a CPU with native bfloat16 (default: fp32)")
CKPT_HELP = ("the model to fine-tune (default: bundled, the packaged one): a checkpoint "
             "dir (minielectra or transformers), a `pretrain --out` run dir "
             "(its latest checkpoint), or 'bundled'")


def _add_finetune(sub, sets: dict) -> None:
    p = sub.add_parser("finetune", help="fine-tune on a GLUE task or your own data (JSON)")
    p.add_argument("--checkpoint", help=CKPT_HELP)
    p.add_argument("--task", help="cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli, squad, "
                   "squad_v2, or a hub dataset hf:NAME[:CONFIG] (default: none; or give --train "
                   "and --dev)")
    p.add_argument("--train", metavar="FILE", help="your training data: .csv, .tsv or .jsonl "
                   "with columns text, [text_pair,] label; with --task squad(_v2): SQuAD JSON "
                   "(default: none)")
    p.add_argument("--dev", metavar="FILE", help="your dev data, scored after training, same "
                   "format (default: none)")
    p.add_argument("--text-column", default="text", help="column of the text")
    p.add_argument("--text-pair-column", help="column of the second text of a pair (default: "
                   "text_pair when there is one)")
    p.add_argument("--label-column", default="label", help="column of the label")
    p.add_argument("--regression", action="store_true", help="labels are numbers to predict "
                   "(without it: classes, unless a label has a fraction, like 3.5)")
    p.add_argument("--out", help="folder for result.json and the fine-tuned model, for predict "
                   "(default: not saved)")
    p.add_argument("--seed", type=int, default=0, help="the first run's seed (then +1, +2...)")
    p.add_argument("--seeds", type=int, default=1, help="runs; the median is the score")
    p.add_argument("--max-train-examples", type=int, help="a fixed random subset (CPU runs; "
                   "default: the whole training set)")
    p.add_argument("--from-scratch", action="store_true", help="start from random weights of "
                   "the checkpoint's shape (same tokenizer): the no-pre-training baseline")
    p.add_argument("--long-text", choices=LONG, default="truncate", help=LONG_HELP)
    p.add_argument("--keep-epoch", choices=["best", "last"], help="the model kept: the last "
                   "epoch's (the paper's protocol, default), or the best epoch's, chosen on 10%% "
                   "of the training set held out for it (the dev score stays honest)")
    p.add_argument("--compile", action=argparse.BooleanOptionalAction, help="torch.compile the "
                   "training step (default: on a CPU when the run is long enough to repay the "
                   "compiling, by a measured rule)")
    p.add_argument("--precision", **PRECISION)
    p.add_argument("--set", **sets)
    p.set_defaults(func=cmd_finetune)


def _add_prepare(sub) -> None:
    p = sub.add_parser("prepare", help="stream a corpus into training shards (resumable)")
    p.add_argument("--corpus", required=True,
                   help="openwebtext, wikitext-103, pretrain-en, hf:NAME[:CONFIG], a path...")
    p.add_argument("--tokenizer", default="bert-base-uncased",
                   help="bert-base-uncased (the data dir's vocab), a vocab.txt or tokenizer dir")
    p.add_argument("--out", required=True, help="where the shards go (run again to resume)")
    p.add_argument("--max-seq-len", type=int, default=128, help="tokens per example")
    p.add_argument("--held-out-fraction", type=float, default=0.02,
                   help="share of documents held out for evaluation (chosen by hash)")
    p.add_argument("--seed", type=int, default=0, help="seed of the example builder")
    p.add_argument("--workers", type=int, default=0, help="tokenising processes (0: all cores)")
    p.set_defaults(func=cmd_prepare)


def _add_pretrain(sub, sets: dict) -> None:
    p = sub.add_parser("pretrain", help="pre-train an ELECTRA model")
    p.add_argument("--preset", default="nano", help=f"one of {sorted(PRESETS)} (default nano)")
    p.add_argument("--corpus", help="pydocs, pretrain-en, wikitext-2, hf:NAME[:CONFIG], a path"
                   " (default: the preset's; nano: pydocs, built in)")
    p.add_argument("--data", help="a `minielectra prepare --out` folder (replaces --corpus; "
                   "default: none)")
    p.add_argument("--out", help="run directory: checkpoints, metrics.jsonl, config.json "
                   "(default: the preset's, runs/PRESET)")
    p.add_argument("--max-steps", type=int, help="optimiser steps (default: the preset's)")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"],
                   help="where to train (default: the preset's, auto: a GPU when there is one)")
    p.add_argument("--precision", choices=["fp32", "bf16", "fp16"],
                   help="number format: fp32; bf16 autocast on a GPU or on a CPU with native "
                   "bfloat16; fp16 on a GPU (default: fp32; bf16 for GPU presets on a GPU)")
    p.add_argument("--compile", action=argparse.BooleanOptionalAction, help="torch.compile the "
                   "step (default: on a CPU when the run is long enough to repay the compiling, "
                   "by a measured rule; on a GPU for the GPU presets)")
    p.add_argument("--seed", type=int, help="seed of weights, data order and masking "
                   "(default: the preset's, 0)")
    p.add_argument("--resume", action="store_true", help="continue from the latest checkpoint")
    p.add_argument("--set", **sets)
    p.set_defaults(func=cmd_pretrain)


def _add_evaluate(sub) -> None:
    p = sub.add_parser("evaluate", help="held-out discriminator and generator metrics (JSON)")
    p.add_argument("--checkpoint", default="bundled", help="a checkpoint dir, or 'bundled'")
    p.add_argument("--corpus", help="pydocs, a text file or folder, a corpus name (default: the "
                   "checkpoint's own corpus; pydocs when that needs a data dir that is absent)")
    p.add_argument("--split", choices=["heldout", "train", "all"], default="heldout",
                   help="which documents of the corpus: the held-out ones, the training ones, "
                   "or all (text the model never saw: --corpus FILE --split all)")
    p.add_argument("--max-examples", type=int,
                   help="evenly spaced examples of the split (default: all of them)")
    p.add_argument("--max-seq-len", type=int, help="build the examples at this length (default: "
                   "the length the checkpoint was last trained at)")
    p.add_argument("--precision", **PRECISION)
    p.set_defaults(func=cmd_evaluate)


def _add_glue(sub, sets: dict) -> None:
    p = sub.add_parser("glue", help="fine-tune on several GLUE tasks, paper-style table")
    p.add_argument("--checkpoint", help=CKPT_HELP)
    p.add_argument("--tasks", nargs="+", help="GLUE tasks (default: the 8 of the GLUE score)")
    p.add_argument("--seed", type=int, default=0, help="the first run's seed (then +1, +2...)")
    p.add_argument("--seeds", type=int, default=1, help="runs per task; the median is the score")
    p.add_argument("--max-train-examples", type=int, help="a fixed random subset (CPU runs; "
                   "default: the whole training sets)")
    p.add_argument("--out", help="folder for glue.json, glue.md and each task's result "
                   "(default: not saved)")
    p.add_argument("--save-models", action="store_true",
                   help="with --out: keep each task's median model in OUT/TASK (for predict)")
    p.add_argument("--precision", **PRECISION)
    p.add_argument("--set", **sets)
    p.set_defaults(func=cmd_glue)


def _add_predict(sub) -> None:
    p = sub.add_parser("predict", help="score sentences or pairs with a fine-tuned model (JSON)")
    p.add_argument("--model", required=True, help="a `minielectra finetune --out` directory")
    p.add_argument("sentences", nargs="*", metavar="TEXT", help="one input each; for a model of "
                   "sentence pairs, two at a time (A1 B1 A2 B2 ...); - reads standard input, one "
                   "input a line (A, or A<TAB>B); for a `finetune --task squad` model: QUESTION "
                   "PASSAGE")
    p.add_argument("--file", help="inputs: a .csv, .tsv or .jsonl file with a text column "
                   "(and a second one for pairs), or one input a line, A or A<TAB>B (default: "
                   "the SENTENCE arguments)")
    p.add_argument("--text-column", help="with --file: its text (default: the model's, or text)")
    p.add_argument("--text-pair-column", help="with --file: a pair's second text (default: the "
                   "model's, or text_pair)")
    p.add_argument("--long-text", choices=LONG, help=LONG_HELP + " (default: as fine-tuned)")
    p.set_defaults(func=cmd_predict)


def _add_squad_eval(sub) -> None:
    p = sub.add_parser("squad-eval", help="score SQuAD predictions as the official scripts do")
    p.add_argument("data", metavar="DATA.json", help="the official data file (.json or "
                   ".json.gz); its version picks the 1.1 or the 2.0 rules")
    p.add_argument("predictions", metavar="PREDICTIONS.json", help="{question id: answer}")
    p.add_argument("--na-prob-file", metavar="F", help="2.0: {id: P(no answer)} (default: none)")
    p.add_argument("--na-prob-thresh", metavar="T", type=float, default=1.0,
                   help="2.0: above this P(no answer) a question counts as answered \"\"")
    p.set_defaults(func=cmd_squad_eval)


def _add_convert(sub) -> None:
    p = sub.add_parser("convert", help="convert to or from transformers' ELECTRA format")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--from-hf", metavar="SRC", help="a transformers ELECTRA directory, or a "
                   "hub model id (owner/name: google/electra-small-discriminator)")
    g.add_argument("--to-hf", metavar="SRC", help="a minielectra checkpoint directory, or a "
                   "`pretrain --out` run dir (its latest checkpoint)")
    p.add_argument("--generator", metavar="DIR", help="with --from-hf: the ElectraForMaskedLM "
                   "directory that goes with an ElectraForPreTraining SRC (default: none)")
    p.add_argument("--out", required=True, metavar="DST", help="the converted directory")
    p.set_defaults(func=cmd_convert)


def shard_arg(text: str) -> tuple[int, int]:
    """``"2/3"`` -> ``(2, 3)``; argparse turns the ValueError into a usage line naming --shard."""
    k, _, n = text.partition("/")
    if not (k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n)):
        raise ValueError(text)
    return int(k), int(n)


shard_arg.__name__ = "K/N shard (1 <= K <= N)"  # argparse names the type in its error


def _add_experiment(sub, sets: dict) -> None:
    p = sub.add_parser("experiment", help="one of the paper's experiments: runs, table, figures",
                       description="One of the paper's experiments: every run, then its tables "
                       "and figures. `minielectra experiment NAME --help` lists NAME's options.")
    names = p.add_subparsers(dest="name", required=True, metavar="NAME")
    for name, question in [*((e.name, e.question) for e in EXPERIMENTS.values()), TOY_GRAMMAR]:
        e = names.add_parser(name, help=question, description=question)
        add_options(e, options_for(name))
        if name != TOY_GRAMMAR[0]:
            e.add_argument("--shard", type=shard_arg, metavar="K/N", help="train only the K-th "
                           "of N shares of the runs and write no report: start N processes "
                           "(K = 1..N) to use N cores, then run the command without --shard for "
                           "the report (default: all runs, then the report)")
            e.add_argument("--set", **sets)
        e.set_defaults(func=cmd_experiment)


def add_options(parser: argparse.ArgumentParser, options: type) -> None:
    """A flag for each field of the dataclass ``options`` (``words_per_class`` ->
    ``--words-per-class``): its text parsed as the field's type (:mod:`.overrides`), a list of
    values for a tuple, a switch for a bool."""
    for f in dataclasses.fields(options):
        flag, hint = "--" + f.name.replace("_", "-"), field_types(options)[f.name]
        kw = dict(dest=f.name, default=f.default, help=f.metadata["help"])
        if hint is bool:
            parser.add_argument(flag, action="store_true", **kw)
            continue
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        many = typing.get_origin(inner[0] if inner else hint) is tuple
        one = typing.get_args(inner[0])[0] if many else hint
        metavar = {int: "N", float: "X"}.get(one, f.name.upper())
        parser.add_argument(flag, type=_typed(one, flag), nargs="*" if many else None,
                            metavar=metavar, **kw)


def _typed(hint, flag: str):
    def parse(text: str):
        try:
            return parse_value(text, hint, flag)
        except ValueError as e:  # argparse prints it as a usage error naming the flag
            raise argparse.ArgumentTypeError(str(e)) from None
    parse.__name__ = type_name(hint)
    return parse


def _add_lessons(sub) -> None:
    p = sub.add_parser("lessons", help="copy the course's notebooks and tutorial into DIR")
    p.add_argument("directory", metavar="DIR",
                   help="where the course goes (as DIR/notebooks and DIR/tutorial)")
    p.add_argument("--force", action="store_true", help="overwrite lesson files already in DIR")
    p.set_defaults(func=cmd_lessons)


def _add_viz(sub) -> None:
    p = sub.add_parser(
        "viz", help="per-token views of the discriminator (HTML page or JSON records)",
        description="The token strip of one text (--text): which tokens the generator replaced, "
                    "with what,\nand the discriminator's P(replaced) for each; or a run's "
                    "training report (--run).",
        epilog="examples:\n"
               "  minielectra viz --text \"The cat sat on the mat.\" --replace 2=dog "
               "--out cat.html\n"
               "  minielectra viz --text \"The cat sat on the mat.\" --seed 3 --json\n"
               "  minielectra viz --run runs/nano --out nano.html")
    p.add_argument("--checkpoint", metavar="DIR|bundled",
                   help="a checkpoint dir (minielectra or transformers), a run dir (its latest "
                        "checkpoint), or 'bundled' (default: bundled)")
    p.add_argument("--text", help="the text to corrupt and score (with --run: default, the "
                   "run's first held-out example)")
    p.add_argument("--replace", action="append", default=[], metavar="POS=WORD",
                   help="put WORD (one vocabulary entry) at word piece POS, counted from 1 after "
                        "[CLS] (--json lists the pieces); repeatable. Without it the generator "
                        "samples (default)")
    p.add_argument("--seed", type=int, default=0, metavar="N",
                   help="the sampling seed (default 0): the same seed gives the same picture")
    p.add_argument("--top-k", type=int, default=5, metavar="K",
                   help="generator alternatives per masked token (default 5)")
    p.add_argument("--words", action="store_true",
                   help="join word pieces into words in the figures (default: pieces)")
    p.add_argument("--run", metavar="DIR", help="a `pretrain --out` dir: its training report, "
                   "checkpoint slider and held-out calibration (default: none, the --text view)")
    p.add_argument("--heldout-examples", type=int, metavar="N",
                   help="with --run: held-out examples for calibration and precision-recall "
                        "(default: all, as evaluate scores them; 0: skip)")
    p.add_argument("--force", action="store_true", help="with --out: replace an existing FILE")
    p.add_argument("--precision", **PRECISION)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--out", metavar="FILE.html", help="write a standalone page (opens offline; "
                   "default: none, one of --out or --json is needed)")
    g.add_argument("--json", action="store_true", help="print the records instead: one per "
                   "word piece (token, original, replaced, p_replaced, top_k, masked...)")
    p.set_defaults(func=cmd_viz)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="minielectra", description=(
        "Pre-train ELECTRA, fine-tune it on your data, GLUE or SQuAD, and see what its "
        "discriminator thinks of every token."))
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level")
    parser.add_argument("--version", action="version", version=f"minielectra {__version__}",
                        help="print the version and exit")
    sub = parser.add_subparsers(dest="command", required=True)
    sets = dict(action="append", default=[], metavar="SECTION.KEY=VALUE",
                help="override any config value, repeatable (default: none)")
    _add_prepare(sub)
    _add_pretrain(sub, sets)
    _add_evaluate(sub)
    _add_finetune(sub, sets)
    _add_glue(sub, sets)
    _add_predict(sub)
    _add_squad_eval(sub)
    _add_convert(sub)
    _add_experiment(sub, sets)
    _add_lessons(sub)
    _add_viz(sub)
    return finish_help(parser)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    args = build_parser().parse_args(argv)
    args.argv = argv  # what a command repeats to continue (--resume)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        with sigterm_raises():  # SIGTERM (schedulers, kill) takes Ctrl-C's clean-up path
            result = args.func(args)
    except KeyboardInterrupt as e:  # Ctrl-C: a line, and 130 (128 + SIGINT) as shells expect
        if getattr(e, "checkpoint", None) is not None:
            # pretrain continues with --resume; an experiment by running the same command
            resumes = hasattr(args, "resume") and "--resume" not in argv
            again = argv + (["--resume"] if resumes else [])
            print(f"minielectra {args.command}: {e}; continue with: "
                  f"{shlex.join(['minielectra', *again])}", file=sys.stderr)
        else:
            print(f"minielectra {args.command}: {str(e) or 'interrupted'}", file=sys.stderr)
        return getattr(e, "exit_code", 130)  # 143 (128 + SIGTERM) for SIGTERM
    except USER_ERRORS as e:
        if args.verbose:
            raise
        print(f"minielectra {args.command}: error: {error_line(e)}", file=sys.stderr)
        return 2
    if result is not None:
        try:
            print(json.dumps(result, indent=2, default=str), flush=True)
        except BrokenPipeError:  # `minielectra predict ... | head`: the reader left early
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no 2nd error at exit
    return 0
