"""``minielectra experiment toy-grammar``: ELECTRA against BERT's MLM at equal training FLOPs, on
a toy language whose vocabulary size is a knob.

The language: ``det (adj) noun verb prep det (adj) place``, six classes of ``words_per_class``
made-up words each. Two small models pre-train for the same FLOPs, and a ridge probe on the
frozen encoder asks whether a held-out sentence has two neighbouring words swapped. Why the
vocabulary matters (paper section 3.5): the MLM's loss at a masked noun is at least ``log N``
nats, spent on a word the context cannot decide; the discriminator learns from all positions
whether each token fits, which is the structure.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import torch

from ..config import ModelConfig, ObjectiveConfig, RunConfig, TrainConfig
from ..model.electra import Electra
from ..objectives.compute import build_model, compute
from ..objectives.flops import train_flops_per_step
from ..outputs import output_folder
from ..safeio import write_file
from ..training.optim import AdamWeightDecay, lr_at, set_lr
from .probe import ridge_fit, ridge_predict
from .report import REPORT, plotly_figure, save_figure, svg_figure
from .stats import paired_t, sign_flip

CLASSES = ("det", "adj", "noun", "verb", "prep", "place")
PATTERN = (0, 1, 2, 3, 4, 0, 1, 5)  # classes of the 8 slots; slots 1 and 6 (adj) are optional
SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
PAD, CLS, SEP, MASK = 0, 2, 3, 4
SEQ_LEN = 10  # [CLS] + at most 8 words + [SEP]
BATCH = 64
ARMS = ("electra", "mlm")
SWEEP = (3, 200)  # with the default 1000: 23, 1,205 and 6,005 words
PROBE_POINTS = (0.125, 0.25, 0.5, 1.0)  # fractions of a run at which the probe also scores it


# ------------------------------------------------------------------------------ the language
def vocabulary(words_per_class: int) -> list[str]:
    """Specials, then each class's words in order: word ``k`` of class ``c`` has id
    ``5 + c * N + k``."""
    return list(SPECIALS) + [f"{c}{k}" for c in CLASSES for k in range(words_per_class)]


def sentences(n: int, words_per_class: int, *, generator: torch.Generator) -> torch.Tensor:
    """``(n, SEQ_LEN)`` ids of ``n`` random sentences, ``[CLS] ... [SEP]`` and padding."""
    g, N = generator, words_per_class
    classes = torch.tensor(PATTERN)  # (8,)
    words = len(SPECIALS) + classes * N + torch.randint(N, (n, len(PATTERN)), generator=g)
    keep = torch.ones(n, len(PATTERN), dtype=torch.bool)
    keep[:, [1, 6]] = torch.rand(n, 2, generator=g) < 0.5  # each adjective with probability 1/2
    order = torch.sort((~keep).int(), dim=1, stable=True).indices  # kept words first, in order
    packed, length = words.gather(1, order), keep.sum(1)  # (n, 8), (n,)
    ids = torch.full((n, SEQ_LEN), PAD)
    slots = torch.arange(len(PATTERN))
    ids[:, 1:1 + len(PATTERN)] = torch.where(slots < length[:, None], packed, PAD)
    ids[:, 0] = CLS
    ids[torch.arange(n), length + 1] = SEP
    return ids


def probe_set(n: int, words_per_class: int, *, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` sentences, every other one with two neighbouring words swapped (label 0; intact
    ones 1). Every swap breaks the grammar: neighbouring slots never share a class."""
    g = torch.Generator().manual_seed(seed)
    ids = sentences(n, words_per_class, generator=g)
    length = (ids > SEP).sum(1)  # words per sentence
    swapped = torch.arange(n) % 2 == 0
    j = 1 + (torch.rand(n, generator=g) * (length - 1)).long()  # first word of the pair
    rows = torch.arange(n)[swapped]
    a, b = ids[rows, j[swapped]].clone(), ids[rows, j[swapped] + 1].clone()
    ids[rows, j[swapped]], ids[rows, j[swapped] + 1] = b, a
    return ids, (~swapped).double()


# ------------------------------------------------------------------------ models and compute
def model_config(words_per_class: int) -> ModelConfig:
    return ModelConfig(vocab_size=len(vocabulary(words_per_class)), embedding_size=32,
                       hidden_size=64, num_layers=2, num_heads=2, intermediate_size=128,
                       max_position_embeddings=SEQ_LEN, generator_size=0.25, dropout=0.0,
                       attention_dropout=0.0, cls_token_id=CLS, sep_token_id=SEP,
                       mask_token_id=MASK)


def run_config(words_per_class: int, objective: str) -> RunConfig:
    run = RunConfig(model=model_config(words_per_class), objective=ObjectiveConfig(name=objective))
    run.data.max_seq_len, run.train.batch_size = SEQ_LEN, BATCH
    return run


def equal_flops_steps(words_per_class: int, electra_steps: int) -> dict[str, int]:
    """Steps of each arm: ELECTRA's ``electra_steps``, the others the same training FLOPs."""
    per_step = {a: train_flops_per_step(run_config(words_per_class, a)) for a in ARMS}
    return {a: max(1, round(electra_steps * per_step["electra"] / per_step[a])) for a in ARMS}


# ------------------------------------------------------------------------------------ judge
def features(model: Electra, ids: torch.Tensor) -> torch.Tensor:
    """``(b, 2d)``: the kept encoder's ``[CLS]`` vector and its mean over the real tokens."""
    device = next(model.parameters()).device
    ids = ids.to(device)
    with torch.no_grad():
        h = model.discriminator.encoder(ids, (ids != PAD).long()).float()  # (b, n, d)
    real = (ids != PAD).float()[..., None]
    return torch.cat([h[:, 0], (h * real).sum(1) / real.sum(1)], -1).cpu().double()


def probe_accuracy(model: Electra, train: tuple, dev: tuple, *, lam: float = 1.0) -> float:
    """Ridge probe (targets +-1) on standardised features; accuracy on ``dev``."""
    was_training = model.training
    model.eval()
    f_train, f_dev = features(model, train[0]), features(model, dev[0])
    model.train(was_training)
    mu, sd = f_train.mean(0), f_train.std(0) + 1e-6
    w = ridge_fit((f_train - mu) / sd, 2 * train[1][:, None] - 1, lam)
    predicted = ridge_predict((f_dev - mu) / sd, w).squeeze(-1) > 0
    return (predicted.double() == dev[1]).double().mean().item()


# ---------------------------------------------------------------------------------- training
def pretrain(words_per_class: int, objective: str, steps: int, *, seed: int,
             device: torch.device | str = "cpu", judge: tuple | None = None,
             lr: float = 2e-3, corpus_size: int | None = None) -> dict[str, Any]:
    """Pre-train one arm on fresh sentences; with ``judge = (train, dev)``, probe it at
    :data:`PROBE_POINTS` of the run (``curve``). ``final_loss``: the last 10% of steps'."""
    torch.manual_seed(seed)
    device = torch.device(device)
    model = build_model(model_config(words_per_class), ObjectiveConfig(name=objective)).to(device)
    # Bias correction on: without it the first updates are up to 6.5x larger (training/optim.py).
    opt = AdamWeightDecay(model.parameters(), lr=lr, weight_decay=0.01, bias_correction=True)
    # The paper's schedule shape: 10% warm-up, then linear decay to 0 at the last step.
    schedule = TrainConfig(learning_rate=lr, max_steps=steps, warmup_steps=steps // 10,
                           schedule="linear")
    g = torch.Generator().manual_seed(1000 + seed)  # data and masks: the same stream for each arm
    checkpoints = {max(1, round(f * steps)) for f in PROBE_POINTS}
    curve, tail = [], []
    corpus = (sentences(corpus_size, words_per_class, generator=g) if corpus_size else None)
    for step in range(steps):
        ids = (corpus[torch.randint(len(corpus), (BATCH,), generator=g)] if corpus_size
               else sentences(BATCH, words_per_class, generator=g)).to(device)
        out = compute(model, ids, (ids != PAD).long(), generator=g if device.type == "cpu"
                      else None, step=step, max_steps=steps)
        opt.zero_grad(set_to_none=True)
        out.loss.backward()
        set_lr(opt, lr_at(step, schedule), schedule, step)
        opt.step()
        if step >= steps - max(1, steps // 10):
            tail.append(out.disc_loss.item())
        if judge is not None and step + 1 in checkpoints:
            curve.append((step + 1, probe_accuracy(model, *judge)))
    return {"model": model.eval(), "curve": curve, "final_loss": statistics.fmean(tail)}


# ------------------------------------------------------------------------------- experiment
def _spread(values: list[float]) -> float:
    return statistics.stdev(values) if len(values) > 1 else 0.0


def paired(per_seed: dict[str, list[float]]) -> dict[str, Any]:
    """ELECTRA minus MLM, seed by seed: mean, sd, wins, and two-sided p-values of the paired t
    and the exact sign-flip test (None with one seed)."""
    diffs = [e - m for e, m in zip(per_seed["electra"], per_seed["mlm"])]
    t = paired_t(diffs)
    many = len(diffs) > 1
    return {"differences": diffs, "mean": t["mean"], "sd": t["sd"] if many else None,
            "wins": sum(d > 0 for d in diffs), "p_t": t["p"] if many else None,
            "p_sign_flip": sign_flip(diffs) if many else None}


def run_point(words_per_class: int, *, seeds: int = 4, steps: int = 600,
              device: torch.device | str = "cpu", probe_examples: int = 2000,
              first_seed: int = 0, progress: bool = False) -> dict[str, Any]:
    """Both arms at one vocabulary size, seeds ``first_seed`` to ``first_seed + seeds - 1``,
    equal training FLOPs. A seed's runs depend on nothing else, so seeds can run apart."""
    if words_per_class < 1 or seeds < 1 or steps < 1:
        raise ValueError(f"--words-per-class, --seeds and --steps must be >= 1, got "
                         f"{words_per_class}, {seeds}, {steps}")
    n_steps = equal_flops_steps(words_per_class, steps)
    per_step = {a: train_flops_per_step(run_config(words_per_class, a)) for a in ARMS}
    # Held-out probe sentences: their own seeds, never the pre-training stream's.
    judge = (probe_set(probe_examples, words_per_class, seed=1),
             probe_set(probe_examples // 2, words_per_class, seed=2))
    per_seed, curves, losses = ({a: [] for a in ARMS} for _ in range(3))
    random_init, start = [], time.perf_counter()
    for seed in range(first_seed, first_seed + seeds):
        torch.manual_seed(seed)
        random_init.append(probe_accuracy(Electra(model_config(words_per_class)), *judge))
        for arm in ARMS:
            r = pretrain(words_per_class, arm, n_steps[arm], seed=seed, device=device,
                         judge=judge)
            per_seed[arm].append(r["curve"][-1][1])
            curves[arm].append([[s * per_step[arm], acc] for s, acc in r["curve"]])
            losses[arm].append(r["final_loss"])
            if progress:
                print(f"[toy-grammar N={words_per_class}] seed {seed} {arm}: probe "
                      f"{per_seed[arm][-1]:.3f} ({time.perf_counter() - start:.0f} s)",
                      file=sys.stderr, flush=True)  # stdout: the CLI's JSON
    return {"words_per_class": words_per_class, "vocab_size": len(vocabulary(words_per_class)),
            "steps": n_steps, "flops_per_step": per_step,
            "train_flops": {a: n_steps[a] * per_step[a] for a in ARMS},
            "random_init": statistics.fmean(random_init), "random_init_per_seed": random_init,
            "per_seed": per_seed, "mean": {a: statistics.fmean(v) for a, v in per_seed.items()},
            "paired": paired(per_seed), "sd": {a: _spread(v) for a, v in per_seed.items()},
            "final_loss": {a: statistics.fmean(v) for a, v in losses.items()},
            "log_words_per_class": math.log(words_per_class),
            "curves": curves, "seconds": time.perf_counter() - start}


def run_toy_grammar(*, words_per_class: int = 1000, seeds: int = 4, steps: int = 600,
                    sweep: bool | Sequence[int] = False, out: str | Path | None = None,
                    device: torch.device | str = "cpu", probe_examples: int = 2000,
                    progress: bool = False) -> dict[str, Any]:
    """The experiment at ``words_per_class`` (and, with ``sweep``, :data:`SWEEP` or the given
    sizes: ``points``), and its report in ``out`` when set."""
    sizes = sorted({words_per_class, *((SWEEP if sweep is True else sweep) if sweep else ())})
    points = [run_point(n, seeds=seeds, steps=steps, device=device,
                        probe_examples=probe_examples, progress=progress) for n in sizes]
    main = next(p for p in points if p["words_per_class"] == words_per_class)
    result = {**main, "points": points,
              "setup": {"seeds": seeds, "electra_steps": steps, "batch": BATCH,
                        "seq_len": SEQ_LEN, "device": str(device), "probe_train": probe_examples,
                        "probe_dev": probe_examples // 2, "model": "hidden 64, 2 layers, "
                        "embeddings 32, generator 1/4 (hidden 16), tied embeddings"}}
    if out is not None:
        result["files"] = [str(f) for f in write_report(result, Path(out))]
    return result


# ----------------------------------------------------------------------------------- report
def markdown(result: dict) -> str:
    s = result["setup"]
    lines = [f"# toy-grammar: ELECTRA vs MLM at equal training FLOPs ({s['seeds']} seeds)", "",
             f"ELECTRA {s['electra_steps']} steps of {s['batch']} sentences, the MLM the same "
             "training FLOPs. Probe: ridge on frozen features, two neighbouring words swapped "
             f"or not, {s['probe_train']} training / {s['probe_dev']} held-out sentences. "
             "Accuracy mean ± sd over seeds; 'wins' = seeds where ELECTRA beats the MLM "
             "(paired by seed).", "",
             "| words per class | vocabulary | ELECTRA steps | MLM steps | FLOPs | ELECTRA | MLM "
             "| ELECTRA - MLM, paired | p (t / sign-flip) | wins | random init | MLM final loss "
             "| log(words per class) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for p in result["points"]:
        d = p.get("paired") or paired(p["per_seed"])
        pvals = "-" if d["p_t"] is None else (
            ("< 0.001" if d["p_t"] < 0.001 else f"{d['p_t']:.3f}") + f" / {d['p_sign_flip']:.3f}")
        spread = "" if d["sd"] is None else f" ± {d['sd']:.3f}"
        lines.append(
            f"| {p['words_per_class']} | {p['vocab_size']} | {p['steps']['electra']} | "
            f"{p['steps']['mlm']} | {p['train_flops']['electra']:.2e} | "
            f"{p['mean']['electra']:.3f} ± {p['sd']['electra']:.3f} | "
            f"{p['mean']['mlm']:.3f} ± {p['sd']['mlm']:.3f} | {d['mean']:+.3f}{spread} | "
            f"{pvals} | {d['wins']}/{len(p['per_seed']['mlm'])} "
            f"| {p['random_init']:.3f} | {p['final_loss']['mlm']:.2f} | "
            f"{p['log_words_per_class']:.2f} |")
    return "\n".join(lines) + "\n"


def figure_series(result: dict) -> list[dict]:
    """The two figures as ``{"stem", "title", "xlabel", "ylabel", "series"}``, the series in
    :func:`.svg.line_chart`'s form (``name``, ``x``, ``y``, ``err``)."""
    points, names = result["points"], {"electra": "ELECTRA", "mlm": "MLM (BERT)"}
    by_size = [{"name": names[a], "x": [p["words_per_class"] for p in points],
                "y": [p["mean"][a] for p in points], "err": [p["sd"][a] for p in points]}
               for a in ARMS]
    by_size.append({"name": "random init", "x": [p["words_per_class"] for p in points],
                    "y": [p["random_init"] for p in points],
                    "err": [_spread(p["random_init_per_seed"]) for p in points]})
    by_flops = []
    for a in ARMS:
        runs = result["curves"][a]  # per seed: [[flops, accuracy], ...] at the same steps
        at = range(len(runs[0]))
        by_flops.append({"name": names[a], "x": [f for f, _ in runs[0]],
                         "y": [statistics.fmean(r[i][1] for r in runs) for i in at],
                         "err": [_spread([r[i][1] for r in runs]) for i in at]})
    n = result["words_per_class"]
    return [{"stem": "toy_grammar_probe_vs_words_per_class", "series": by_size, "logx": True,
             "title": "toy grammar: probe accuracy vs words per class (equal FLOPs)",
             "xlabel": "words per class", "ylabel": "probe accuracy (held out)"},
            {"stem": "toy_grammar_probe_vs_flops", "series": by_flops, "logx": False,
             "title": f"toy grammar, {n} words per class: probe accuracy vs training FLOPs",
             "xlabel": "training FLOPs", "ylabel": "probe accuracy (held out)"}]


def write_report(result: dict, out: Path) -> list[Path]:
    """The report files, replacing ``out`` as a whole (:data:`.report.REPORT`)."""
    names = ["results.json", "results.md"]
    with output_folder(out, REPORT, replace=True) as tmp:
        write_file(tmp / names[0], json.dumps({k: v for k, v in result.items()
                                               if k != "files"}, indent=1) + "\n")
        write_file(tmp / names[1], markdown(result))
        for spec in figure_series(result):
            names += [f.name for f in save_figure(plotly_figure(spec), svg_figure(spec),
                                                  tmp / spec["stem"])]
    return [out / n for n in names]


def loss_share(grid: torch.Tensor) -> float:
    """The share of a loss-position grid's tokens (1 or 2) that carry a loss (2)."""
    return (grid == 2).sum().item() / max(1, (grid > 0).sum().item())


def loss_positions_figure(rows: dict[str, torch.Tensor], *, title: str):
    """The interactive twin of :func:`loss_positions_svg`: one heatmap grid per objective side
    by side (white: padding, grey: no loss, red: a loss), each labelled with its name and share."""
    import plotly.graph_objects as go
    colors = [[0, "white"], [0.5, "#dddddd"], [1, "#d62728"]]
    fig = go.Figure()
    for k, (name, grid) in enumerate(rows.items()):
        b, n = grid.shape
        x0 = k * (n + 2)  # two empty columns between the grids
        fig.add_trace(go.Heatmap(z=grid.flip(0).tolist(), x0=x0, showscale=False, zmin=0, zmax=2,
                                 colorscale=colors, name=name, xgap=2, ygap=2,
                                 hovertemplate=f"{name}<extra></extra>"))
        fig.add_annotation(x=x0 - 0.5, y=b - 0.5, xanchor="left", yanchor="bottom",
                           showarrow=False, text=f"{name}: {loss_share(grid):.0%} of tokens")
    return fig.update_layout(title=title, height=320, width=600, xaxis_visible=False,
                             yaxis_visible=False, plot_bgcolor="white",
                             margin=dict(t=80, l=20, r=20, b=20))


def loss_positions_svg(rows: dict[str, torch.Tensor], *, title: str) -> str:
    """A static picture of which positions carry a loss: one grid per objective (``rows``:
    name -> ``(b, n)`` 0/1/2 = padding / no loss / loss), a square per token."""
    from html import escape
    cell, gap, top = 18, 40, 44
    b, n = next(iter(rows.values())).shape
    width = len(rows) * (n * cell + gap) + gap
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" '
             f'height="{top + b * cell + 30}" font-family="sans-serif" font-size="12">'
             f'<rect width="100%" height="100%" fill="white"/>'
             f'<text x="{gap}" y="18" font-size="14">{escape(title)}</text>']
    colors = {0: "#ffffff", 1: "#dddddd", 2: "#d62728"}
    for k, (name, grid) in enumerate(rows.items()):
        x0 = gap + k * (n * cell + gap)
        parts.append(f'<text x="{x0}" y="{top - 8}">{escape(name)}: {loss_share(grid):.0%} of '
                     'tokens</text>')
        for i in range(b):
            for j in range(n):
                parts.append(f'<rect x="{x0 + j * cell}" y="{top + i * cell}" width="{cell - 2}" '
                             f'height="{cell - 2}" fill="{colors[int(grid[i, j])]}"/>')
    return "\n".join(parts + ["</svg>"]) + "\n"
