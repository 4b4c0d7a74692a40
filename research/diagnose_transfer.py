"""Why does (or doesn't) a checkpoint transfer? Three measurements behind the README's SST-2 section.

1. ``rank``: the effective rank (exp of the entropy of the normalised squared singular values) of
   the discriminator's centred word-embedding matrix, pre-trained vs random init. A random
   matrix is near full rank; a low rank means a few directions dominate every token's input.
2. ``probe``: logistic regression on frozen features (the ``[CLS]`` vector, the mean of the final
   token vectors, the mean of the input embeddings), pre-trained vs random init: how much of the
   task the features carry before any fine-tuning.
3. ``swap``: fine-tune with one half pre-trained and the other random (``emb``: pre-trained
   embeddings under random layers; ``layers``: the converse), with the paper's recipe, to see
   which half makes the pre-trained model slow to fit.

    python research/diagnose_transfer.py --checkpoint bundled                  # ~3 min, 1 thread
    python research/diagnose_transfer.py --checkpoint bundled --train-examples 8000

Prints one JSON document. The data directory is ``MINIELECTRA_DATA_DIR``, else the Hugging Face
hub.
"""

from __future__ import annotations

import minielectra  # noqa: F401  (first: its import sets OMP_WAIT_POLICY before torch loads)

import argparse
import dataclasses
import json
import tempfile
from pathlib import Path


def effective_rank(weight) -> float:
    import torch
    s = torch.linalg.svdvals(weight - weight.mean(0))
    p = s ** 2 / (s ** 2).sum()
    return float(torch.exp(-(p * p.clamp_min(1e-30).log()).sum()))


def pooled_features(encoder, encoded, pad_id: int) -> dict:
    """``{name: (N, d) array}`` for the three frozen views of each input."""
    import torch

    from minielectra.finetune.classifier import collate
    out = {"cls": [], "mean_tokens": [], "mean_input_embeddings": []}
    with torch.no_grad():
        for i in range(0, len(encoded), 256):
            b = collate(encoded[i:i + 256], pad_id)
            m = b["attention_mask"].unsqueeze(-1).float()  # (b, n, 1)
            e = encoder.embed_proj(encoder.embeddings(b["input_ids"], b.get("token_type_ids")))
            h = encoder(**b)  # (b, n, d)
            out["cls"].append(h[:, 0])
            out["mean_tokens"].append((h * m).sum(1) / m.sum(1))
            out["mean_input_embeddings"].append((e * m).sum(1) / m.sum(1))
    return {k: torch.cat(v).numpy() for k, v in out.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", required=True,
                        help="a checkpoint or run directory, or 'bundled'")
    parser.add_argument("--task", default="sst2")
    parser.add_argument("--train-examples", type=int, default=2000,
                        help="training subset for the swap fine-tuning runs")
    parser.add_argument("--probe-examples", type=int, default=4000,
                        help="training subset for the linear probes")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    import torch
    from sklearn.linear_model import LogisticRegression

    from minielectra.model.electra import Electra
    from minielectra.config import FinetuneConfig
    from minielectra.finetune import run, train as ft
    from minielectra.training.opening import open_checkpoint
    from minielectra.finetune.glue.data import get_task

    torch.set_num_threads(args.threads)
    pretrained, checkpoint = open_checkpoint(args.checkpoint)
    task = get_task(args.task)
    tokenizer = ft.get_tokenizer(pretrained, FinetuneConfig())
    result = {"benchmark": "transfer_diagnostics", "checkpoint": checkpoint, "task": args.task}

    torch.manual_seed(0)
    random_model = Electra(pretrained.config)
    result["word_embedding_effective_rank"] = {
        "dims": pretrained.config.embedding_size,
        "pretrained": round(effective_rank(
            pretrained.discriminator.encoder.embeddings.word.weight.detach()), 1),
        "random_init": round(effective_rank(
            random_model.discriminator.encoder.embeddings.word.weight.detach()), 1)}

    if not task.is_regression:
        data = ft.prepare_data(task, tokenizer, FinetuneConfig(),
                               max_train_examples=args.probe_examples)
        probes = {}
        for arm, model in (("pretrained", pretrained), ("random_init", random_model)):
            encoder = model.discriminator.encoder.eval()
            train = pooled_features(encoder, data.train, tokenizer.pad_id)
            dev = pooled_features(encoder, data.dev, tokenizer.pad_id)
            for view in train:
                clf = LogisticRegression(max_iter=2000).fit(train[view], data.train_labels)
                probes.setdefault(view, {})[arm] = round(
                    100 * clf.score(dev[view], data.dev_labels), 1)
        result["linear_probe_dev_accuracy"] = {"train_examples": len(data.train), **probes}

    # Swapped halves: build the classifier from scratch, then copy in one pre-trained half.
    # finetune() takes no model-builder argument (the library needs none), so this diagnostic
    # swaps the module's builder for its own runs and restores it after.
    build = classifier.build_classifier
    source = pretrained.discriminator.encoder
    swaps = {}
    for half in ("emb", "layers"):
        def build_swapped(pre, task_, cfg, half=half):
            model = build(pre, task_, dataclasses.replace(cfg, from_scratch=True))
            if half == "emb":
                model.encoder.embeddings.load_state_dict(source.embeddings.state_dict())
            else:
                model.encoder.layers.load_state_dict(source.layers.state_dict())
            return model
        ft.build_classifier = build_swapped  # where _run_one looks it up
        try:
            with tempfile.TemporaryDirectory() as tmp:
                r = run.finetune(pretrained, args.task, max_train_examples=args.train_examples,
                                seeds=args.seeds, progress=False, save_model=False, out=Path(tmp),
                                overrides=[f"finetune.num_threads={args.threads}"])
        finally:
            ft.build_classifier = build
        swaps[f"pretrained_{half}_only"] = {
            "score": r["score"], "scores": r["scores"],
            "final_train_loss": [round(run["final_train_loss"], 4) for run in r["runs"]]}
        print(half, json.dumps(swaps[f"pretrained_{half}_only"]), flush=True)
    result["swap"] = {"train_examples": r["train_examples"], "seeds": args.seeds,
                      "metric": r["metric"], **swaps,
                      "compare_with": "research/sst2.py --train-examples N --seeds K (both halves)"}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
