"""Results pages from the committed results files, never from numbers copied by hand.

Two directives, for the pages under ``docs/results/``:

- ``results-table PATH``: the tables of a results file. A ``.md`` file (what the study's script
  wrote) gives its Markdown tables (``:tables: 1,3`` picks some, by position); a ``.json`` file
  is rendered by the function its ``:table:`` option names in :data:`TABLES`. ``:rename: old =>
  new; ...`` replaces a cell's text exactly (a results file's old name for a checkpoint).
- ``results-source PATH``: where the figures come from: the file (downloadable), the command
  (``:command:``, else the file's own ``command``), the machine (``:machine:``, else the file's
  ``machine``) and the date (the file's ``date``, else the day of the last commit that changed
  its content, ``git log --follow``).

And one inline role, for a figure in prose: ``{result}`FILE:PATH|FORMAT` `` renders one value of
a committed JSON results file. PATH walks the file: ``.key`` into an object, ``[3]`` into a list,
``[arm=bundled,recipe=reinit-1]`` picks the one list item whose fields match, ``.mean``,
``.median`` and ``.sd`` (the sample standard deviation) on a list of numbers are what they say;
FORMAT is Python's
format spec (``+.1f``, ``.2g``, ``.0%``). ``A - B``, ``A / B`` or ``A * B`` (two such values, each
``FILE:PATH``) renders their difference, ratio or product; B may be a plain number (``... / 60``:
seconds to minutes, ``... * 100``: a fraction in points). A page's measured figures come from these, so they cannot drift from the file
(``tests/test_stated_numbers.py`` fails on one that does not).

Pages read outside Sphinx as well (the course's chapters on GitHub, the model card inside the
package) cannot use a role: it would show as raw text there. They carry each figure between two
HTML comments that name its source, which GitHub and MyST hide, so the reader sees the figure:

    ELECTRA leads by <!-- result suite:electra_vs_mlm.mean|+.1f -->+4.3<!-- /result --> points.

    <!-- results-table research/results/suite/results.md
    :tables: 1
    -->

    | the table, as ``results-table`` renders it |

    <!-- /results-table -->

``python docs/_ext/results.py fill PAGE...`` writes what each comment names between the pair
(``--check`` only reports the blocks that differ); ``tests/test_stated_numbers.py`` fails on a
filled figure that is not what its file gives.

The functions that turn a file into Markdown are plain (``render_table``, ``source_facts``), so a
test can check what a page will show without building the site (``tests/test_docs_site.py``
checks every number the README states against them).
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load(path: str) -> dict:
    return json.loads((ROOT / path).read_text())


def md_tables(text: str) -> list[str]:
    """The Markdown tables of a file, each as its lines joined."""
    tables, current = [], []
    for line in text.splitlines() + [""]:
        if line.lstrip().startswith("|"):
            current.append(line.strip())
        elif current:
            tables.append("\n".join(current))
            current = []
    return tables


def table(header: list[str], rows: list[list]) -> str:
    cell = lambda v: "" if v is None else str(v)  # noqa: E731
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def med(xs) -> float:
    return statistics.median(xs)


def signed(x: float, digits: int = 1) -> str:
    return f"{x:+.{digits}f}"


# ----------------------------------------------------------------------------- JSON renderers


def sst2_whole(d: dict) -> str:
    """The whole SST-2 training set: pre-trained against random init, paired by seed."""
    rows = []
    for r in d["runs"]:
        if not str(r["train_examples"]).startswith("all"):
            continue
        pre, rnd = med(r["pretrained"]), med(r["random_init"])
        paired = (f"{signed(r['paired_gain_mean'], 2)} ± {r['paired_gain_std']:.2f}, "
                  f"{r['seeds_where_pretrained_wins']} of {r['seeds']}"
                  if "paired_gain_mean" in r else "")
        secs = r.get("train_seconds", {}).get("pretrained")
        minutes = (f"{min(secs) / 60:.1f}-{max(secs) / 60:.1f} min" if secs else
                   r.get("train_seconds_approx", ""))
        rows.append([r["checkpoint"], r["seeds"], f"{pre:.1f}", f"{rnd:.1f}",
                     f"**{signed(pre - rnd)}**", paired, minutes])
    return table(["checkpoint (pre-training)", "seeds", "pre-trained", "random init",
                  "gain (medians)", "paired gain: mean ± sd, wins", "fine-tuning time, each run"],
                 rows)


def sst2_subsets(d: dict) -> str:
    """Fixed random subsets of the training set with the paper's recipe."""
    rows = []
    for r in d["runs"]:
        if str(r["train_examples"]).startswith("all"):
            continue
        pre = r.get("pretrained_median") or med(r["pretrained"])
        rnd = med(r["random_init"]) if isinstance(r["random_init"], list) else None
        gain = f"**{signed(pre - rnd)}**" if rnd is not None else ""
        rows.append([r["checkpoint"], f"{r['train_examples']:,}", r["seeds"], f"{pre:.1f}",
                     f"{rnd:.1f}" if rnd is not None else r["random_init"], gain])
    return table(["checkpoint (pre-training)", "training sentences", "seeds", "pre-trained",
                  "random init", "gain"], rows)


def sst2_diagnostics(d: dict) -> str:
    """Why the few-label transfer fails: probes, halves swapped, effective rank."""
    diag, other = d["diagnose_transfer_bundled_2000"], d["other_diagnostics"]
    probe = diag["linear_probe_dev_accuracy"]
    rows = [[f"linear probe on frozen features ({probe['train_examples']:,} sentences): {k}",
             f"{probe[k]['pretrained']:.1f}", f"{probe[k]['random_init']:.1f}"]
            for k in ("cls", "mean_tokens", "mean_input_embeddings")]
    swap = diag["swap"]
    rows.append(["pre-trained embeddings under random layers (2,000 sentences)",
                 f"{swap['pretrained_emb_only']['score']:.1f}", ""])
    rows.append(["random embeddings under pre-trained layers (2,000 sentences)",
                 f"{swap['pretrained_layers_only']['score']:.1f}", ""])
    for n in ("2000", "8000"):
        rows.append([f"both halves, seeds 0-2 ({int(n):,} sentences)",
                     other["both_pretrained_seeds_0_2"][n], other["both_random_seeds_0_2"][n]])
    loss = other["final_train_loss_2000_seed0"]
    rows.append(["final training loss, 2,000 sentences, seed 0", loss["pretrained"],
                 loss["random_init"]])
    rank = diag["word_embedding_effective_rank"]
    rows.append([f"word embeddings' effective rank (of {rank['dims']})",
                 f"{rank['pretrained']:.0f}", f"{rank['random_init']:.0f}"])
    return table(["measurement", "pre-trained (`mini`)", "random init"], rows)


def sst2_variants(d: dict) -> str:
    """The pre-trained arm at 2,000 sentences with one fine-tuning setting changed."""
    v = d["other_diagnostics"]["pretrained_arm_2000_variants_3_seeds"]
    return table(["fine-tuning change (pre-trained arm, 2,000 sentences, 3 seeds)",
                  "dev accuracy"], [[k, f"{x:.1f}"] for k, x in v.items()])


def shuffle_buffer(d: dict) -> str:
    names = {"pretrained_reshuffle_each_epoch": "pre-trained, a fresh permutation each epoch",
             "pretrained_shuffle_buffer_100": "pre-trained, the official input stream",
             "random_init_reshuffle_each_epoch": "random init, a fresh permutation each epoch",
             "random_init_shuffle_buffer_100": "random init, the official input stream"}
    rows = []
    for key, label in names.items():
        arm = d["arms"][key]
        scores = ", ".join(f"{s:.1f}" for s in arm.get("scores", []))
        rows.append([label, f"{arm['median']:.1f}", scores or arm.get("note", "")])
    return table(["arm (8,000 sentences, 5 seeds)", "median dev accuracy", "each seed"], rows)


def squad_v1(d: dict) -> str:
    rows = []
    for key, label in (("bundled", "`mini` (pre-trained)"), ("random_init", "random init")):
        arm = d["arms"][key]
        rows.append([label, f"{arm['metrics']['exact_match']:.1f}", f"{arm['metrics']['f1']:.1f}",
                     f"{arm['final_train_loss']:.2f}", arm["steps"],
                     f"{d['cpu_seconds_user'][key] / 60:.1f} min",
                     f"{d['wall_seconds'][key] / 60:.1f} min"])
    return table(["arm (same recipe, seed 0)", "EM", "F1", "final training loss", "steps",
                  "CPU time (user)", "wall time"], rows)


def squad_v2(d: dict) -> str:
    m = d["metrics"]
    return table(["arm", "EM", "F1", "HasAns EM", "NoAns EM", "questions", "steps",
                  "CPU time (user)"],
                 [["`bundled`", f"{m['exact']:.1f}", f"{m['f1']:.1f}", f"{m['HasAns_exact']:.1f}",
                   f"{m['NoAns_exact']:.1f}", f"{m['total']:,}", d["steps"],
                   f"{d['cpu_seconds_user'] / 60:.1f} min"]])


def _q(x: dict, fmt: str = ".2f") -> str:
    """A median with its quartiles: ``1.23 (1.10-1.31)``."""
    return f"{x['median']:{fmt}} ({x['q1']:{fmt}}-{x['q3']:{fmt}})"


def throughput(d: dict) -> str:
    """One ``bench_throughput`` file: both sides' steps/s, share of peak, the paired ratio."""
    me, hf, r = d["minielectra"], d["transformers"], d["ratio_spread"]
    frac = d["fraction_of_peak"]
    rows = [["minielectra", _q(me), f"{frac['minielectra']:.0%}",
             f"**{r['median']:.2f}x** ({r['q1']:.2f}-{r['q3']:.2f})"],
            ["transformers' modules, same objective, optimiser and loop", _q(hf),
             f"{frac['transformers']:.0%}", ""]]
    return table([f"`{d['preset']}`, batch {d['batch'][0]} x {d['batch'][1]}, {d['precision']}",
                  "steps/s, median (quartiles)", "share of the best measured product rate "
                  f"({d['peak']['gflops']:g} GFLOP/s)",
                  f"paired ratio, {d['rounds']} interleaved rounds (quartiles)"], rows)


def throughput_profile(d: dict) -> str:
    """The largest operations' share of a step's CPU time, both sides."""
    me, hf = d["profile"]["minielectra"]["ops"], d["profile"]["transformers"]["ops"]
    names = list(dict.fromkeys([*me, *hf]))
    return table(["operation (`torch.profiler`, self CPU time)", "minielectra", "transformers"],
                 [[f"`{n}`", f"{me[n]:.1%}" if n in me else "", f"{hf[n]:.1%}" if n in hf else ""]
                  for n in names])


def bench_small(d: dict) -> str:
    me, hf = d["minielectra"], d["transformers"]
    rows = [[side, f"{x['steps_per_s']:.3f} ({x['spread'][0]:.3f}-{x['spread'][1]:.3f})",
             f"{x['achieved_tflops']:.3f}"] for side, x in (("minielectra", me),
                                                            ("transformers", hf))]
    rows[0].append(f"**{d['ratio']:.2f}x**")
    rows[1].append("")
    return table([f"`small` shape, batch {d['batch'][0]} x {d['batch'][1]}, {d['precision']}"
                  f"{' + compile' if d['compile'] else ''}, {d['device_name']}",
                  "steps/s, median of rounds (spread)", "TFLOP/s achieved", "ratio"], rows)


def learning_curve_points(d: dict) -> str:
    rows = [[f"`{c['preset']}`", p["step"], f"{p['elapsed_s'] / 60:.1f}", f"{p['disc_auc']:.3f}",
             f"{p['disc_auc_text']:.3f}"] for c in d["curves"] for p in c["points"]]
    return table(["preset", "step", "minutes", "held-out AUC", "AUC without [CLS]/[SEP]"], rows)


def cpu_pretrain(d: dict) -> str:
    """``bench_cpu``: eager and compiled pre-training per preset, paired ratios, compile cost."""
    rows = []
    for name, p in d["pretrain"].items():
        frac = p["fraction_of_peak"]["compiled"]
        rows.append([f"`{name}`, batch {p['batch'][0]} x {p['batch'][1]}", _q(p["eager"]),
                     _q(p["compiled"]), f"**{p['compiled_vs_eager']['median']:.2f}x**",
                     f"{p['compile_s']['empty_cache']:.0f} s "
                     f"({p['break_even_minutes_eager']} min of eager steps)"
                     if p["break_even_minutes_eager"] is not None else
                     f"{p['compile_s']['empty_cache']:.0f} s (never repaid)",
                     f"{p['speedup_50min_run']:.2f}x",
                     f"**{p['vs_transformers_both_compiled']['median']:.2f}x**",
                     f"{frac['onednn']:.0%} / {frac['mkl']:.0%}"])
    peaks = d["peak_gflops"]
    return table(["preset", "eager steps/s (quartiles)", "compiled steps/s", "compiled / eager, "
                  "paired", "compiling (break-even)", "a 50-minute run, compiling included",
                  "/ transformers' modules, both compiled",
                  f"compiled: share of the best measured fp32 product rate, oneDNN (our layers) "
                  f"{peaks['onednn']:g} / MKL {peaks['mkl']:g} GFLOP/s"], rows)


def cpu_finetune(d: dict) -> str:
    """``bench_cpu``: SST-2 fine-tuning eager and compiled."""
    f = d["finetune"]
    if "skipped" in f:
        return table(["fine-tuning"], [[f["skipped"]]])
    return table([f"SST-2, {f['train_examples']:,} sentences, batch {f['batch']}, mean length "
                  f"{f['mean_length']:g}", "eager steps/s", "compiled steps/s",
                  "compiled / eager, paired", "compiling"],
                 [["the recipe's step", _q(f["eager"]), _q(f["compiled"]),
                   f"**{f['compiled_vs_eager']['median']:.2f}x**",
                   f"{f['compile_s']['empty_cache']:.0f} s"]])


def cpu_profile(d: dict) -> str:
    """``bench_cpu``: where a pre-training step's time goes, eager and compiled, per preset."""
    cols = [(name, side) for name, p in d["pretrain"].items() if "profile" in p
            for side in ("eager", "compiled")]
    groups = list(dict.fromkeys(g for name, side in cols
                                for g in d["pretrain"][name]["profile"][side]["groups"]))
    rows = [[g.replace("_", " ")] + [f"{d['pretrain'][n]['profile'][s]['groups'].get(g, 0):.0%}"
                                     for n, s in cols] for g in groups]
    rows.append(["ms per step (profiled)"] + [f"{d['pretrain'][n]['profile'][s]['ms_per_step']:.0f}"
                                             for n, s in cols])
    return table(["share of a step (`torch.profiler`)"] + [f"`{n}` {s}" for n, s in cols], rows)


def cpu_bf16(d: dict) -> str:
    """``bench_bf16``: fp32 and bf16 steps/s, eager and compiled, paired ratios, product shares."""
    rows = []
    for name, p in d["pretrain"].items():
        share = p["share_of_product_rate"]
        rows.append([f"`{name}` pre-training, batch {p['batch'][0]} x {p['batch'][1]}",
                     _q(p["eager_fp32"]), _q(p["eager_bf16"]),
                     f"**{p['bf16_vs_fp32_eager']['median']:.2f}x**", _q(p["compiled_fp32"]),
                     _q(p["compiled_bf16"]), f"**{p['bf16_vs_fp32_compiled']['median']:.2f}x**",
                     f"{share['compiled_fp32']:.0%} / {share['compiled_bf16']:.0%}",
                     f"{p['vs_transformers_bf16_both_compiled']['median']:.2f}x"])
    f = d["finetune"]
    if "skipped" not in f:
        rows.append([f"SST-2 fine-tuning, {f['train_examples']:,} sentences, batch {f['batch']}",
                     _q(f["fp32"]), _q(f["bf16"]), f"**{f['bf16_vs_fp32_eager']['median']:.2f}x**",
                     "", "", "", "", ""])
    rate = d["product_gflops"]
    return table(["run", "eager fp32 steps/s (quartiles)", "eager bf16", "bf16 / fp32, paired",
                  "compiled fp32", "compiled bf16", "bf16 / fp32, paired",
                  f"compiled: share of its product rate (fp32 {rate['fp32']:g} / bf16 "
                  f"{rate['bf16']:g} GFLOP/s)", "compiled bf16 / transformers' modules, same "
                  "autocast"], rows)


def cpu_bf16_main_job(d: dict) -> str:
    """``bench_bf16``: the main job in each precision, the time to held-out AUC 0.75."""
    rows = [[f"`{j['command']}`", f"{j['seconds_to_target'] / 60:.2f} min (step "
             f"{j['first_step_at_target']:,})" if j["seconds_to_target"] else "not reached",
             f"{j['final_auc']:.3f} at step {j['final_step']:,}", f"{j['wall_s'] / 60:.1f} min"]
            for j in d["main_job"].values()]
    return table(["command", "to held-out AUC 0.75", "last evaluation", "whole command"], rows)


def bundled_curve(d: dict) -> str:
    """The bundled run's held-out AUC at every evaluation, one row of steps and one of AUC (the
    rows ``minielectra.viz.report.bundled_auc_curve`` reads back from the model card)."""
    steps = sorted(d["curve"], key=int)
    return table(["step", *steps], [["AUC", *(f"{d['curve'][s]:.3f}" for s in steps)]])


SUITE_TASKS = {"cola@None": "CoLA", "sst2@8000": "SST-2", "mrpc@None": "MRPC",
               "stsb@None": "STS-B", "rte@None": "RTE"}
SUITE_ARMS = [("random init", ["random"]),
              ("ELECTRA, length 32 (the bundled checkpoint; seed 1)", ["bundled", "electra-s1"]),
              ("BERT's MLM, the same FLOPs", ["mlm-s0", "mlm-s1"]),
              ("ELECTRA at length 128, the same FLOPs", ["electra-len128", "electra-len128-s1"]),
              ("ELECTRA at two lengths (the last tenth at 128)",
               ["electra-2len", "electra-2len-s1"])]


def suite_by_pretraining_seed(d: dict) -> str:
    """The suite's recipe (``reinit-1``) by pre-training choice: a cell holds one score per
    pre-training seed, each the mean of its fine-tuning seeds; the bag-of-words floor last."""
    rows = []
    for label, arms in SUITE_ARMS:
        picked = [next(r for r in d["rows"] if r["arm"] == a and r["recipe"] == "reinit-1")
                  for a in arms]
        rows.append([label, *(", ".join(f"{r['tasks'][t]['mean']:.1f}" for r in picked)
                              for t in SUITE_TASKS),
                     ", ".join(f"{r['suite']['mean']:.1f}" for r in picked)])
    floor = {f"{f['task']}@{f['size']}": f["score"] for f in d["floor"]}
    rows.append(["TF-IDF + logistic (ridge) regression", *(f"{floor[t]:.1f}" for t in SUITE_TASKS),
                 f"{d['floor_average']['suite']:.1f}"])
    return table(["checkpoint (`mini` shape)", *SUITE_TASKS.values(), "average"], rows)


def laptop_validation(d: dict) -> str:
    """The laptop study's suite on the validation split: one row per arm (one fine-tuning seed),
    the bag-of-words floor last."""
    tasks = [key.split("@")[0] for key in SUITE_TASKS]
    split = d["validation"]
    rows = [[f"`{arm}`", *(f"{a['tasks'][t]:.1f}" for t in tasks), f"{a['average']:.1f}"]
            for arm, a in sorted(split["arms"].items(), key=lambda kv: kv[0] == "bundled")]
    floor = split["floor"]
    rows.append(["TF-IDF + logistic (ridge) regression",
                 *(f"{floor['tasks'][t]:.1f}" for t in tasks), f"{floor['average']:.1f}"])
    return table(["arm", *SUITE_TASKS.values(), "average"], rows)


TABLES = {f.__name__: f for f in (sst2_whole, sst2_subsets, sst2_diagnostics, sst2_variants,
                                  shuffle_buffer, squad_v1, squad_v2, throughput,
                                  throughput_profile, bench_small, learning_curve_points,
                                  cpu_pretrain, cpu_finetune, cpu_profile, cpu_bf16,
                                  cpu_bf16_main_job, bundled_curve, suite_by_pretraining_seed,
                                  laptop_validation)}


def render_table(path: str, *, table_name: str | None = None, tables: str | None = None,
                 rename: str | None = None) -> str:
    """The Markdown a ``results-table`` directive shows."""
    if path.endswith(".json"):
        if table_name not in TABLES:
            raise ValueError(f"{path}: :table: must be one of {', '.join(TABLES)}")
        text = TABLES[table_name](load(path))
        found = [text]
    else:
        found = md_tables((ROOT / path).read_text())
        if tables:
            found = [found[int(i) - 1] for i in tables.split(",")]
    text = "\n\n".join(found)
    for pair in filter(None, (rename or "").split(";")):
        old, new = (s.strip() for s in pair.split("=>"))
        text = re.sub(rf"(?<=\| ){re.escape(old)}(?= \|)", new, text)
    return text


LIST_STATISTICS = {"mean": statistics.fmean, "median": statistics.median, "sd": statistics.stdev}


def _walk(value, path: str, where: str):
    for m in re.finditer(r"\.([^.\[]+)|\[([^\]]+)\]", path):
        key, pick = m.groups()
        if key in LIST_STATISTICS and isinstance(value, list):
            value = LIST_STATISTICS[key](value)
        elif key is not None:
            if not isinstance(value, dict) or key not in value:
                raise KeyError(f"{where}: no key {key!r} (has {', '.join(map(str, value))})"
                               if isinstance(value, dict) else f"{where}: {key!r} of a non-object")
            value = value[key]
        elif pick.lstrip("-").isdigit():
            value = value[int(pick)]
        else:
            # a comma separates fields only before another ``key=``: a value may hold commas
            want = dict(kv.split("=", 1) for kv in re.split(r",(?=[^,=]+=)", pick))
            hits = [x for x in value if all(str(x.get(k)) == v for k, v in want.items())]
            if len(hits) != 1:
                raise KeyError(f"{where}: [{pick}] matches {len(hits)} items, not one")
            value = hits[0]
    return value


# Short names for the files pages quote most: ``{result}`suite:rows[arm=random].suite.mean|.1f` ``.
FILES = {"suite": "research/results/suite/results.json",
         "bundled": "research/results/bundled/results.json",
         "len128": "research/results/len128/diagnosis.json",
         "laptop": "research/results/laptop/results.json",
         "recipe": "research/results/recipe/results.json",
         "candidate": "research/results/suite/bundled_candidate.json",
         "by-length": "research/results/suite/disc_by_length.json",
         "squad1": "research/results/squad_v1_split_pretrained_vs_random.json",
         "curve": "research/results/learning_curve_nano_mini.json",
         "squad2": "research/results/squad_v2_split_bundled.json",
         "bf16": "benchmarks/results/cpu_bf16.json",
         "cpu": "benchmarks/results/cpu.json",
         "throughput-nano": "benchmarks/results/throughput_nano_cpu.json",
         "throughput-mini": "benchmarks/results/throughput_mini_cpu.json",
         "sst2": "research/results/sst2_pretrained_vs_random.json",
         "shuffle": "research/results/sst2_shuffle_buffer.json",
         "transfer": "research/results/transfer/results.json",
         "masking": "research/results/transfer/masking/results.json",
         "toy": "research/results/experiments/toy-grammar/results.json",
         "table5": "research/results/experiments/table5/results.json",
         "word-order": "research/results/word_order/results.json",
         "position-init": "research/results/position_init/results.json",
         "efficiency-mini": "research/results/experiments/efficiency-mini/results.json",
         "generator-size-mini": "research/results/experiments/generator-size-mini/results.json",
         "table5-mini": "research/results/experiments/table5-mini/results.json",
         "efficiency-fair": "research/results/experiments/efficiency-fair/results.json",
         "efficiency": "research/results/experiments/efficiency/results.json",
         "85-15": "research/results/transfer/bundled/results.json",
         "recipes": "research/results/transfer/bundled-recipes/results.json",
         "bundled-paper": "research/results/transfer/bundled-paper/results.json",
         "extra-norm": "research/results/transfer/small-data/extra-norm/results.json",
         "vocab-8k": "research/results/transfer/small-data/vocab-8k/results.json",
         "masking-curve": "research/results/transfer/masking-curve/results.json",
         "sinusoidal": "research/results/transfer/sinusoidal/results.json"}


def result_value(ref: str) -> float:
    """One value of a committed results file, ``FILE:PATH`` (see the module's docstring), or a
    plain number (a unit's factor: ``... / 60`` for minutes)."""
    if re.fullmatch(r"\d+(\.\d+)?", ref.strip()):
        return float(ref)
    file, _, path = ref.strip().partition(":")
    file = FILES.get(file, file)
    if not file.endswith(".json") or not path:
        raise ValueError(f"{ref!r}: expected FILE.json:PATH")
    return _walk(load(file), "." + path.lstrip("."), ref)


def render_result(spec: str) -> str:
    """The text a ``{result}`` role shows: ``FILE:PATH|FORMAT``, or ``A - B|FORMAT`` (``/``, ``*``)."""
    body, sep, fmt = spec.rpartition("|")
    if not sep:
        raise ValueError(f"{spec!r}: a figure needs its format, FILE:PATH|FORMAT")
    parts = re.split(r" ([-/*]) ", body)
    if len(parts) not in (1, 3):
        raise ValueError(f"{spec!r}: one value, or one difference, ratio or product: A - B, "
                         "A / B, A * B")
    value = result_value(parts[0])
    if len(parts) == 3:
        other = result_value(parts[2])
        op = parts[1]
        value = value - other if op == "-" else value / other if op == "/" else value * other
    return format(value, fmt) if isinstance(value, (int, float)) and fmt else str(value)


# ----------------------------------------------------------------------------- filled pages

FILLED_RESULT = re.compile(r"<!-- result (.+?) -->(.*?)<!-- /result -->", re.S)
FILLED_TABLE = re.compile(r"<!-- results-table (.+?)-->\n(.*?)<!-- /results-table -->", re.S)
TABLE_OPTIONS = {"table": "table_name", "tables": "tables", "rename": "rename"}


def _filled_table(head: str) -> str:
    """What goes between a ``results-table`` comment and its end: the table, blank lines round."""
    path, *lines = head.strip().splitlines()
    options = {}
    for line in lines:
        m = re.fullmatch(r":(\w+):\s*(.*)", line.strip())
        if not m or m.group(1) not in TABLE_OPTIONS:
            raise ValueError(f"results-table {path}: {line.strip()!r} is not one of "
                             f"{', '.join(f':{k}:' for k in TABLE_OPTIONS)}")
        options[TABLE_OPTIONS[m.group(1)]] = m.group(2)
    return "\n" + render_table(path.strip(), **options) + "\n\n"


def fill(text: str) -> str:
    """A page with every filled figure and table re-rendered from its file."""
    text = FILLED_TABLE.sub(lambda m: f"<!-- results-table {m.group(1)}-->\n"
                            f"{_filled_table(m.group(1))}<!-- /results-table -->", text)
    return FILLED_RESULT.sub(lambda m: f"<!-- result {m.group(1)} -->"
                             f"{render_result(m.group(1))}<!-- /result -->", text)


def fill_page(path: Path) -> tuple[str, str]:
    """A page's text and its filled text; a notebook's are its file, its Markdown cells filled
    (a notebook is JSON: the comments live in its Markdown cells' source)."""
    text = path.read_text()
    if path.suffix != ".ipynb":
        return text, fill(text)
    from minielectra.lessons import map_markdown

    return text, map_markdown(text, fill)


def filled_specs(text: str) -> list[str]:
    """The figures' specs a page's filled comments name."""
    return [m.group(1) for m in FILLED_RESULT.finditer(text)]


def main(argv: list[str] | None = None) -> int:
    import argparse
    parser = argparse.ArgumentParser(description="Fill a page's figures and tables from their "
                                     "results files (the comments that name them stay).")
    parser.add_argument("command", choices=["fill"])
    parser.add_argument("pages", nargs="+", type=Path)
    parser.add_argument("--check", action="store_true",
                        help="write nothing; list the pages whose filled text is out of date")
    args = parser.parse_args(argv)
    stale = []
    for page in args.pages:
        text, new = fill_page(page)
        if new != text:
            stale.append(page)
            if not args.check:
                page.write_text(new)
    for page in stale:
        print(f"{page}: {'out of date' if args.check else 'filled'}")
    return 1 if args.check and stale else 0


def commit_date(path: str) -> str | None:
    try:
        out = subprocess.run(["git", "log", "--follow", "--diff-filter=AM", "--format=%cs",
                              "-1", "--", path], cwd=ROOT, capture_output=True, text=True,
                             timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def _machine(d: dict) -> str | None:
    m = d.get("machine")
    if isinstance(m, dict):  # a script's own record of where it ran
        return (f"{m.get('cpus')}-core CPU, torch {m.get('torch')}, {m.get('torch_threads')} "
                f"torch threads, load average {m['load_average_at_start'][0]:.1f} at the start"
                if "cpus" in m else json.dumps(m))
    return m


def source_facts(path: str, *, command: str | None = None, machine: str | None = None,
                 date: str | None = None) -> dict:
    d = load(path) if path.endswith(".json") else {}
    cmd = command or d.get("command")
    return {"file": path, "command": cmd, "machine": machine or _machine(d),
            "date": date or d.get("date") or commit_date(path)}


# ----------------------------------------------------------------------------- Sphinx


def setup(app):
    from docutils import nodes
    from docutils.parsers.rst import directives
    from docutils.statemachine import StringList
    from sphinx import addnodes
    from sphinx.util.docutils import SphinxDirective

    class ResultsTable(SphinxDirective):
        required_arguments = 1
        option_spec = {"table": directives.unchanged, "tables": directives.unchanged,
                       "rename": directives.unchanged}

        def run(self):
            path = self.arguments[0]
            self.env.note_dependency(str(ROOT / path))
            try:
                text = render_table(path, table_name=self.options.get("table"),
                                    tables=self.options.get("tables"),
                                    rename=self.options.get("rename"))
            except (OSError, ValueError, KeyError, IndexError) as e:
                raise self.error(f"results-table {path}: {e}")
            box = nodes.container(classes=["results-table"])
            self.state.nested_parse(StringList(text.splitlines(), source=path), 0, box)
            return [box]

    class ResultsSource(SphinxDirective):
        required_arguments = 1
        option_spec = {"command": directives.unchanged, "machine": directives.unchanged,
                       "date": directives.unchanged}

        def run(self):
            path = self.arguments[0]
            if not (ROOT / path).exists():
                raise self.error(f"results-source: no file {path}")
            self.env.note_dependency(str(ROOT / path))
            facts = source_facts(path, **{k: self.options.get(k) for k in
                                          ("command", "machine", "date")})
            fields = nodes.field_list(classes=["results-source"])

            def field(name, *body):
                fields.append(nodes.field("", nodes.field_name(name, name),
                                          nodes.field_body("", nodes.paragraph("", "", *body))))

            here = Path(self.env.doc2path(self.env.docname)).parent
            rel = os.path.relpath(ROOT / path, here)  # downloads resolve from the page's folder
            field("results file", addnodes.download_reference(
                "", "", nodes.literal(path, path), reftarget=rel, refdoc=self.env.docname,
                refexplicit=True))
            if facts["command"]:
                field("command", nodes.literal(facts["command"], facts["command"]))
            for name in ("machine", "date"):
                field(name, nodes.Text(facts[name] or "not recorded"))
            return [fields]

    def result_role(name, rawtext, text, lineno, inliner, options=None, content=None):
        try:
            shown = render_result(text)
        except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
            msg = inliner.reporter.error(f"result {text}: {e}", line=lineno)
            return [inliner.problematic(rawtext, rawtext, msg)], [msg]
        file = text.split(":", 1)[0].strip()
        file = FILES.get(file, file)
        env = inliner.document.settings.env
        env.note_dependency(str(ROOT / file))
        return [nodes.inline(rawtext, shown, classes=["result"])], []

    app.add_role("result", result_role)
    app.add_directive("results-table", ResultsTable)
    app.add_directive("results-source", ResultsSource)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":
    raise SystemExit(main())
