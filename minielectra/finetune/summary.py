"""What ``minielectra finetune`` says to a person when it ends (stdout keeps the JSON for scripts):
the dev score, where the model is, and the ``predict`` command to run next.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any


def _epoch_note(r: dict[str, Any]) -> str:
    scores = r.get("epoch_scores") or []
    if len(scores) < 2:
        return ""
    kept = r["kept_epoch"]
    if r["config"]["keep_epoch"] == "best":
        return (f"; epoch {kept} of {len(scores)} kept, the best on {r['choice_examples']} "
                "training examples held out to choose it")
    return f"; the last of {len(scores)} epochs kept, the paper's protocol"


def _score_line(result: dict[str, Any]) -> str:
    if "median_seed" not in result:  # SQuAD (.squad.train): one seed, F1 and exact match
        m = result["metrics"]
        exact = m.get("exact_match", m.get("exact"))
        return (f"finetune {result['task']}: dev F1 {m['f1']:.1f}, exact match {exact:.1f} "
                f"(seed {result['seed']}; {result['dev_questions']} dev questions)")
    seeds = result.get("seeds") or [result["median_seed"]]
    who = (f"seed {result['median_seed']}" if len(seeds) == 1 else
           f"median of {len(seeds)} seeds, seed {result['median_seed']}")
    return (f"finetune {result['task']}: dev {result['metric']} {result['score']:.1f} "
            f"({who}{_epoch_note(result)}; {result['dev_examples']} dev examples)")


def finetune_summary(result: dict[str, Any], out: str | Path | None, *,
                     inputs: str | Path | None = None) -> str:
    """Three lines: the dev score rounded, where the model is, and the command to run next
    (``predict --file inputs`` when a file of inputs is at hand, e.g. the dev file)."""
    lines = [_score_line(result)]
    if out is None:
        lines.append("model: not saved (give --out DIR to keep it for predict)")
        return "\n".join(lines)
    what = ('"a question?" "a passage that answers it."' if "median_seed" not in result else
            f"--file {shlex.quote(str(inputs))}" if inputs is not None else
            '"a new sentence"')
    lines += [f"model: {out}", f"next: minielectra predict --model {shlex.quote(str(out))} {what}"]
    return "\n".join(lines)
