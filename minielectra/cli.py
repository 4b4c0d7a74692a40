"""``minielectra <command>``: a thin argparse layer; each command is one library function.

==========  ===============================================  =================================
command     library function                                 prints
==========  ===============================================  =================================
prepare     :func:`minielectra.data.prepare.prepare`         JSON: shards and sizes
pretrain    :func:`minielectra.training.loop.pretrain`       held-out metrics, checkpoint path
evaluate    :func:`minielectra.training.evaluate.evaluate`   JSON metrics
finetune    :func:`minielectra.tasks.finetune.finetune`      JSON score(s)
glue        :func:`minielectra.tasks.suite.run_glue`         JSON (table on stderr)
predict     :func:`minielectra.tasks.predict.run_predict`    JSON predictions
squad-eval  :func:`minielectra.tasks.squad_eval.run_squad_eval`  JSON: the official SQuAD scores
convert     :func:`minielectra.model.convert.convert`        the output directory
experiment  :func:`minielectra.experiments.runner.run_experiment`  JSON summary (tables: OUT/NAME)
viz         :func:`minielectra.viz.page.viz_text`, ``viz_run``  an HTML page, or JSON records
lessons     :func:`minielectra.lessons.copy_lessons`         JSON: the copied notebooks
==========  ===============================================  =================================
"""

from __future__ import annotations

import argparse
import json
import logging
import shlex
import sys

from . import __version__
from .config import PRESETS, apply_overrides, preset
from .safeio import refuse_overwrite, sigterm_raises
from .usage import USER_ERRORS, error_line, finish_help, next_commands, time_cap_note

# What the GPU presets add on a machine with a CUDA GPU, unless the command line sets these keys:
# bf16 autocast (fp32 where the GPU has no bf16) and one compiled graph. A CPU run keeps fp32 and
# eager mode.
GPU_PRESETS = ("small", "small++", "base")
ON_GPU = {"train.precision": "bf16", "train.compile": True}


def pretrain_config(args: argparse.Namespace):
    """The run config of ``minielectra pretrain``: preset, then flags, then ``--set``."""
    cfg = preset(args.preset)
    flags = {"data.corpus": args.corpus, "data.prepared": args.data, "train.out_dir": args.out,
             "train.max_steps": args.max_steps, "train.device": args.device,
             "train.precision": args.precision, "train.seed": args.seed,
             "train.compile": True if args.compile else None}
    overrides = [f"{k}={v}" for k, v in flags.items() if v is not None]
    cfg = apply_overrides(cfg, overrides + list(args.set))
    given = {o.split("=", 1)[0].strip() for o in overrides + list(args.set)}
    if args.preset in GPU_PRESETS and _on_gpu(cfg.train.device):
        defaults = {k: v for k, v in ON_GPU.items() if k not in given}
        if defaults.get("train.precision") == "bf16" and not _bf16_ok():
            defaults["train.precision"] = "fp32"
        cfg = apply_overrides(cfg, [f"{k}={v}" for k, v in defaults.items()])
    return cfg.validate()


def _on_gpu(device: str) -> bool:
    import torch
    return device != "cpu" and torch.cuda.is_available()


def _bf16_ok() -> bool:
    import torch
    return torch.cuda.is_bf16_supported()


def cmd_prepare(args) -> dict:
    from .data.prepare import prepare
    return prepare(args.corpus, out=args.out, tokenizer=args.tokenizer,
                   max_seq_len=args.max_seq_len, held_out_fraction=args.held_out_fraction,
                   seed=args.seed, num_workers=args.workers)


def cmd_pretrain(args) -> dict | None:
    from .distributed.ddp import launched, pretrain_distributed
    if launched():  # under torchrun: one process per GPU, rank 0 prints
        return pretrain_distributed(pretrain_config(args), resume=args.resume)
    from .training.loop import pretrain
    cfg = pretrain_config(args)
    result = pretrain(cfg, resume=args.resume)
    if result.get("stopped_by") == "max_minutes":  # said, not only in the JSON
        print(time_cap_note(result, max_steps=cfg.train.max_steps,
                            max_minutes=cfg.train.max_minutes, argv=args.argv), file=sys.stderr)
    print(next_commands(result["out_dir"]), file=sys.stderr)
    return result



def cmd_evaluate(args) -> dict:
    from .training.evaluate import evaluate
    return evaluate(args.checkpoint, corpus=args.corpus, max_examples=args.max_examples,
                    split=args.split)


def shipped_checkpoint(args) -> str:
    """``--checkpoint``, or (none given) the bundled one, said in one line."""
    if args.checkpoint is None:
        print(f"minielectra {args.command}: no --checkpoint given: fine-tuning the bundled one "
              "(a small teaching model, see its MODEL_CARD.md)", file=sys.stderr)
    return args.checkpoint or "bundled"


def cmd_finetune(args) -> dict:
    from .tasks.finetune import finetune
    from .tasks.summary import finetune_summary
    from .tasks.userdata import Columns
    columns = Columns(args.text_column, args.text_pair_column, args.label_column)
    checkpoint = shipped_checkpoint(args)
    flags = [f"finetune.long_text={args.long_text}", f"finetune.keep_epoch={args.keep_epoch}"]
    flags += ["finetune.from_scratch=true"] if args.from_scratch else []
    result = finetune(checkpoint, args.task, out=args.out, seed=args.seed, seeds=args.seeds,
                      overrides=flags + args.set, max_train_examples=args.max_train_examples,
                      train=args.train, dev=args.dev, columns=columns,
                      regression=True if args.regression else None)
    print(finetune_summary(result, args.out, inputs=args.dev), file=sys.stderr)  # for people
    return result


def cmd_glue(args) -> dict:
    from .tasks.suite import run_glue
    checkpoint = shipped_checkpoint(args)
    result = run_glue(checkpoint, tasks=args.tasks, seeds=args.seeds, seed=args.seed,
                      out=args.out, overrides=args.set, save_models=args.save_models,
                      max_train_examples=args.max_train_examples)
    print(result["table"], file=sys.stderr)  # for people; stdout stays one JSON document
    return result


def cmd_predict(args) -> dict:
    from .tasks.predict import run_predict
    from .tasks.squad_predict import is_qa_model, run_answer
    if is_qa_model(args.model):  # a SQuAD model: QUESTION PASSAGE
        return run_answer(args.model, args.sentences, file=args.file)
    if bool(args.file) == bool(args.sentences) or len(args.sentences) > 2:
        raise ValueError("give SENTENCE [SENTENCE_B], or --file PATH (a CSV, TSV or JSONL "
                         "file with a text column, or one input a line, A<TAB>B for pairs)")
    pairs = [] if args.file else [(args.sentences + [None])[:2]]
    return run_predict(args.model, pairs, file=args.file, text_column=args.text_column,
                       text_pair_column=args.text_pair_column, long_text=args.long_text)


def cmd_squad_eval(args) -> dict:
    from .tasks.squad_eval import run_squad_eval
    return run_squad_eval(args.data, args.predictions, na_prob_file=args.na_prob_file,
                          na_prob_thresh=args.na_prob_thresh)


def cmd_convert(args) -> dict:
    from .model.convert import convert
    direction = "from_hf" if args.from_hf else "to_hf"
    out = convert(args.from_hf or args.to_hf, args.out, direction=direction,
                  generator=args.generator)
    return {"converted": args.from_hf or args.to_hf, "direction": direction, "out": str(out)}


def cmd_experiment(args) -> dict:
    if args.name == "transfer":  # its own runner: minielectra.experiments.transfer
        from .experiments.transfer import FINETUNE_ROWS, run_transfer
        return run_transfer(rows=args.rows or FINETUNE_ROWS, sizes=args.sizes,
                            seeds=args.seeds or 1, checkpoint=args.checkpoint,
                            preset=args.preset or "mini", pretrain_steps=args.pretrain_steps,
                            out=args.out or "experiments", overrides=args.set,
                            report_only=args.report_only)
    if args.name == "toy-grammar":
        from .experiments.toy_grammar import run_toy_grammar
        from .training.device import choose_device
        choice = choose_device()
        print(f"toy-grammar on {choice.summary}", file=sys.stderr)
        result = run_toy_grammar(words_per_class=args.words_per_class, seeds=args.seeds or 4,
                                 steps=args.steps, sweep=args.sweep, device=choice.device,
                                 out=args.out or "experiments/toy-grammar", progress=True)
        return {k: result[k] for k in ("words_per_class", "vocab_size", "steps", "mean",
                                       "random_init", "files")}
    from .experiments.runner import run_experiment
    return run_experiment(args.name, budget=args.budget, seeds=args.seeds or 1,
                          preset=args.preset or "nano", corpus=args.corpus, out=args.out or "experiments",
                          overrides=args.set,
                          probe_tasks=args.probe_tasks, finetune_tasks=args.finetune_tasks,
                          probe_examples=args.probe_examples,
                          finetune_examples=args.finetune_examples, budgets=args.budgets)


def cmd_lessons(args) -> dict:
    from .lessons import copy_lessons
    result = copy_lessons(args.directory, force=args.force)  # a clash: one line, as any OSError
    print(f"next: {result['next']}", file=sys.stderr)
    return result


def cmd_viz(args):
    from .viz.page import viz_run, viz_text
    from .viz.scoring import parse_replacements
    replace = parse_replacements(args.replace)
    if args.out is not None:  # before any work; the page replaces a link, never its target
        refuse_overwrite(args.out, force=args.force)
    if args.run is None:
        if args.text is None:
            raise ValueError('give --text "a sentence" (or --run DIR for a run\'s report)')
        return viz_text(args.checkpoint or "bundled", args.text, replace=replace, seed=args.seed,
                        top_k=args.top_k, words=args.words, out=args.out, as_json=args.json)
    if args.checkpoint is not None or args.json or args.out is None:
        raise ValueError("--run DIR writes a page: give --out FILE.html, and no --checkpoint "
                         "or --json")
    return viz_run(args.run, out=args.out, text=args.text, replace=replace, seed=args.seed,
                   words=args.words, heldout_examples=args.heldout_examples)


LONG, LONG_HELP = ["truncate", "windows"], ("texts over finetune.max_seq_len tokens: cut, or "
                                             "read whole in overlapping windows, logits averaged")
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
    p.add_argument("--keep-epoch", choices=["best", "last"], default="best", help="the epoch "
                   "kept: best dev score (a little optimistic there), or last (the paper's)")
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
                   help="number format (default: fp32; bf16 for GPU presets on a GPU)")
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
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
    p.add_argument("--set", **sets)
    p.set_defaults(func=cmd_glue)


def _add_predict(sub) -> None:
    p = sub.add_parser("predict", help="score sentences or pairs with a fine-tuned model (JSON)")
    p.add_argument("--model", required=True, help="a `minielectra finetune --out` directory")
    p.add_argument("sentences", nargs="*", metavar="SENTENCE", help="sentence A (and B); for a "
                   "`finetune --task squad` model: QUESTION PASSAGE")
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
    g.add_argument("--from-hf", metavar="SRC", help="a transformers ELECTRA directory")
    g.add_argument("--to-hf", metavar="SRC", help="a minielectra checkpoint directory")
    p.add_argument("--generator", metavar="DIR", help="with --from-hf: the ElectraForMaskedLM "
                   "directory that goes with an ElectraForPreTraining SRC (default: none)")
    p.add_argument("--out", required=True, metavar="DST", help="the converted directory")
    p.set_defaults(func=cmd_convert)


def _add_experiment(sub, sets: dict) -> None:
    p = sub.add_parser("experiment", help="one of the paper's experiments: runs, table, figures")
    p.add_argument("name", help="efficiency, table5, generator-size, tying, alectra, "
                   "procedures, toy-grammar, transfer")
    p.add_argument("--budget", type=int, help="steps of the reference ELECTRA at the largest "
                   "budget (default: the preset's train.max_steps); other arms get equal FLOPs")
    p.add_argument("--seeds", type=int, help="pre-training (and fine-tuning) seeds "
                   "(default 1; toy-grammar 4)")
    p.add_argument("--preset", help=f"one of {sorted(PRESETS)} (default nano; transfer: mini)")
    p.add_argument("--corpus", help="pre-training corpus (default: the preset's)")
    p.add_argument("--out", help="runs in OUT/runs, report in OUT/NAME (default experiments; "
                   "toy-grammar: its report in OUT, default experiments/toy-grammar)")
    p.add_argument("--words-per-class", type=int, default=200,
                   help="toy-grammar: words in each of its 6 word classes (default 200)")
    p.add_argument("--steps", type=int, default=300, help="toy-grammar: ELECTRA's steps; "
                   "the MLM gets equal training FLOPs (default 300)")
    p.add_argument("--sweep", action="store_true", help="toy-grammar: also 3 and 1000 words "
                   "per class")
    p.add_argument("--budgets", nargs="*", type=float, help="only these fractions of the "
                   "budget (efficiency: 0.125 0.25 0.5 1; default: all)")
    p.add_argument("--probe-tasks", nargs="*", help="default: GLUE tasks in the data dir")
    p.add_argument("--finetune-tasks", nargs="*", help="default: sst2 (if present)")
    p.add_argument("--probe-examples", type=int, default=4000,
                   help="training sentences of each probe")
    p.add_argument("--finetune-examples", type=int, default=2000,
                   help="training sentences of each fine-tuning run")
    p.add_argument("--set", **sets)
    t = p.add_argument_group("transfer (fine-tuning gain over random init)")
    t.add_argument("--rows", nargs="+", help="rows to measure (default: the fine-tuning ones)")
    t.add_argument("--sizes", type=int, nargs="+", default=[2000, 8000],
                   help="SST-2 training sentences (default 2000 8000)")
    t.add_argument("--checkpoint", default="bundled", help="for the fine-tuning rows")
    t.add_argument("--pretrain-steps", type=int, nargs="+", default=[1000],
                   help="budgets of the pre-training rows (the curve's points)")
    t.add_argument("--report-only", action="store_true",
                   help="run nothing: report the runs made so far")
    p.set_defaults(func=cmd_experiment)


def _add_lessons(sub) -> None:
    p = sub.add_parser("lessons", help="copy the course's notebooks and tutorial into DIR")
    p.add_argument("directory", metavar="DIR",
                   help="where the course goes (as DIR/notebooks and DIR/tutorial)")
    p.add_argument("--force", action="store_true", help="overwrite lesson files already in DIR")
    p.set_defaults(func=cmd_lessons)


def _add_viz(sub) -> None:
    p = sub.add_parser(
        "viz", help="per-token views of the discriminator (HTML page or JSON records)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
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
    g = p.add_mutually_exclusive_group()
    g.add_argument("--out", metavar="FILE.html", help="write a standalone page (opens offline; "
                   "default: none, one of --out or --json is needed)")
    g.add_argument("--json", action="store_true", help="print the records instead: one per "
                   "word piece (token, original, replaced, p_replaced, top_k, masked...)")
    p.set_defaults(func=cmd_viz)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="minielectra", description=__doc__.splitlines()[0])
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
            again = argv + ([] if "--resume" in argv else ["--resume"])
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
        print(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
