"""What each ``minielectra`` command does with its parsed arguments: one library function each
(``cli.py`` builds the parser and runs them). Imports are lazy: ``minielectra --help`` stays
fast."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable

from .config import apply_overrides, override_keys, preset
from .ownership import refuse_overlap
from .safeio import refuse_overwrite
from .usage import next_commands, time_cap_note

# What the GPU presets add on a machine with a CUDA GPU, unless the command line sets these keys:
# bf16 autocast (fp32 where the GPU has no bf16) and one compiled graph. A CPU run keeps fp32 and
# eager mode.
GPU_PRESETS = ("small", "small++", "base")
ON_GPU = {"train.precision": "bf16", "train.compile": True}


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def pretrain_config(args: argparse.Namespace, *, say=_stderr):
    """The run config of ``minielectra pretrain``: preset, then flags, then ``--set``. What it
    chose on its own (compiling on a CPU) goes to ``say``, a line."""
    cfg = preset(args.preset)
    flags = {"data.corpus": args.corpus, "data.prepared": args.data, "train.out_dir": args.out,
             "train.max_steps": args.max_steps, "train.device": args.device,
             "train.precision": args.precision, "train.seed": args.seed,
             "train.compile": args.compile}
    overrides = [f"{k}={v}" for k, v in flags.items() if v is not None]
    cfg = apply_overrides(cfg, overrides + list(args.set))
    given = override_keys(overrides + list(args.set))
    if args.preset in GPU_PRESETS and _on_gpu(cfg.train.device):
        defaults = {k: v for k, v in ON_GPU.items() if k not in given}
        if defaults.get("train.precision") == "bf16" and not _bf16_ok():
            defaults["train.precision"] = "fp32"
        cfg = apply_overrides(cfg, [f"{k}={v}" for k, v in defaults.items()])
    elif not _on_gpu(cfg.train.device):
        cfg = cpu_choices(cfg, given, say)
    return cfg.validate()


def cpu_choices(cfg, given: set[str], say):
    """On a CPU, what the command line left open: compiling (when the run repays it) and bf16
    (where the CPU has it and the run is long enough), each by its measured rule, each a line."""
    from .training.compiling import decide_precision, decide_pretrain
    cfg.validate()  # a bad value is refused before a word about compiling
    if "train.compile" not in given:
        choice = decide_pretrain(cfg)
        cfg = apply_overrides(cfg, [f"train.compile={choice.compile}"])
        say(choice.line)
    if "train.precision" not in given and (bf16 := decide_precision(cfg)) is not None:
        cfg = apply_overrides(cfg, ["train.precision=bf16"])
        say(bf16.line)
    return cfg


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
    said: list[str] = []
    cfg = pretrain_config(args, say=said.append)

    def say_choices() -> None:  # once the run starts: a run refused is its one error line
        for line in said:
            _stderr(line)
    result = pretrain(cfg, resume=args.resume, on_start=say_choices)
    if result.get("stopped_by") == "max_minutes":  # said, not only in the JSON
        print(time_cap_note(result, max_steps=cfg.train.max_steps,
                            max_minutes=cfg.train.max_minutes, argv=args.argv), file=sys.stderr)
    print(next_commands(result["out_dir"]), file=sys.stderr)
    return result


def cmd_evaluate(args) -> dict:
    from .training.evaluate import evaluate
    return evaluate(args.checkpoint, corpus=args.corpus, max_examples=args.max_examples,
                    split=args.split, max_seq_len=args.max_seq_len, precision=args.precision,
                    progress=True)


def shipped_checkpoint(args) -> tuple[str, Callable[[], None]]:
    """``--checkpoint``, or (none given) the bundled one, and what says so in one line (when the
    run starts: a refusal stays its one error line)."""
    def say() -> None:
        if args.checkpoint is None:
            _stderr(f"minielectra {args.command}: no --checkpoint given: fine-tuning the bundled "
                    "one (a small teaching model, see its MODEL_CARD.md)")
    return args.checkpoint or "bundled", say


def cmd_finetune(args) -> dict:
    from .finetune.run import finetune
    from .finetune.summary import finetune_summary
    from .finetune.owndata.data import Columns
    columns = Columns(args.text_column, args.text_pair_column, args.label_column)
    checkpoint, say = shipped_checkpoint(args)
    flags = [f"finetune.long_text={args.long_text}"]
    flags += [f"finetune.keep_epoch={args.keep_epoch}"] if args.keep_epoch else []
    flags += ["finetune.from_scratch=true"] if args.from_scratch else []
    # no --compile/--no-compile: None, the measured rule decides once the steps are known
    flags += [f"finetune.compile={'none' if args.compile is None else args.compile}",
              f"finetune.precision={args.precision}"]
    result = finetune(checkpoint, args.task, out=args.out, seed=args.seed, seeds=args.seeds,
                      overrides=flags + args.set, max_train_examples=args.max_train_examples,
                      train=args.train, dev=args.dev, columns=columns,
                      regression=True if args.regression else None, on_start=say)
    print(finetune_summary(result, args.out, inputs=args.dev), file=sys.stderr)  # for people
    return result


def cmd_glue(args) -> dict:
    from .finetune.glue.suite import run_glue
    checkpoint, say = shipped_checkpoint(args)
    precision = [f"finetune.precision={args.precision}"]
    result = run_glue(checkpoint, tasks=args.tasks, seeds=args.seeds, seed=args.seed,
                      out=args.out, overrides=precision + args.set, save_models=args.save_models,
                      max_train_examples=args.max_train_examples, on_start=say)
    print(result["table"], file=sys.stderr)  # for people; stdout stays one JSON document
    return result


def cmd_predict(args) -> dict:
    from .finetune.predict import run_predict
    from .finetune.squad.predict import is_qa_model, run_answer
    if is_qa_model(args.model):  # a SQuAD model: QUESTION PASSAGE
        return run_answer(args.model, args.sentences, file=args.file)
    if bool(args.file) == bool(args.sentences):
        raise ValueError("give TEXT ... (pairs: A B ...), - for standard input, or --file PATH "
                         "(a CSV, TSV or JSONL file with a text column, or one input a line, "
                         "A<TAB>B for pairs)")
    return run_predict(args.model, texts=args.sentences, file=args.file,
                       text_column=args.text_column,
                       text_pair_column=args.text_pair_column, long_text=args.long_text,
                       progress=True)


def cmd_squad_eval(args) -> dict:
    from .finetune.squad.eval import run_squad_eval
    return run_squad_eval(args.data, args.predictions, na_prob_file=args.na_prob_file,
                          na_prob_thresh=args.na_prob_thresh)


def cmd_convert(args) -> dict:
    from .model.convert import convert
    from .objectives.compute import build_model
    from .training.opening import resolve_checkpoint
    direction = "from_hf" if args.from_hf else "to_hf"
    # --to-hf takes what finetune and evaluate take: a run dir means its latest checkpoint
    src = args.from_hf or resolve_checkpoint(args.to_hf)
    out = convert(src, args.out, direction=direction, generator=args.generator,
                  model_class=build_model)
    return {"converted": args.from_hf or args.to_hf, "direction": direction, "out": str(out)}


def cmd_experiment(args) -> dict:
    from .experiments.options import TOY_GRAMMAR, options_for
    options = {f.name: getattr(args, f.name) for f in dataclasses.fields(options_for(args.name))}
    if args.name == TOY_GRAMMAR[0]:
        from .experiments.toy_grammar import run_toy_grammar
        from .training.device import choose_device
        choice = choose_device()
        print(f"toy-grammar on {choice.summary}", file=sys.stderr)
        result = run_toy_grammar(**options, device=choice.device, progress=True)
        return {k: result[k] for k in ("words_per_class", "vocab_size", "steps", "mean", "paired",
                                       "random_init", "files")}
    from .experiments.runner import run_experiment
    return run_experiment(args.name, **options, overrides=args.set, shard=args.shard)


def cmd_lessons(args) -> dict:
    from .lessons import copy_lessons
    result = copy_lessons(args.directory, force=args.force)  # a clash: one line, as any OSError
    # the files by folder, counted: a list of every file would fill the screen
    parts = {"notebooks": 0, "tutorial": 0, "source": 0}
    for name in result["files"] + result["sources"]:
        parts[name.split("/")[0]] += 1
    print(f"copied to {result['directory']}: notebooks/ ({parts['notebooks']} files), tutorial/ "
          f"({parts['tutorial']}) and source/ ({parts['source']}: the library's files the lessons "
          f"link to)\nnext: {result['next']}", file=sys.stderr)
    return {"directory": result["directory"], "files": parts,
            "overwritten": len(result["overwritten"]), "next": result["next"]}


def cmd_viz(args):
    from .viz.page import viz_run, viz_text
    from .viz.scoring import parse_replacements
    replace = parse_replacements(args.replace)
    if args.out is not None:  # before any work; the page replaces a link, never its target
        refuse_overwrite(args.out, force=args.force)
        refuse_overlap(args.out, {"--run": args.run, "--checkpoint": args.checkpoint})
    if args.run is None:
        if args.text is None:
            raise ValueError('give --text "a sentence" (or --run DIR for a run\'s report)')
        return viz_text(args.checkpoint or "bundled", args.text, replace=replace, seed=args.seed,
                        top_k=args.top_k, words=args.words, out=args.out, as_json=args.json,
                        precision=args.precision)
    if args.checkpoint is not None or args.json or args.out is None:
        raise ValueError("--run DIR writes a page: give --out FILE.html, and no --checkpoint "
                         "or --json")
    return viz_run(args.run, out=args.out, text=args.text, replace=replace, seed=args.seed,
                   words=args.words, heldout_examples=args.heldout_examples, progress=True,
                   precision=args.precision)
