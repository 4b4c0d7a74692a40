"""SQuAD 1.1 and 2.0 data: the official JSON, checked, as a flat list of questions.

Rajpurkar et al. 2016 and 2018; official code: google-research/electra ``finetune/qa/qa_tasks.py``.
A file in the official format (``.json`` or ``.json.gz``), a data directory
(``squad/dev-v1.1.json``, ``squad/dev-v2.0.json``) or the hub (``rajpurkar/squad``,
``rajpurkar/squad_v2``, nested back into the official format): one reader and one scorer serve
all three. Bad input is one line naming the file and the key; an ``answer_start`` that does not
point at its text is warned about once and its question left out of *training* only (the
official scripts score the gold texts alone).
"""

from __future__ import annotations

import gzip
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...data.corpus import find_data_dir
from ...data.hub import hub_unreachable

log = logging.getLogger(__name__)

VERSIONS = {"squad": "1.1", "squad_v2": "v2.0"}  # the "version" key of the official files
DEV_FILES = {"squad": "dev-v1.1.json", "squad_v2": "dev-v2.0.json"}
HUB_NAMES = {"squad": "rajpurkar/squad", "squad_v2": "rajpurkar/squad_v2"}


@dataclass(frozen=True)
class QAExample:
    """One question about one passage; ``answers`` are ``(text, char start)`` pairs."""

    qid: str
    question: str
    context: str
    answers: tuple[tuple[str, int], ...]
    is_impossible: bool = False
    title: str = ""


@dataclass
class SquadSet:
    """The official JSON (``dataset``, scored as is) and its questions as :class:`QAExample`."""

    dataset: dict[str, Any]
    examples: list[QAExample]
    source: str
    bad_starts: int = 0  # answers whose answer_start does not point at their text

    @property
    def is_v2(self) -> bool:
        return is_v2(self.dataset)


def is_v2(dataset: dict) -> bool:
    """SQuAD 2.0 when the version says so, or when a question is marked impossible."""
    if str(dataset.get("version", "")).lstrip("v").startswith("2"):
        return True
    return any(qa.get("is_impossible") for a in dataset["data"] for p in a["paragraphs"]
               for qa in p["qas"])


def _read_any(path: str | Path):
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":  # gzip's magic number, whatever the file is called
            raw = gzip.decompress(raw)
        return json.loads(raw.decode("utf-8"))
    except (OSError, EOFError, UnicodeDecodeError, ValueError) as e:
        raise ValueError(f"{path}: not JSON ({type(e).__name__}: {e})") from None


def read_json_object(path: str | Path, what: str) -> dict:
    """A predictions or no-answer file: one JSON object ``{question id: value}``."""
    data = _read_any(path)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not {what}: the file holds a JSON {type(data).__name__}")
    return data


def _need(obj: Any, key: str, kind: type, where: str) -> Any:
    if not isinstance(obj, dict) or not isinstance(obj.get(key), kind):
        raise ValueError(f"{where}: not SQuAD JSON (no {kind.__name__} '{key}')")
    return obj[key]


def _answers(qa: dict, where: str) -> list[tuple[str, int]]:
    out = []
    for j, a in enumerate(_need(qa, "answers", list, where)):
        text = _need(a, "text", str, f"{where}, answer {j}")
        start = a.get("answer_start")
        if not isinstance(start, int) or isinstance(start, bool):
            raise ValueError(f"{where}, answer {j}: not SQuAD JSON (no integer 'answer_start')")
        out.append((text, start))
    return out


def parse(dataset: dict, *, source: str) -> SquadSet:
    """Check every article, paragraph and question of ``dataset`` and flatten the questions."""
    examples, seen, bad = [], {}, []
    for i, article in enumerate(_need(dataset, "data", list, source)):
        title = article.get("title", "") if isinstance(article, dict) else ""
        for k, par in enumerate(_need(article, "paragraphs", list, f"{source}: article {i}")):
            where = f"{source}: article {i} ({title!r}), paragraph {k}"
            context = _need(par, "context", str, where)
            if not context.strip():
                raise ValueError(f"{where}: empty context")
            for qa in _need(par, "qas", list, where):
                qid = str(_need(qa, "id", str, f"{where}, a question"))
                if qid in seen:
                    raise ValueError(f"{source}: question id {qid!r} seen twice ({seen[qid]} and "
                                     f"{where})")
                seen[qid] = where
                answers = _answers(qa, f"{where}, question {qid}")
                bad += [qid for t, s in answers if context[s:s + len(t)] != t]
                impossible = bool(qa.get("is_impossible", False)) or not answers
                examples.append(QAExample(qid, _need(qa, "question", str, f"{where}, {qid}"),
                                          context, tuple(answers), impossible, title))
    if bad:
        log.warning("%s: %d answer(s) whose answer_start does not match the context (first: "
                    "question %s); those questions are skipped for training", source, len(bad),
                    bad[0])
    return SquadSet(dataset, examples, source, len(bad))


def trainable(examples: list[QAExample]) -> list[QAExample]:
    """The questions a model can learn from: no answer (2.0), or a first answer that really is
    at its ``answer_start`` (the official code trains on the first answer only)."""
    return [e for e in examples if e.is_impossible or (
        e.answers[0][0].strip()
        and e.context[e.answers[0][1]:e.answers[0][1] + len(e.answers[0][0])] == e.answers[0][0])]


def load_file(path: str | Path) -> SquadSet:
    """A SQuAD ``.json`` or ``.json.gz`` file, checked; anything else is one clear error."""
    data = _read_any(path)
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise ValueError(f"{path}: not SQuAD JSON (no top-level 'data' list of articles)")
    return parse(data, source=str(path))


def data_dir_file(task: str, data_dir: str | Path | None = None) -> Path | None:
    """``squad/dev-v1.1.json`` (or ``.json.gz``) in the data directory, if there."""
    root = find_data_dir(data_dir)
    found = [] if root is None else [Path(root) / "squad" / (DEV_FILES[task] + suffix)
                                     for suffix in ("", ".gz")]
    return next((p for p in found if p.is_file()), None)


def from_hub(task: str, split: str) -> SquadSet:
    """``rajpurkar/squad(_v2)`` through ``datasets``, nested back into the official format."""
    offline = hub_unreachable()  # offline: the datasets cache only, and at once
    try:
        import datasets
        rows = datasets.load_dataset(HUB_NAMES[task], split=split)
    except Exception as e:  # offline, no `datasets`, a hub error: all the same to the user
        hint = ("give --train FILE (official JSON), or --set squad.train_articles=N to train "
                "on the first N articles of the dev set" if split == "train" else
                "give --dev FILE (official JSON) or a data directory with squad/")
        why = (f"not in the datasets cache, and the Hugging Face hub is unreachable ({offline})"
               if offline else f"{type(e).__name__}: {e}")
        raise ValueError(f"cannot load {HUB_NAMES[task]} ({split}) from the hub ({why}); "
                         f"{hint}") from None
    articles: dict[str, dict[str, list]] = {}
    for r in rows:
        pars = articles.setdefault(r["title"], {})
        qas = pars.setdefault(r["context"], [])
        ans = [{"text": t, "answer_start": s}
               for t, s in zip(r["answers"]["text"], r["answers"]["answer_start"])]
        qas.append({"id": r["id"], "question": r["question"], "answers": ans,
                    **({"is_impossible": not ans} if task == "squad_v2" else {})})
    data = [{"title": t, "paragraphs": [{"context": c, "qas": q} for c, q in pars.items()]}
            for t, pars in articles.items()]
    return parse({"version": VERSIONS[task], "data": data}, source=f"{HUB_NAMES[task]}:{split}")


def load_split(task: str, split: str, *, path=None, data_dir=None) -> SquadSet:
    """A task's ``"train"`` or ``"dev"`` set: the given file, the data directory (dev only:
    the training sets are not shipped), else the hub."""
    if path is not None:
        return load_file(path)
    local = data_dir_file(task, data_dir) if split == "dev" else None
    if local is not None:
        return load_file(local)
    return from_hub(task, "train" if split == "train" else "validation")


def split_articles(squad: SquadSet, train_articles: int) -> tuple[SquadSet, SquadSet]:
    """The first ``train_articles`` articles to train on and the rest to score: the offline
    stand-in for the official training set. Whole articles, so that no passage is in both."""
    data = squad.dataset["data"]
    if not 0 < train_articles < len(data):
        raise ValueError(f"squad.train_articles must be in 1..{len(data) - 1} ({squad.source} "
                         f"has {len(data)} articles), got {train_articles}")
    head = {**squad.dataset, "data": data[:train_articles]}
    tail = {**squad.dataset, "data": data[train_articles:]}
    return (parse(head, source=f"{squad.source}[:{train_articles} articles]"),
            parse(tail, source=f"{squad.source}[{train_articles}: articles]"))
