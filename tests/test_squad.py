"""The span head and the SQuAD pipeline: the loss on a hand-made batch, post-processing against a
brute-force search, the head on every checkpoint kind (bundled, transformers), a tiny end-to-end
run (1.1 and 2.0) on hand-made data with ``predict`` and ``squad-eval``, and the per-token view."""

import json
import math

import numpy as np
import pytest
import torch

from minielectra.cli import main
from minielectra.model.convert import convert
from minielectra.model.electra import Electra
from minielectra.finetune.squad.data import QAExample
from minielectra.finetune.squad.features import Window, make_windows
from minielectra.finetune.squad.train import finetune_squad
from minielectra.finetune.squad.model import NEG, SpanQA, build_span_qa, load_qa, span_loss
from minielectra.config import FinetuneConfig
from minielectra.finetune.squad.post import predict_answers, question_spans
from minielectra.finetune.squad.predict import answer
from minielectra.training.opening import resolve_checkpoint
from minielectra.viz.squad import span_figure, span_text


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def bundled():
    return Electra.from_pretrained(resolve_checkpoint("bundled"))


def test_span_loss_on_a_hand_made_batch():
    start = torch.tensor([[0.0, 1.0, 2.0], [1.0, 1.0, 1.0]])
    end = torch.tensor([[3.0, 0.0, 0.0], [0.0, 0.0, math.log(2.0)]])
    starts, ends = torch.tensor([2, 0]), torch.tensor([0, 2])

    def nll(row, k):
        return -(row[k] - math.log(sum(math.exp(v) for v in row)))
    rows = [(nll([0, 1, 2], 2) + nll([3, 0, 0], 0)) / 2,
            (nll([1, 1, 1], 0) + nll([0, 0, math.log(2)], 2)) / 2]
    assert span_loss(start, end, starts, ends).item() == pytest.approx(sum(rows), rel=1e-6)
    assert span_loss(start, end, starts, ends, reduction="mean").item() == pytest.approx(
        sum(rows) / 2, rel=1e-6)
    # the second row by hand: log 3 for a uniform start, log 2 for P(end) = 2/4
    assert rows[1] == pytest.approx((math.log(3) + math.log(2)) / 2)


def test_head_opens_only_cls_and_the_passage(bundled):
    model = build_span_qa(bundled, FinetuneConfig())
    ids = torch.tensor([[2, 10, 11, 3, 20, 21, 22, 3, 0]])
    types = torch.tensor([[0, 0, 0, 0, 1, 1, 1, 1, 0]])
    mask = (ids != 0).long()
    start, end = model(ids, mask, types)
    closed = torch.tensor([False, True, True, True, False, False, False, False, True])
    assert (start[0, closed] == NEG).all() and (end[0, closed] == NEG).all()
    assert (start[0, ~closed] > NEG / 2).all()


def test_head_loads_from_bundled_and_transformers_checkpoints(bundled, tmp_path):
    transformers = pytest.importorskip("transformers")
    model = build_span_qa(bundled, FinetuneConfig(encoder_dropout=None))
    for a, b in zip(model.encoder.state_dict().values(),
                    bundled.discriminator.encoder.state_dict().values()):
        assert torch.equal(a, b)
    # a transformers ELECTRA discriminator: our encoder must give its hidden states
    cfg = transformers.ElectraConfig(vocab_size=50, embedding_size=16, hidden_size=32,
                                     num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=64, max_position_embeddings=40)
    torch.manual_seed(0)
    disc = transformers.ElectraForPreTraining(cfg).eval()
    disc.save_pretrained(tmp_path / "hf")
    convert(tmp_path / "hf", tmp_path / "converted", direction="from_hf")
    ids = torch.randint(5, 50, (2, 12))
    types = torch.tensor([[0] * 5 + [1] * 7] * 2)
    mask = torch.ones_like(ids)
    theirs = disc.electra(input_ids=ids, attention_mask=mask,
                          token_type_ids=types).last_hidden_state
    for source in ("hf", "converted"):  # read directly, and after `minielectra convert`
        qa = build_span_qa(Electra.from_pretrained(tmp_path / source), FinetuneConfig()).eval()
        torch.testing.assert_close(qa.encoder(ids, mask, types), theirs, atol=1e-5, rtol=1e-4)
        assert qa(ids, mask, types)[0].shape == (2, 12)


def _window(example, n, offsets, max_context=None):
    return Window(example, list(range(n)), [0] * n, offsets,
                  max_context or [o is not None for o in offsets])


def test_post_processing_matches_a_brute_force_search():
    """Best span over two windows = the best valid (start, end) over every pair of positions."""
    context = "aa bb cc dd ee ff"
    spans = [(0, 2), (3, 5), (6, 8), (9, 11), (12, 14), (15, 17)]
    # window 0: [CLS] q [SEP] aa bb cc dd [SEP]; window 1: [CLS] q [SEP] cc dd ee ff [SEP]
    w0 = _window(0, 8, [None] * 3 + spans[0:4] + [None], [False] * 3 + [1, 1, 1, 0] + [False])
    w1 = _window(0, 8, [None] * 3 + spans[2:6] + [None], [False] * 3 + [0, 1, 1, 1] + [False])
    rng = np.random.default_rng(0)
    logits = [(rng.normal(size=8), rng.normal(size=8)) for _ in range(2)]
    ex = QAExample("q", "?", context, ())
    got, null = question_spans(ex, [(0, w0), (1, w1)], logits, n_best=8, max_answer_len=2)
    best = max((logits[i][0][s] + logits[i][1][e], w.offsets[s][0], w.offsets[e][1])
               for i, w in enumerate([w0, w1]) for s in range(8) for e in range(8)
               if w.offsets[s] and w.offsets[e] and w.max_context[s] and s <= e < s + 2)
    assert got[0].score == pytest.approx(best[0])
    assert got[0].text == context[best[1]:best[2]]
    assert null == pytest.approx(min(lg[0][0] + lg[1][0] for lg in logits))
    assert len({s.text for s in got}) == len(got)  # distinct texts


def test_v2_abstains_above_the_threshold():
    w = _window(0, 4, [None, (0, 3), (4, 7), None])
    ex = QAExample("q", "?", "red cat", ())
    logits = [(np.array([2.0, 1.0, 0.0, NEG]), np.array([2.0, 0.0, 1.0, NEG]))]
    answers, na = predict_answers([ex], [w], logits, v2=True, na_prob_threshold=0.5)
    # null 4, best span "red cat" 1 + 1 = 2: P(no answer) = sigmoid(2)
    assert na["q"] == pytest.approx(1 / (1 + math.exp(-2))) and answers["q"] == ""
    answers, _ = predict_answers([ex], [w], logits, v2=True, na_prob_threshold=0.95)
    assert answers["q"] == "red cat"
    answers, na = predict_answers([ex], [w], logits, v2=False)
    assert answers["q"] == "red cat" and na["q"] == 0.0


# ------------------------------------------------------------------------------------ end to end

FACTS = [("The capital of France is Paris.", "What is the capital of France?", "Paris"),
         ("Bob has a red car and a blue bike.", "What colour is the car?", "red"),
         ("The river Rhine flows into the North Sea.", "Where does the Rhine flow?",
          "the North Sea"),
         ("Ada wrote the first program in 1843.", "When did Ada write it?", "1843")]


def fixture_file(path, version):
    pars = []
    for i, (context, question, text) in enumerate(FACTS):
        qas = [{"id": f"q{i}", "question": question,
                "answers": [{"text": text, "answer_start": context.index(text)}]}]
        if version == "v2.0":
            qas[0]["is_impossible"] = False
            qas.append({"id": f"n{i}", "question": "Who is the king of Mars?", "answers": [],
                        "is_impossible": True})
        pars.append({"context": context, "qas": qas})
    path.write_text(json.dumps({"version": version, "data": [{"title": "F",
                                                              "paragraphs": pars}]}))
    return path


FAST = ["finetune.epochs=30", "finetune.learning_rate=2e-3", "finetune.batch_size=4",
        "finetune.max_seq_len=48", "squad.doc_stride=8"]


@pytest.mark.parametrize("task, version", [("squad", "1.1"), ("squad_v2", "v2.0")])
def test_tiny_end_to_end_run(bundled, tmp_path, capsys, task, version):
    data = fixture_file(tmp_path / "f.json", version)
    out = tmp_path / "run"
    result = finetune_squad(bundled, task, out=out, train=data, dev=data, overrides=FAST,
                            progress=False)
    assert result["final_train_loss"] < 1.0  # it learnt the four facts
    assert (out / "predictions.json").is_file() and (out / "model.safetensors").is_file()
    assert (out / "na_probs.json").is_file() == (task == "squad_v2")
    args = ["squad-eval", str(data), str(out / "predictions.json")]
    if task == "squad_v2":
        args += ["--na-prob-file", str(out / "na_probs.json")]
    assert main(args) == 0
    scores = json.loads(capsys.readouterr().out)
    key = "exact_match" if task == "squad" else "exact"
    assert scores[key] == pytest.approx(result["metrics"][key]) and scores[key] >= 75.0
    qa = load_qa(out)
    assert qa.na_prob_threshold == result["na_prob_threshold"]
    context, question, text = FACTS[0]
    assert main(["predict", "--model", str(out), question, context]) == 0
    said = json.loads(capsys.readouterr().out)
    assert said["answer"] == context[said["start"]:said["end"]] == "Paris"


def test_per_token_view_and_figure(bundled, tmp_path):
    data = fixture_file(tmp_path / "f.json", "1.1")
    finetune_squad(bundled, "squad", out=tmp_path / "run", train=data, dev=data,
                   overrides=FAST, progress=False)
    context, question, text = FACTS[1]
    result = answer(tmp_path / "run", question, context)
    view = result["view"]
    assert len(view["tokens"]) == len(view["p_start"]) == len(view["p_end"])
    assert sum(view["p_start"]) + view["p_start_null"] == pytest.approx(1.0, abs=1e-5)
    first, last = view["answer_tokens"]
    a, b = view["offsets"][first][0], view["offsets"][last][1]
    assert context[a:b] == result["answer"]
    fig = span_figure(view, title=question)
    assert list(fig.data[0].y) == view["p_start"] and list(fig.data[1].y) == view["p_end"]
    assert fig.layout.shapes[0].x0 == first - 0.5 and fig.layout.shapes[0].x1 == last + 0.5
    assert sum(line.startswith(">") for line in span_text(view).splitlines()) == last - first + 1


def test_finetune_command_routes_squad_and_refuses_bad_options(tmp_path, capsys):
    data = fixture_file(tmp_path / "f.json", "1.1")
    assert main(["finetune", "--task", "squad", "--train", str(data), "--dev", str(data),
                 "--seeds", "2"]) == 2
    assert "one --seed" in capsys.readouterr().err
    assert main(["finetune", "--task", "squad", "--train", str(data), "--dev", str(data),
                 "--set", "squad.strid=3"]) == 2
    assert "squad.doc_stride" in capsys.readouterr().err
