"""The README's token strip: the bundled checkpoint on a held-out English sentence.

    python tools/make_readme_figures.py        # writes tutorial/img/token_strip.png

The picture goes the way ``minielectra viz --out`` and ``tests/test_viz_browser.py`` go:
:func:`minielectra.viz.page.viz_text` writes the standalone page, headless Chromium
(``tools/browser.py``) takes the screenshot. The sentence comes from WikiText-2's test split,
which is not in the bundled checkpoint's corpus (``pretrain-en`` + ``pydocs``).

The sentence and the seed were *picked* for a figure in which most replaced tokens are caught,
among the candidates this script also scores: the first 400 test-split sentences of 16-30 word
pieces, seeds 0-4. The JSON it prints puts the pick in context with the discriminator's
precision and recall at P > 0.5 over every candidate, and lists the pick's misses and false
alarms.
"""

from __future__ import annotations

import minielectra  # noqa: F401  (first: its import sets OMP_WAIT_POLICY before torch loads)

import argparse
import gzip
import json
import os
import re
import sys
import tempfile
from pathlib import Path

import torch

from minielectra.viz.page import summary, viz_text
from minielectra.viz.scoring import load_checkpoint, score_text

from browser import render  # tools/browser.py: this script's folder is on the path

ROOT = Path(__file__).resolve().parents[1]
SENTENCE = ("Although this was a minor post , in normal times it would have been at least the "
            "start of an official career .")
SEED = 0


def candidates(data_dir: Path, tokenizer, *, limit: int = 400) -> list[str]:
    """Whole sentences of WikiText-2's test split, 16-30 word pieces, in file order."""
    raw = gzip.open(data_dir / "wikitext-2-raw" / "wiki.test.raw.gz", "rt").read()
    found = []
    for line in raw.splitlines():
        line = line.strip()
        if not line or line.startswith("="):  # blank lines and section titles
            continue
        for s in re.split(r"(?<=[.!?]) ", line):
            if 60 < len(s) < 160 and "@" not in s and s[0].isupper() and s.endswith("."):
                found.append(s)
    found = found[:limit]
    return [s for s in found if 16 <= len(tokenizer.encode(s)) <= 30]


def context(ckpt, sentences: list[str], seeds: range) -> dict:
    """Caught / missed / false alarms at P > 0.5 over every candidate sentence and seed."""
    total = dict(tokens=0, replaced=0, caught=0, missed=0, false_alarms=0)
    for s in sentences:
        for seed in seeds:
            for k, v in summary(score_text(ckpt, s, seed=seed)).items():
                total[k] += v
    return {"sentences": len(sentences), "seeds": list(seeds), **total,
            "recall": total["caught"] / total["replaced"],
            "precision": total["caught"] / (total["caught"] + total["false_alarms"])}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "tutorial" / "img" / "token_strip.png"))
    ap.add_argument("--width", type=int, default=1200)
    ap.add_argument("--height", type=int, default=540)
    args = ap.parse_args()
    torch.set_num_threads(1)
    ckpt = load_checkpoint("bundled")
    data_dir = Path(os.environ.get("MINIELECTRA_DATA_DIR", ROOT.parent / "shared" / "data"))
    records = score_text(ckpt, SENTENCE, seed=SEED)
    with tempfile.TemporaryDirectory() as tmp:
        page = viz_text("bundled", SENTENCE, seed=SEED, out=Path(tmp) / "token_strip.html")
        shot = render(page["out"], args.out, width=args.width, height=args.height)
    if shot.errors or len(shot.plots) != 1:
        print("\n".join(shot.errors) or "no figure rendered", file=sys.stderr)
        return 1
    pick = {"sentence": SENTENCE, "seed": SEED, **summary(records),
            "replaced_tokens": [
                {k: r[k] for k in ("position", "original", "token", "p_replaced")}
                for r in records if r["replaced"]],
            "false_alarm_tokens": [{k: r[k] for k in ("position", "token", "p_replaced")}
                             for r in records if not r["replaced"] and r["p_replaced"] > 0.5]}
    result = {"png": args.out, "figure_px": shot.plots[0], "pick": pick,
              "all_candidates": context(ckpt, candidates(data_dir, ckpt.tokenizer), range(5))}
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
