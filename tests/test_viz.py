"""Per-token views: records against the model's own forward pass, figures against records,
the CLI's contract and its one-line errors, and the interactive explorer's callback.

References are computed here, independently of minielectra.viz: the text is tokenised by hand,
``model(...)`` is called with the same seed, ``model.discriminator`` and ``model.generator`` are
called on ids rebuilt from the records' token strings.
"""

import html
import json
import re

import numpy as np
import pytest
import torch

from minielectra.cli import main
from minielectra.viz.scoring import load_checkpoint, parse_replacements, score_text, score_texts
from minielectra.viz.strip import (COLORSCALE, MARKER_OFFSET, OUTCOMES, STRIP_PLOT_WIDTH,
                                   batch_heatmap, cell_text, fit_label, hidden_pieces, join_words,
                                   outcome, replaced_cells, token_strip, wrap)
from minielectra.viz.show import FIGURE_WIDTH, widget_bundle
from minielectra.viz.widget import PER_ROW, Explorer

TEXT = "The cat sat on the mat because it was tired after the long walk."


@pytest.fixture(scope="module")
def ckpt():
    return load_checkpoint("bundled")


def _ids(tok, text):
    return torch.tensor([[tok.cls_id, *tok.encode(text), tok.sep_id]])


def _disc_p(model, tokens, tok):
    """P(replaced) of the discriminator on [CLS] tokens [SEP], ids rebuilt from the strings."""
    ids = torch.tensor([[tok.cls_id, *(tok.token_to_id(t) for t in tokens), tok.sep_id]])
    with torch.no_grad():
        return torch.sigmoid(model.discriminator(ids, torch.ones_like(ids)))[0, 1:-1]


# -------------------------------------------------------------------- records vs the model


@pytest.mark.parametrize("seed", [0, 7])
def test_sampled_records_are_what_model_forward_computes(ckpt, seed):
    model, tok = ckpt.model, ckpt.tokenizer
    records = score_text(ckpt, TEXT, seed=seed, top_k=3)
    ids = _ids(tok, TEXT)
    with torch.no_grad():
        out = model(ids, generator=torch.Generator().manual_seed(seed))
    assert [r["original"] for r in records] == tok.convert_ids_to_tokens(ids[0, 1:-1])
    assert [r["token"] for r in records] == tok.convert_ids_to_tokens(out.corrupted_ids[0, 1:-1])
    assert [r["replaced"] for r in records] == out.is_replaced[0, 1:-1].tolist()
    np.testing.assert_allclose([r["p_replaced"] for r in records],
                               torch.sigmoid(out.disc_logits[0, 1:-1]).numpy(), rtol=1e-5)
    w = out.masked.weights[0].bool()
    positions = out.masked.positions[0][w].tolist()
    assert sorted(r["position"] for r in records if r["masked"]) == sorted(positions)
    for slot, pos in enumerate(out.masked.positions[0].tolist()):
        if not w[slot]:
            continue
        probs = torch.softmax(out.gen_logits[0, slot].float(), -1).topk(3)
        got = records[pos - 1]["top_k"]
        assert [a["token"] for a in got] == tok.convert_ids_to_tokens(probs.indices)
        np.testing.assert_allclose([a["p"] for a in got], probs.values.numpy(), rtol=1e-4)
    assert any(r["replaced"] for r in records)  # the seeds are chosen so that something is
    assert all(not r["top_k"] for r in records if not r["masked"])


def test_json_records_match_the_discriminator_on_their_tokens(ckpt):
    records = score_text(ckpt, TEXT, seed=3)
    p = _disc_p(ckpt.model, [r["token"] for r in records], ckpt.tokenizer)
    np.testing.assert_allclose([r["p_replaced"] for r in records], p.numpy(), rtol=1e-5)


def test_same_seed_same_records_other_seed_other_corruption(ckpt):
    a, b = score_text(ckpt, TEXT, seed=5), score_text(ckpt, TEXT, seed=5)
    assert a == b
    others = [score_text(ckpt, TEXT, seed=s) for s in (6, 8)]
    assert any([r["token"] for r in o] != [r["token"] for r in a] for o in others)


def test_hand_replacement_scores_the_sentence_and_masks_for_the_generator(ckpt):
    model, tok = ckpt.model, ckpt.tokenizer
    records = score_text(ckpt, TEXT, replace={2: "dog", 4: "On"}, top_k=4)
    cat, on = records[1], records[3]
    assert (cat["token"], cat["original"], cat["replaced"], cat["hand"], cat["masked"]) == \
        ("dog", "cat", True, True, True)
    assert (on["token"], on["replaced"], on["hand"]) == ("on", False, True)  # same word
    assert [r["token"] for r in records if not r["hand"]] == \
        [r["original"] for r in records if not r["hand"]]
    p = _disc_p(model, [r["token"] for r in records], tok)
    np.testing.assert_allclose([r["p_replaced"] for r in records], p.numpy(), rtol=1e-5)
    masked = _ids(tok, TEXT)
    masked[0, 2] = masked[0, 4] = tok.mask_id
    with torch.no_grad():
        probs = torch.softmax(model.generator(masked)[0, 2], -1).topk(4)
    assert [a["token"] for a in cat["top_k"]] == tok.convert_ids_to_tokens(probs.indices)
    np.testing.assert_allclose([a["p"] for a in cat["top_k"]], probs.values.numpy(), rtol=1e-4)


def test_long_text_is_scored_in_windows_of_the_trained_length(ckpt):
    tok = ckpt.tokenizer
    text = " ".join([TEXT] * 5)
    pieces = tok.encode(text)
    assert len(pieces) + 2 > ckpt.window == 32
    records = score_text(ckpt, text, replace={1: "a"})
    assert [r["position"] for r in records] == list(range(1, len(pieces) + 1))
    assert [r["original"] for r in records] == tok.convert_ids_to_tokens(pieces)
    k = -(-len(pieces) // (ckpt.window - 2))  # windows of near-equal length
    bounds = np.cumsum([0] + [len(c) for c in np.array_split(np.arange(len(pieces)), k)])
    for start, end in zip(bounds, bounds[1:]):
        part = records[start:end]
        p = _disc_p(ckpt.model, [r["token"] for r in part], tok)
        np.testing.assert_allclose([r["p_replaced"] for r in part], p.numpy(), rtol=1e-5)


def test_words_count_word_pieces(ckpt):
    records = score_text(ckpt, "unbelievable cats", seed=0)
    tokens = ckpt.tokenizer.convert_ids_to_tokens(ckpt.tokenizer.encode("unbelievable cats"))
    want, w = [], -1
    for t in tokens:
        w += not t.startswith("##")
        want.append(w)
    assert [r["word"] for r in records] == want and want[-1] > 0


@pytest.mark.parametrize("call, message", [
    (lambda c: score_text(c, "   "), "the text '   ' is empty"),
    (lambda c: score_text(c, "the cat", replace={3: "dog"}), "position 3 is outside the text"),
    (lambda c: score_text(c, "the cat", replace={0: "dog"}), "position 0 is outside the text"),
    (lambda c: score_text(c, "the cat", replace={1: "zzqxv"}), "'zzqxv' is not a word"),
    (lambda c: score_text(c, "the cat", replace={1: "[SEP]"}), "'[SEP]' is not a word"),
    (lambda c: parse_replacements(["2dog"]), "expected POS=WORD"),
    (lambda c: parse_replacements(["2=dog", "2=cat"]), "position 2 is given twice"),
    (lambda c: load_checkpoint("/nonexistent/ckpt"), "no such directory"),
])
def test_bad_input_is_named(ckpt, call, message):
    with pytest.raises((ValueError, FileNotFoundError), match=message.replace("[", r"\[")):
        call(ckpt)


def test_a_converted_transformers_checkpoint_scores_as_the_original(ckpt, tmp_path):
    from minielectra.model.convert import convert
    convert("bundled", tmp_path / "hf", direction="to_hf")  # discriminator/ and generator/
    converted = load_checkpoint(tmp_path / "hf")  # no run_config.json: windows of up to 128
    ours, theirs = score_text(ckpt, TEXT, seed=2), score_text(converted, TEXT, seed=2)
    assert [r["token"] for r in theirs] == [r["token"] for r in ours]
    np.testing.assert_allclose([r["p_replaced"] for r in theirs],
                               [r["p_replaced"] for r in ours], rtol=1e-5, atol=1e-6)


def test_a_checkpoint_without_a_discriminator_is_refused(tmp_path, tiny_model_config):
    from minielectra.config import ObjectiveConfig
    from minielectra.objectives.compute import build_model
    build_model(tiny_model_config(), ObjectiveConfig(name="mlm")).save_pretrained(tmp_path / "mlm")
    with pytest.raises(ValueError, match="'mlm' objective: it has no discriminator"):
        load_checkpoint(tmp_path / "mlm")


# ------------------------------------------------------------------------ figures vs records


def _rec(token, p, *, replaced=False, word=0, position=1, original=None, top_k=()):
    return {"position": position, "word": word, "token": token, "original": original or token,
            "replaced": replaced, "masked": bool(top_k), "hand": False, "p_replaced": p,
            "top_k": [{"token": t, "p": q} for t, q in top_k]}


def _records():
    return [_rec("the", 0.1, word=0, position=1),
            _rec("dog", 0.9, replaced=True, word=1, position=2, original="cat",
                 top_k=[("cat", 0.4), ("dog", 0.2)]),
            _rec("sat", 0.2, replaced=True, word=2, position=3, original="ran"),
            _rec("un", 0.7, word=3, position=4), _rec("##til", 0.3, word=3, position=5)]


def test_outcomes_hit_miss_false_alarm():
    assert [outcome(r) for r in _records()] == [None, "caught", "missed", "false_alarm", None]


def test_strip_cells_markers_outlines_and_hover():
    fig = token_strip(_records(), title="t")
    heat = fig.data[0]
    assert list(heat.z[0][:5]) == [0.1, 0.9, 0.2, 0.7, 0.3]
    assert heat.text[0][1] == "dog<br><i>(cat)</i>" and heat.text[0][0] == "the"
    assert "original: <b>cat</b>" in heat.hovertext[0][1]
    assert "cat 0.40, dog 0.20" in heat.hovertext[0][1] and "P(replaced) = 0.900" in \
        heat.hovertext[0][1]
    dx, dy = MARKER_OFFSET
    markers = {t.name: [(round(x - dx, 6), round(y - dy, 6)) for x, y in zip(t.x, t.y)
                        if x is not None] for t in fig.data[1:]}
    names = {k: v[1] for k, v in OUTCOMES.items()}
    assert markers == {names["caught"]: [(1, 0)], names["missed"]: [(2, 0)],
                       names["false_alarm"]: [(3, 0)]}
    assert {t.marker.symbol for t in fig.data[1:]} == {s for s, _ in OUTCOMES.values()}
    boxes = [(s.x0 + s.x1) / 2 for s in fig.layout.shapes]
    assert boxes == pytest.approx([1, 2])  # the two replaced cells are outlined


def test_strip_joins_word_pieces_when_asked():
    fig = token_strip(_records(), words=True)
    assert list(fig.data[0].text[0][:4]) == ["the", "dog<br><i>(cat)</i>", "sat<br><i>(ran)</i>",
                                             "until"]
    assert fig.data[0].z[0][3] == 0.7  # the word's most suspicious piece
    joined = join_words(_records())
    assert [w["position"] for w in joined] == [1, 2, 3, 4]
    assert "##til" not in joined[3]["token"] and len(joined[3]["pieces"]) == 2


def test_long_strip_wraps_without_breaking_words():
    records = []
    for w in range(12):  # twelve 2-piece words, then one word longer than a row
        records += [_rec(f"w{w}", 0.1, word=w), _rec("##x", 0.1, word=w)]
    records += [_rec("##y" if i else "long", 0.1, word=12) for i in range(7)]
    cells = wrap(records, per_row=5)
    rows = {}
    for rec, (r, c) in zip(records, cells):
        rows.setdefault(rec["word"], set()).add(r)
    assert all(len(rows[w]) == 1 for w in range(12))  # no short word is split
    assert max(c for _, c in cells) < 5 and cells[0] == (0, 0)
    assert [r for r, _ in cells[:6]] == [0, 0, 0, 0, 1, 1]  # 2 + 2 fit, the third wraps
    fig = token_strip(records, per_row=5)
    assert len(fig.data[0].z) == max(r for r, _ in cells) + 1 >= 6
    laid = [fig.data[0].text[r][c] for r, c in cells]
    assert laid == [rec["token"] for rec in records]


def test_strip_of_model_records_shows_the_model_probabilities(ckpt):
    records = score_text(ckpt, TEXT, seed=0)
    fig = token_strip(records, per_row=6)
    cells = wrap(records, 6)
    p = _disc_p(ckpt.model, [r["token"] for r in records], ckpt.tokenizer)
    np.testing.assert_allclose([fig.data[0].z[r][c] for r, c in cells], p.numpy(), rtol=1e-5)
    tokens = [_shown(fig.data[0].text[r][c].split("<br>")[0]) for r, c in cells]
    assert tokens == [r["token"] for r in records]


def _shown(label: str) -> str:
    """What plotly writes for a label of its HTML subset: the tags dropped, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", label))


def test_labels_escape_markup_once_and_leave_quotes_alone():
    rec = _rec('"', 0.9, replaced=True, original="<b>&")
    label = cell_text(rec)
    assert "&quot;" not in label and '"' in label  # plotly would write &quot; as it is
    assert "&lt;b&gt;&amp;" in label and "<b>&" not in label  # markup is text, escaped once
    assert _shown(label.split("<br>")[0]) == '"' and _shown(label.split("<br>")[1]) == "(<b>&)"
    fig = token_strip([rec])
    hover = fig.data[0].hovertext[0][0]
    assert "&quot;" not in hover and "<b>\"</b>" in hover
    heat = batch_heatmap([[rec]])
    assert "&quot;" not in heat.data[0].text[0][0] and "&quot;" not in heat.data[0].hovertext[0][0]


def _luminance(rgb) -> float:
    """WCAG relative luminance of an (r, g, b) colour in 0..255."""
    def channel(c):
        c /= 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (channel(float(c)) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def _contrast(a, b) -> float:
    hi, lo = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_outcome_markers_show_on_every_cell_colour_as_in_the_legend():
    """Each marker's fill stands out from the scale's darkest red and darkest blue (WCAG contrast
    >= 3), and its rim from a white cell; the legend draws the trace's own marker."""
    import plotly.colors as pc
    scale = pc.get_colorscale(COLORSCALE)
    ends = [pc.unlabel_rgb(pc.convert_colors_to_same_type(c)[0][0]) for _, c in
            (scale[0], scale[-1])] + [(255, 255, 255)]
    fig = token_strip(_records())
    for trace in fig.data[1:]:
        fill = pc.unlabel_rgb(pc.convert_colors_to_same_type(trace.marker.color)[0][0])
        rim = pc.unlabel_rgb(pc.convert_colors_to_same_type(trace.marker.line.color)[0][0])
        assert min(_contrast(fill, e) for e in ends[:2]) >= 3, trace.name  # dark cells
        assert _contrast(rim, ends[2]) >= 3, trace.name  # the rim on a white cell
        assert trace.showlegend is not False and not trace.marker.symbol.endswith("-open")


def test_long_words_fit_their_cells_and_lone_marks_are_large():
    cell = STRIP_PLOT_WIDTH / 11
    for word in ("the", "unbelievable", "electroencephalographically"):
        label = fit_label(word, cell_px=cell)
        size = int(re.search(r"font-size:(\d+)px", label).group(1)) if "font-size" in label \
            else 14
        shown = _shown(label)
        assert 0.6 * size * len(shown) <= cell, (word, label)  # ~0.6 em a character
        assert size >= 10 and (shown == word or (shown.endswith("\u2026") and
                                                 word.startswith(shown[:-1])))
    assert fit_label("the", cell_px=cell) == "the"
    for mark in (".", ",", '"'):
        label = fit_label(mark, cell_px=cell)
        assert int(re.search(r"font-size:(\d+)px", label).group(1)) >= 20 and "<b>" in label


def test_a_replaced_mark_keeps_the_cells_size_so_both_lines_fit():
    """A quote drawn large above its original pushed the two lines past the cell's top, where
    the outline hid it: a batch heatmap showed a replaced ``"`` as ``(the)`` alone."""
    rec = _rec('"', 0.2, replaced=True, original="the")
    label = cell_text(rec, cell_px=144, font_size=12)
    assert "font-size" not in label and [_shown(line) for line in label.split("<br>")] == \
        ['"', "(the)"]
    assert "<b>" in label.split("<br>")[0]  # still bold: a mark at 12 px needs the weight
    heat = batch_heatmap([[rec]])
    assert "font-size" not in heat.data[0].text[0][0]
    assert heat.layout.height - 200 >= 2 * heat.data[0].textfont.size + 6  # two lines a row


def test_word_mode_refuses_a_replacement_it_would_hide(ckpt):
    text = "the boring station was crowded ."
    tokens = ckpt.tokenizer.convert_ids_to_tokens(ckpt.tokenizer.encode(text))
    inner = next(i for i, t in enumerate(tokens) if t.startswith("##")) + 1  # a hidden piece
    records = score_text(ckpt, text, replace={inner: "river"})
    with pytest.raises(ValueError, match=f"position {inner} is the piece '{tokens[inner - 1]}' "
                                         "of the word 'boring'"):
        hidden_pieces(records, {inner: "river"})
    with pytest.raises(ValueError, match="of the word 'boring'"):  # its first piece too
        hidden_pieces(records, {inner - 1: "river"})
    hidden_pieces(records, {1: "a", inner + 1: "town"})  # one-piece words: fine
    ex = Explorer("bundled", text, words=True)
    ex.replace.value = f"{inner}=river"
    assert "of the word 'boring'" in ex.message.value and ex.records == []
    ex.words.value = False  # the pieces shown: the same replacement is drawn
    assert ex.message.value == "" and ex.records[inner - 1]["token"] == "river"


def test_batch_heatmap_rows_and_ground_truth(ckpt):
    texts = [TEXT, "The sun rose over the quiet town.", "Dogs bark."]
    batch = score_texts(ckpt, texts, seed=2)
    fig = batch_heatmap(batch, labels=["a", "b", "c"])
    heat, legend = fig.data
    columns = [list(col) for col in zip(*heat.z)]  # one column per text
    for col, recs in zip(columns, batch):
        assert col[:len(recs)] == [r["p_replaced"] for r in recs]
        assert all(v is None for v in col[len(recs):])
    assert list(heat.y) == list(range(1, max(map(len, batch)) + 1))  # positions from 1
    assert list(fig.layout.xaxis.ticktext) == ["a", "b", "c"]
    want = {(i, r["position"]) for i, recs in enumerate(batch) for r in recs if r["replaced"]}
    assert replaced_cells(fig) == want and want
    assert "replaced" in legend.name and legend.showlegend is not False
    # a replaced cell still shows its token (and its original) under the outline
    i, r = next((i, r) for i, recs in enumerate(batch) for r in recs if r["replaced"])
    assert heat.text[r["position"] - 1][i] == cell_text(r) and r["token"] in cell_text(r)
    assert fig.layout.width == FIGURE_WIDTH and heat.textfont.size >= 11
    # One batch, one forward pass: the corruption is model(...) on the padded batch.
    tok = ckpt.tokenizer
    rows = [[tok.cls_id, *tok.encode(t), tok.sep_id] for t in texts]
    n = max(map(len, rows))
    ids = torch.tensor([r + [tok.pad_id] * (n - len(r)) for r in rows])
    with torch.no_grad():
        out = ckpt.model(ids, generator=torch.Generator().manual_seed(2))
    for i, recs in enumerate(batch):
        assert [r["token"] for r in recs] == \
            tok.convert_ids_to_tokens(out.corrupted_ids[i, 1:len(recs) + 1])


# ------------------------------------------------------------------------------------ CLI


def test_cli_json_prints_the_records(ckpt, capsys):
    assert main(["viz", "--text", TEXT, "--seed", "4", "--replace", "2=dog", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads(json.dumps(score_text(ckpt, TEXT, replace={2: "dog"})))
    assert {"token", "original", "replaced", "p_replaced", "top_k", "masked"} <= set(printed[0])


def test_cli_writes_an_offline_page(tmp_path, capsys):
    out = tmp_path / "strip.html"
    assert main(["viz", "--checkpoint", "bundled", "--text", TEXT, "--out", str(out),
                 "--words"]) == 0
    summary = json.loads(capsys.readouterr().out)
    page = out.read_text()
    assert summary["out"] == str(out) and summary["tokens"] == len(score_text(
        load_checkpoint("bundled"), TEXT))
    assert "Plotly.newPlot" in page and "<script src=\"http" not in page
    assert len(page) > 1_000_000  # plotly.js itself is embedded


@pytest.mark.parametrize("argv, message", [
    (["--text", "", "--json"], "the text is empty"),
    (["--text", "the cat", "--replace", "9=dog", "--json"], "position 9 is outside the text"),
    (["--text", "the cat", "--replace", "1=zzqxv", "--json"], "'zzqxv' is not a word of the "
                                                               "vocabulary"),
    (["--text", "the cat"], "give --out FILE.html (a page) or --json"),
    (["--json"], "give --text"),
    (["--run", "{tmp}", "--out", "{tmp}.html"], "no metrics.jsonl"),
    (["--run", "{tmp}", "--json"], "--run DIR writes a page"),
    (["--checkpoint", "{tmp}", "--text", "a", "--json"], "not a checkpoint directory"),
    (["--text", "the boring station", "--words", "--replace", "3=dog", "--out", "{tmp}/x.html"],
     "position 3 is the piece '##ring' of the word 'boring'"),
])
def test_cli_bad_input_is_one_line_naming_it(tmp_path, capsys, argv, message):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(["viz", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("minielectra viz: error: ") and "\n" not in err
    assert message in err


# -------------------------------------------------------------------------------- explorer


def test_explorer_redraws_from_its_controls(ckpt):
    ex = Explorer("bundled", TEXT, seed=0)
    assert ex.records == score_text(ckpt, TEXT, seed=0)
    ex.replace.value = "2=dog, 3=ran"  # an observer calls update()
    assert ex.records == score_text(ckpt, TEXT, replace={2: "dog", 3: "ran"})
    assert ex.figure.data[0].text[0][1] == "dog<br><i>(cat)</i>"
    assert len(ex.figure.layout.shapes) == 2 and "by hand" in ex.figure.layout.title.text
    ex.next_seed()  # "sample again": seed 1, hand replacements cleared
    assert ex.seed.value == 1 and ex.replace.value == ""
    assert ex.records == score_text(ckpt, TEXT, seed=1)
    cells = wrap(ex.records, PER_ROW)
    assert [ex.figure.data[0].z[r][c] for r, c in cells] == \
        [r["p_replaced"] for r in ex.records]


def test_explorer_clears_the_strip_on_bad_input_and_says_why_there():
    ex = Explorer("bundled", TEXT)
    ex.replace.value = "99=dog"
    assert "position 99 is outside the text" in ex.message.value
    assert ex.records == [] and ex.figure.data == ()  # no stale strip left as the answer
    notes = [a.text for a in ex.figure.layout.annotations]
    assert any("position 99 is outside the text" in t for t in notes), notes
    ex.replace.value = "dog"
    assert "replace 'dog': expected POS=WORD" in html.unescape(ex.message.value)  # no flag
    assert "--" not in ex.message.value
    ex.checkpoint.value = "/nonexistent"
    assert "no such directory" in ex.message.value
    ex.checkpoint.value, ex.replace.value = "bundled", ""
    assert ex.message.value == "" and ex.records == score_text(load_checkpoint("bundled"), TEXT)
    assert ex.figure.data[0].type == "heatmap"
    # What the page draws is the widget's one output: the new strip, no error note left over.
    output, = ex.view.widget.outputs
    drawn = output["data"]["application/vnd.plotly.v1+json"]
    assert drawn["data"][0]["type"] == "heatmap"
    assert not [a for a in drawn["layout"].get("annotations", []) if "no strip" in a["text"]]


def test_explorer_fits_the_column_and_its_button_its_label():
    ex = Explorer("bundled", "word " * 60)  # a long text wraps into rows, never wider
    assert ex.figure.layout.width == FIGURE_WIDTH
    assert len(ex.figure.data[0].z[0]) <= PER_ROW and len(ex.figure.data[0].z) > 1
    # a cell of PER_ROW fits the longest word of the text at the strip's font size (~0.6 em)
    plot_width = FIGURE_WIDTH - 10 - 10 - 60  # margins and the colour bar
    assert 0.6 * 14 * len("because") < plot_width / PER_ROW
    assert ex.sample.layout.width == "auto"  # sized to "sample again (next seed)", not cut
    bundle = widget_bundle(ex.widget, "x")  # what a reader without the kernel sees
    assert bundle["text/plain"] == "x" and "VBox" not in bundle["text/plain"]
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == ex.widget.model_id


def test_explorer_state_lives_in_the_kernel_for_a_reload(ckpt):
    """A reloaded page asks the kernel for every widget's state: the explorer's figure must be
    there as last drawn, not as first shown."""
    ex = Explorer("bundled", TEXT, seed=0)
    ex.replace.value = "2=dog"
    state = ex.view.widget.get_state()
    shown = state["outputs"][0]["data"]["application/vnd.plotly.v1+json"]
    assert shown["data"][0]["text"][0][1] == "dog<br><i>(cat)</i>"
    assert [w.model_id for w in ex.widget.children][-1] == ex.view.widget.model_id


def test_span_figure_keeps_its_legend_and_label_off_the_bars():
    """The SQuAD view: a P(start) of 1 reaches the top of the axis; the legend sits wholly above
    the plot (anchored at its bottom edge) and the axis leaves room over 1 for the span's label."""
    from minielectra.viz.squad import span_figure
    view = {"tokens": ["the", "bro", "##ncos", "won", '"', "."], "p_start": [1, 0, 0, 0, 0, 0],
            "p_end": [0, 0, 1, 0, 0, 0], "p_start_null": 0.0, "p_end_null": 0.0,
            "answer_tokens": [0, 2]}
    fig = span_figure(view, title="Who won?")
    legend = fig.layout.legend
    assert legend.yanchor == "bottom" and legend.y >= 1  # outside the plot area, above it
    assert fig.layout.yaxis.range[1] > 1.1  # bars of 1 leave room for "answer" above them
    assert fig.layout.margin.t >= 90  # the title and the legend both fit over the plot
    assert list(fig.layout.xaxis.ticktext) == ["the", "bro", "##ncos", "won", '"', "."]
