"""The toy-grammar experiment: its language against a naive parser, the swapped-word probe set,
equal FLOPs, and the experiment end to end (a few steps) through the library and the CLI."""

import json
import xml.etree.ElementTree as ET

import pytest
import torch

from minielectra.cli import main
from minielectra.experiments import toy_grammar as toy
from minielectra.objectives.flops import train_flops_per_step


def classes_of(row: list[int], n: int) -> list[str]:
    """The word classes of one encoded sentence, read naively from the vocabulary's names."""
    vocab = toy.vocabulary(n)
    assert row[0] == toy.CLS
    words = []
    for i in row[1:]:
        if i == toy.SEP:
            break
        words.append(vocab[i].rstrip("0123456789"))
    return words


def grammatical(words: list[str]) -> bool:
    """det (adj) noun verb prep det (adj) place, written out as the rules a reader would."""
    pattern = [["det"], ["adj", None], ["noun"], ["verb"], ["prep"], ["det"], ["adj", None],
               ["place"]]

    def match(ws, ps):
        if not ps:
            return not ws
        if None in ps[0] and match(ws, ps[1:]):
            return True
        return bool(ws) and ws[0] in ps[0] and match(ws[1:], ps[1:])
    return match(words, pattern)


@pytest.mark.parametrize("n", [1, 3, 50])
def test_sentences_follow_the_grammar_and_pad_after_sep(n):
    ids = toy.sentences(300, n, generator=torch.Generator().manual_seed(0))
    assert ids.shape == (300, toy.SEQ_LEN) and len(toy.vocabulary(n)) == 6 * n + 5
    assert int(ids.max()) < 6 * n + 5
    for row in ids.tolist():
        assert grammatical(classes_of(row, n)), row
        end = row.index(toy.SEP)
        assert all(i == toy.PAD for i in row[end + 1:])
    lengths = (ids > toy.SEP).sum(1)
    assert set(lengths.tolist()) == {6, 7, 8}  # each adjective with probability 1/2
    assert abs((lengths == 8).double().mean().item() - 0.25) < 0.08


def test_probe_set_swaps_two_neighbours_in_every_other_sentence():
    ids, labels = toy.probe_set(200, 5, seed=3)
    assert labels.tolist() == [i % 2 for i in range(200)]
    for row, label in zip(ids.tolist(), labels.tolist()):
        assert grammatical(classes_of(row, 5)) == bool(label), row


def test_arms_get_equal_training_flops():
    for n in (3, 200, 1000):
        steps = toy.equal_flops_steps(n, 300)
        flops = {a: steps[a] * train_flops_per_step(toy.run_config(n, a)) for a in toy.ARMS}
        assert steps["electra"] == 300 and steps["mlm"] > 300  # the MLM runs no generator
        assert abs(flops["mlm"] / flops["electra"] - 1) < 1 / 300


def test_experiment_end_to_end_writes_results_table_and_figures(tmp_path):
    result = toy.run_toy_grammar(words_per_class=4, seeds=2, steps=8, sweep=[2],
                                 out=tmp_path, probe_examples=40)
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["words_per_class"] == 4 and saved["vocab_size"] == 29
    assert [p["words_per_class"] for p in saved["points"]] == [2, 4]
    assert saved["steps"] == toy.equal_flops_steps(4, 8)
    assert saved["flops_per_step"]["electra"] == train_flops_per_step(toy.run_config(4, "electra"))
    for arm in toy.ARMS:
        assert len(saved["per_seed"][arm]) == 2
        assert all(0 <= a <= 1 for a in saved["per_seed"][arm])
        assert saved["mean"][arm] == pytest.approx(sum(saved["per_seed"][arm]) / 2)
    assert 0 <= saved["random_init"] <= 1
    table = (tmp_path / "results.md").read_text()
    assert table.count("\n| 2 |") == 1 and table.count("\n| 4 | 29 |") == 1
    for stem in ("toy_grammar_probe_vs_words_per_class", "toy_grammar_probe_vs_flops"):
        ET.fromstring((tmp_path / f"{stem}.svg").read_text())  # well-formed SVG
        assert "plotly" in (tmp_path / f"{stem}.html").read_text()
    written = sorted(str(p) for p in tmp_path.iterdir()
                     if p.name not in (".minielectra-files.json", "run.lock"))
    assert sorted(result["files"]) == written  # beside them the folder's record and lock


def test_cli_runs_toy_grammar_and_refuses_bad_sizes(tmp_path, capsys):
    code = main(["experiment", "toy-grammar", "--words-per-class", "3", "--seeds", "1",
                 "--steps", "4", "--out", str(tmp_path / "toy")])
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["vocab_size"] == 23 and (tmp_path / "toy" / "results.json").is_file()
    code = main(["experiment", "toy-grammar", "--words-per-class", "0", "--out",
                 str(tmp_path / "bad")])
    assert code != 0 and "--words-per-class" in capsys.readouterr().err


def test_loss_position_grids_are_labelled_with_their_shares():
    """The interactive grids say what the static picture says: each objective's name and the
    share of tokens with a loss, counted here from the grid."""
    mlm = torch.tensor([[1, 2, 1, 1, 0], [1, 1, 1, 2, 1]])  # 2 of 9 tokens carry a loss
    electra = 2 * (mlm > 0).long()
    fig = toy.loss_positions_figure({"MLM": mlm, "ELECTRA": electra}, title="t")
    labels = [a.text for a in fig.layout.annotations]
    assert labels == [f"MLM: {2 / 9:.0%} of tokens", "ELECTRA: 100% of tokens"]
    assert [t.name for t in fig.data] == ["MLM", "ELECTRA"]
    assert fig.data[1].x0 >= mlm.shape[1]  # side by side, not on top of each other
    svg = toy.loss_positions_svg({"MLM": mlm, "ELECTRA": electra}, title="t")
    assert all(label in svg for label in labels)  # the picture and the figure agree
