"""The bag-of-words floor of the suite (:mod:`suite`): TF-IDF features, a linear model.

What a practitioner tries first, in a second per task: word and word-pair TF-IDF (fitted on the
training texts), logistic regression for the classification tasks and ridge regression for
STS-B, the regularisation chosen by 5-fold cross-validation on the training set (the dev set is
only scored). A pair of texts is the two TF-IDF vectors side by side, their elementwise product
(the words they share) and their cosine similarity. The same training subsets as the fine-tuning
runs (a fixed random subset, ``minielectra.finetune.task.subset``), scored with the same metrics.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegressionCV, RidgeCV

from minielectra.finetune.glue.data import get_task, load_split
from minielectra.finetune.metrics import compute_metrics
from minielectra.finetune.task import subset
from minielectra.safeio import write_file

from suite_spec import EXTRA, FEW, SUITE


def features(vectorizer: TfidfVectorizer, examples, pair: bool):
    a = vectorizer.transform([e.text_a for e in examples])
    if not pair:
        return a
    b = vectorizer.transform([e.text_b or "" for e in examples])
    shared = a.multiply(b)
    cosine = sp.csr_matrix(np.asarray(shared.sum(axis=1)))  # rows are L2-normalised
    return sp.hstack([a, b, shared, cosine]).tocsr()


def floor_score(task_name: str, size: int | None, *, task=None) -> dict:
    """The floor on ``task_name``'s dev set, or on the dev part of ``task`` (one whose
    ``examples`` split differently: :func:`validation_split.on_validation`)."""
    if task is None:
        task = get_task(task_name)
        train, dev = subset(load_split(task, "train"), size), load_split(task, "dev")
    else:
        train, dev = task.examples("train"), task.examples("dev")
    start = time.perf_counter()
    texts = [e.text_a for e in train] + [e.text_b for e in train if e.text_b]
    vec = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=1).fit(texts)
    x_train, x_dev = (features(vec, s, task.is_pair) for s in (train, dev))
    y = np.array([e.label for e in train])
    if task.is_regression:
        model = RidgeCV(alphas=np.logspace(-2, 3, 12)).fit(x_train, y)
    else:
        model = LogisticRegressionCV(Cs=np.logspace(-2, 3, 12), cv=5, max_iter=2000).fit(x_train, y)
    scores = compute_metrics(task, model.predict(x_dev), np.array([e.label for e in dev]))
    return {"task": task_name, "size": size, "train_examples": len(train),
            "score": scores[task.metric], "metrics": scores,
            "seconds": round(time.perf_counter() - start, 2)}


def run_floor(out: Path, *, split: str = "dev") -> dict:
    """Every task and size of the suite, scored on the dev sets (``split="validation"``: the
    suite's five tasks at their sizes, trained without the validation split and scored on it);
    written to ``OUT/floor.json``."""
    if split == "validation":
        from validation_split import on_validation
        results = [{**floor_score(t, n, task=on_validation(t, n)), "split": split}
                   for t, n in SUITE]
    else:
        results = [floor_score(t, n) for t, n in dict.fromkeys(SUITE + FEW + EXTRA)]
    out.mkdir(parents=True, exist_ok=True)
    write_file(out / "floor.json", json.dumps(results, indent=1) + "\n")
    return {"floor": [(r["task"], r["size"], round(r["score"], 1)) for r in results]}
