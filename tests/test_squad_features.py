"""SQuAD data and windows: the reader's checks, window spans and max-context by hand, character
offsets on tricky passages (Unicode, whitespace runs), answers at and across a window's edge."""

import gzip
import json
import logging
import os

import pytest

from minielectra.data.tokenizer import WordPieceTokenizer
from minielectra.finetune.squad import data as squad_data
from minielectra.finetune.squad.data import QAExample, load_file, parse, trainable
from minielectra.finetune.squad.features import (make_windows, max_context_windows, window_spans)
from minielectra.training.opening import resolve_checkpoint


@pytest.fixture(scope="module")
def tok():
    return WordPieceTokenizer.load(resolve_checkpoint("bundled"))


def squad(paragraphs, version="1.1"):
    return {"version": version, "data": [{"title": "T", "paragraphs": paragraphs}]}


def par(context, *qas):
    return {"context": context, "qas": [
        {"id": q, "question": "what?", "answers": [{"text": t, "answer_start": s}]}
        for q, t, s in qas]}


# ------------------------------------------------------------------------------------ the reader


def test_reader_reads_gz_and_flattens(tmp_path):
    data = squad([par("The cat sat.", ("q1", "cat", 4), ("q2", "sat", 8))])
    with gzip.open(tmp_path / "d.json.gz", "wt") as f:
        json.dump(data, f)
    s = load_file(tmp_path / "d.json.gz")
    assert [(e.qid, e.answers) for e in s.examples] == [("q1", (("cat", 4),)),
                                                        ("q2", (("sat", 8),))]
    assert not s.is_v2


@pytest.mark.parametrize("data, message", [
    ([1, 2], "no top-level 'data'"),
    ({"data": [{"title": "T"}]}, "no list 'paragraphs'"),
    (squad([par("   ", ("q", "x", 0))]), "empty context"),
    (squad([par("a b", ("q", "a", 0), ("q", "b", 2))]), "'q' seen twice"),
    (squad([{"context": "a", "qas": [{"id": "q", "question": "?",
                                      "answers": [{"text": "a"}]}]}]), "answer_start"),
])
def test_reader_refuses_bad_files_naming_the_problem(tmp_path, data, message):
    (tmp_path / "bad.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match=message) as e:
        load_file(tmp_path / "bad.json")
    assert str(tmp_path / "bad.json") in str(e.value) and "\n" not in str(e.value)


def test_mismatching_answer_start_is_counted_warned_and_not_trained(caplog):
    data = squad([par("The cat sat on the mat.", ("ok", "cat", 4), ("off", "mat", 3),
                      ("off2", "sat", 0))])
    with caplog.at_level(logging.WARNING):
        s = parse(data, source="mine.json")
    assert s.bad_starts == 2
    assert "mine.json: 2 answer(s)" in caplog.text and "off" in caplog.text
    assert [e.qid for e in trainable(s.examples)] == ["ok"]


def test_split_articles_keeps_whole_articles():
    data = {"version": "1.1", "data": [
        {"title": t, "paragraphs": [par("a b", (t + "q", "a", 0))]} for t in "ABC"]}
    train, score = squad_data.split_articles(parse(data, source="d"), 2)
    assert [e.title for e in train.examples] == ["A", "B"]
    assert [e.title for e in score.examples] == ["C"]
    with pytest.raises(ValueError, match="1..2"):
        squad_data.split_articles(parse(data, source="d"), 3)


# ------------------------------------------------------------------------------------ windows


def test_window_spans_and_max_context_by_hand():
    spans = window_spans(10, 4, 3)
    assert spans == [(0, 4), (3, 4), (6, 4)]
    # token 3: window 0 gives min(3, 0), window 1 min(0, 3): a tie, the earlier wins
    assert max_context_windows(spans, 10) == [0, 0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert window_spans(5, 8, 128) == [(0, 5)]
    assert window_spans(9, 4, 128) == [(0, 4), (4, 4), (8, 1)]  # stride capped: no gap


@pytest.mark.parametrize("context", [
    "Café au lait — a naïve résumé of Zürich’s 東京 façade.",
    "spaces   and\ttabs\t\tand\n\nnewlines  \u00a0 everywhere",
])
def test_offsets_cut_each_token_from_the_original_text(tok, context):
    ids, offsets = tok.encode_offsets(context)
    for i, (a, b) in zip(ids, offsets):
        piece = tok.tokens[i].removeprefix("##")
        if piece != "[UNK]":
            assert tok._tokenizer.normalizer.normalize_str(context[a:b]) == piece
        assert not context[a:b].isspace()


def test_unicode_answer_is_cut_exactly(tok):
    context = "Die Fassade in Zürich ist naïve résumé genannt."
    start = context.index("naïve résumé")
    ex = QAExample("q", "what?", context, (("naïve résumé", start),))
    (win,) = make_windows(tok, ex, 0, max_len=64, stride=16, training=True)
    a, b = win.offsets[win.start][0], win.offsets[win.end][1]
    assert context[a:b] == "naïve résumé"


def _edge_case(tok, shift):
    """A passage and an answer of two tokens ending ``shift`` tokens after window 0's end."""
    context = " ".join(["alpha", "beta", "gamma", "delta", "the", "river"] * 6)
    ids, offsets = tok.encode_offsets(context)
    q_len = len(tok.encode("what?"))
    max_len, room = 24, 24 - q_len - 3
    last = room - 1 + shift  # the answer's last token
    a, b = offsets[last - 1][0], offsets[last][1]
    ex = QAExample("q", "what?", context, ((context[a:b], a),))
    return make_windows(tok, ex, 0, max_len=max_len, stride=8, training=True), q_len, room, last


def test_answer_ending_at_the_window_edge_is_labelled_there(tok):
    windows, q_len, room, last = _edge_case(tok, 0)
    assert (windows[0].start, windows[0].end) == (last - 1 + q_len + 2, last + q_len + 2)
    assert windows[0].end == len(windows[0].input_ids) - 2  # just before the final [SEP]


def test_answer_across_the_edge_is_no_answer_in_that_window(tok):
    windows, q_len, room, last = _edge_case(tok, 1)
    assert (windows[0].start, windows[0].end) == (0, 0)
    # window 1 starts 8 tokens later and holds the whole answer
    assert (windows[1].start, windows[1].end) == (last - 1 - 8 + q_len + 2, last - 8 + q_len + 2)
    for w in windows:
        if w.start:
            a, b = w.offsets[w.start][0], w.offsets[w.end][1]
            assert w.offsets[w.start] is not None and b - a > 0


def test_windows_cover_every_token_once_as_max_context(tok):
    context = " ".join(f"word{i}" for i in range(60))
    ex = QAExample("q", "which word?", context, ())
    windows = make_windows(tok, ex, 0, max_len=32, stride=10)
    scored = [o for w in windows for o, m in zip(w.offsets, w.max_context) if m]
    ids, offsets = tok.encode_offsets(context)
    assert sorted(scored) == sorted(offsets)  # each passage token scored in exactly one window
    assert all(len(w.input_ids) <= 32 for w in windows)


def test_hub_rows_nest_back_into_the_official_format(tmp_path, monkeypatch):
    """``from_hub`` on a local dataset folder in the hub's row format (what ``rajpurkar/squad_v2``
    serves: one row per question, answers as parallel lists)."""
    pytest.importorskip("datasets")
    rows = [{"id": "a", "title": "T", "context": "The cat sat.", "question": "who?",
             "answers": {"text": ["cat"], "answer_start": [4]}},
            {"id": "b", "title": "T", "context": "The cat sat.", "question": "why?",
             "answers": {"text": [], "answer_start": []}},
            {"id": "c", "title": "U", "context": "Dogs bark.", "question": "what?",
             "answers": {"text": ["bark"], "answer_start": [5]}}]
    (tmp_path / "validation.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    monkeypatch.setitem(squad_data.HUB_NAMES, "squad_v2", str(tmp_path))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))
    s = squad_data.load_split("squad_v2", "dev", data_dir=tmp_path / "none")
    assert s.is_v2 and [a["title"] for a in s.dataset["data"]] == ["T", "U"]
    assert [len(p["qas"]) for a in s.dataset["data"] for p in a["paragraphs"]] == [2, 1]
    assert [(e.qid, e.is_impossible, e.answers) for e in s.examples] == [
        ("a", False, (("cat", 4),)), ("b", True, ()), ("c", False, (("bark", 5),))]


def test_unreachable_hub_is_one_line_at_once_not_a_minute_of_retries(monkeypatch, tmp_path):
    """Offline, ``datasets`` retries each request for about 25 s and logs every retry; the hub is
    asked once first (as GLUE and the corpora do), so the load runs in offline mode and fails at
    once with one line saying why and what to give instead."""
    import datasets

    from minielectra.data import hub as data_hub
    monkeypatch.setattr(data_hub, "_PROBED", [])
    monkeypatch.setattr(data_hub, "_probe", lambda timeout: "no connection to huggingface.co:443")
    import huggingface_hub.constants
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):  # restored after the test, as are
        monkeypatch.setenv(var, "")  # the imported modules' copies that going offline sets
    for module in (huggingface_hub.constants, datasets.config):
        monkeypatch.setattr(module, "HF_HUB_OFFLINE", module.HF_HUB_OFFLINE)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", datasets.config.HF_DATASETS_OFFLINE)
    seen = []

    def load_dataset(*args, **kwargs):
        seen.append(os.environ.get("HF_HUB_OFFLINE"))
        raise ConnectionError("Couldn't reach 'rajpurkar/squad' on the Hub")
    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    with pytest.raises(ValueError) as e:
        squad_data.load_split("squad", "dev", data_dir=tmp_path / "none")
    assert seen == ["1"]  # offline mode was on when datasets was asked: no retries
    message = str(e.value)
    assert "\n" not in message
    for part in ("rajpurkar/squad (validation)", "datasets cache", "hub is unreachable (no "
                 "connection to huggingface.co:443)", "--dev FILE"):
        assert part in message, message


def test_dev_set_from_a_data_directory(tmp_path):
    (tmp_path / "squad").mkdir()
    with gzip.open(tmp_path / "squad" / "dev-v1.1.json.gz", "wt") as f:
        json.dump(squad([par("The cat sat.", ("q1", "cat", 4))]), f)
    s = squad_data.load_split("squad", "dev", data_dir=tmp_path)
    assert s.source.endswith("dev-v1.1.json.gz") and [e.qid for e in s.examples] == ["q1"]
