"""Every figure a results page states about a measurement is rendered from a committed results
file (the ``{result}`` role and the ``results-table`` directive of ``docs/_ext/results.py``; on
pages read outside Sphinx too, the course's chapters and the model card, the same figure filled
in between two HTML comments that name it), or is on the short reviewed list of constants below
(the paper's published figures, the data's sizes, settings). A figure typed into the prose is a
figure that can drift from its file; this test finds them, and fails on a filled figure that is
no longer what its file gives.

A *figure* here is a decimal (``50.7``), a signed number (``+4.3``, ``-0.9``) or a percentage
(``28%``): what a measurement prints. Plain integers (seeds, epochs, steps, sentences) are the
set-up, not a measurement, and are not checked. Code (fenced or inline) and link targets are
not prose; a table typed into a page is (only a ``results-table`` directive renders one).

The pages in :data:`CHECKED` pass in full.
"""

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))
import results  # noqa: E402

FIGURE = re.compile(r"(?<![\w.])[-+]\d+(?:\.\d+)?%?|(?<![\w.+-])\d+\.\d+%?|(?<![\w.+-])\d+%")
ROLE = re.compile(r"\{result\}`([^`]+)`")

# page -> figures that are not our measurements, each with why it may stand as typed
CONSTANTS = {
    "docs/results/suite.md": {
        "1.4%": "attention's share of the FLOPs at 128 tokens: arithmetic of the shapes",
        "0.8": "the recipe's layer-wise learning-rate decay, a setting",
        "0.5": "the discriminator's decision threshold P = 0.5; the sign-flip test's least p "
               "with two pairs, 2 / 2^2",
        "52.7": "RTE's dev majority class, 146 of 277 (checked against the data)",
        "68.4%": "MRPC's dev majority class, 279 of 408 (checked against the data)",
        "90%": "the share of its length at which the diagnosis counts an example full, a threshold",
        "15%": "the masking rate every run sets (objective.mask_prob), a setting",
    },
}

CONSTANTS["docs/results/speed.md"] = {
    "2.6": "the clock the VM reports for its CPU (/proc/cpuinfo), a fact of the machine",
    "166.4": "the fp32 bound that clock implies for 2 vCPUs, 2 x 2.6 GHz x 32 FLOP a cycle: "
             "arithmetic of the machine's constants",
    "1.5": "the aim set for a compiled mini step in bf16 against fp32, a target",
    "0.75": "the held-out AUC the main job aims at, a target",
}

CONSTANTS["docs/results/squad.md"] = {
    "75.8": "the official repository's ELECTRA-Small on SQuAD 1.1 dev (EM), published",
    "70.1": "the same on SQuAD 2.0, published",
    "1.1": "a version of SQuAD (v1.1), a name", "2.0": "a version of SQuAD (2.0), a name",
}

CONSTANTS["docs/results/sst2.md"] = {
    "0.8": "the recipe's layer-wise learning-rate decay, a setting",
    "10%": "the recipe's warm-up share of the steps, a setting",
    "15%": "the share of selected tokens the official masking leaves as they are (1 - 0.85), "
           "a setting",
    "0.69": "ln 2, the loss of a two-class guess at chance: arithmetic",
    "16.4": "ELECTRA-Small's pre-training tokens in billions, 1M steps x 128 x 128: arithmetic "
            "of the paper's recipe",
    "88.3": "ELECTRA-Small-OWT on SST-2 dev, published (the official README)",
    "79.9": "ELECTRA-Small's GLUE average, published (the paper's Table 1)",
    "91.2": "the released ELECTRA-Small (Small++) on SST-2 dev, published (the official README)",
}

CONSTANTS["docs/results/paper-experiments.md"] = {
    "15%": "BERT's share of masked tokens, and of selected tokens kept as they are: settings",
    "80%": "BERT's share of masked tokens replaced by [MASK], a setting",
    "10%": "BERT's random and kept shares; the warm-up share of the steps: settings",
    "3.2": "a section of the paper (3.2), a name",
    "0.0625": "the least p an exact sign-flip test can give with 5 pairs, 2 / 2^5: arithmetic",
}

CONSTANTS["docs/results/english.md"] = {
    "2.5": "pretrain-en's words in millions, 2,487,082 by wc -w over its five files: the data",
    "3.5": "a section of Vaswani et al. 2017 (3.5), a name",
    "0.7": "the held-out AUC this page takes as the jump's mark, a threshold",
    "0.0625": "the least p an exact sign-flip test can give with 5 pairs, 2 / 2^5: arithmetic",
    "15%": "the share of tokens the masked objectives select, a setting",
    "65%": "the paper's MLE generator's accuracy on masked tokens (section 3.2), published",
    "58%": "the paper's adversarial generator's accuracy on masked tokens (section 3.2), published",
    "1.4": "ELECTRA-Small's pre-training FLOPs, 1.4e18 (the paper's Table 1), published",
    "50.9": "SST-2's dev majority class, 444 of 872 (checked against the data)",
    "0.5": "a sampling temperature (T = 0.5), a setting",
}

CONSTANTS["docs/results/few-labels.md"] = {
    "25%": "a masking rate (objective.mask_prob=0.25), a setting",
    "15%": "the share of selected tokens the paper's split leaves as they are, a setting",
    "85%": "the share it masks, a setting",
    "10%": "BERT's random-token share, a setting",
    "2.5": "pretrain-en's words in millions, 2,487,082 by wc -w over its five files: the data",
    "16.4": "ELECTRA-Small's pre-training tokens in billions, 1M steps x 128 x 128: arithmetic "
            "of the paper's recipe",
}

CONSTANTS["tutorial/07_fine_tuning.md"] = {
    "3.1": "a section of the paper (3.1), a name",
    "4.8": "ELECTRA-Small's GLUE lead over BERT-Small, 79.9 - 75.1 (the paper's Table 1), "
           "published",
    "1.1": "its lead over GPT, 79.9 - 78.8 (the paper's Table 1), published; a version of SQuAD "
           "(v1.1), a name",
    "2.0": "a version of SQuAD (2.0), a name",
    "0.1": "the classifier's dropout, a setting",
    "0.8": "the recipe's layer-wise learning-rate decay, a setting",
    "10%": "the recipe's warm-up share of the steps, a setting",
    "5.5%": "the embeddings' share of the head's rate for L = 12, 0.8^13: arithmetic",
    "1.3": "CoLA's standard deviation over 10 fine-tuning runs (the paper), published",
    "1.9": "RTE's, published", "0.7": "MRPC's, published",
    "0.5": "the other tasks' (0.5 or less), published; the official answerability loss weight, "
           "a setting",
    "0.01": "the official code's weight decay, a setting",
    "1.0": "the gradient clip; a layer-wise decay of 1.0 (none): settings",
    "88.3": "ELECTRA-Small-OWT on SST-2 dev, published (the official README)",
    "15%": "the share of selected tokens the paper's split leaves as they are, a setting",
    "25%": "a masking rate (objective.mask_prob=0.25), a setting",
    "-10000": "the logit that closes a position to the answer (the official code's), a setting",
}

FLOPS = "arithmetic of minielectra/objectives/flops.py for `small` (the chapter's code asserts it)"
CONSTANTS["tutorial/08_scaling_up.md"] = {
    "3.3": "a section of the paper (3.3), a name", "3.5": "a section of the paper (3.5), a name",
    "79.9": "ELECTRA-Small's GLUE score (the paper's Table 1), published; its last milestone",
    "75.1": "BERT-Small's (Table 1), published", "78.8": "GPT's (Table 1), published",
    "74.1": "ELECTRA-Small after 1/16 of its training (Table 1), published; its first milestone",
    "76.0": "a milestone of ELECTRA-Small's curve (Table 1), published",
    "77.7": "a milestone of ELECTRA-Small's curve (Table 1), published",
    "79.0": "a milestone of ELECTRA-Small's curve (Table 1), published",
    "1.4": "Table 1's training FLOPs for ELECTRA-Small and BERT-Small, 1.4e18, published; "
           "1.4M tokens/s, 86 steps/s x 128 x 128: arithmetic",
    "85.0": "ELECTRA's GLUE score in Table 5 (base size), published",
    "84.3": "All-Tokens MLM's (Table 5), published",
    "82.4": "Replace MLM's and ELECTRA 15%'s (Table 5), published",
    "82.2": "BERT's (Table 5), published",
    "15%": "BERT's share of masked tokens, a setting",
    "10%": "the warm-up share of the steps; the utilisation the time estimates assume: settings",
    "1.15": f"the training FLOPs per step, 1.15e12: {FLOPS}",
    "1.48": f"the same with the generator's logits everywhere, 1.48e12: {FLOPS}",
    "1.29": f"the official script's count, 1.29e12 per step (1.29e18 for 1M steps): {FLOPS}",
    "6.47": f"the official count's forward, 6.47e11: {FLOPS}",
    "2.56": f"its one-hot lookups, 2.56e11: {FLOPS}", "40%": f"their share of it: {FLOPS}",
    "3.91": f"the rest of its forward, 3.91e11: {FLOPS}",
    "3.83": f"our forward, 3.83e11: {FLOPS}", "3.8": f"the same, 3.8e11: {FLOPS}",
    "2%": f"how far the two forwards differ: {FLOPS}",
    "1.42": f"the official count for BERT-Small's 1.45M steps, 1.42e18: {FLOPS}",
    "1.45": "BERT-Small's pre-training steps in millions (the paper), published",
    "25%": f"how far the three counts differ: {FLOPS}",
    "4.5": f"the generator's forward, 4.5e10: {FLOPS}", "12%": f"its share: {FLOPS}",
    "1%": f"the discriminator head's share: {FLOPS}",
    "0.33": f"what the generator's logits everywhere add, 0.33e12: {FLOPS}",
    "1.05": f"the steps (millions) a 1/8 generator gets for 1M ELECTRA-Small steps: {FLOPS}",
    "0.52": f"the share of steps an equal-size generator leaves the discriminator: {FLOPS}",
    "3.2": "hours on an H100 at 10% utilisation, from the FLOP count: arithmetic",
    "0.0625": "the least p an exact sign-flip test can give with 5 pairs, 2 / 2^5: arithmetic",
    "0.7": "the held-out AUC the English page takes as the jump's mark, a threshold",
}

# pages read outside Sphinx as well, whose figures are filled in (docs/_ext/results.py fill)
FILLED = ["minielectra/assets/bundled/MODEL_CARD.md", "tutorial/07_fine_tuning.md",
          "tutorial/08_scaling_up.md", "notebooks/07_fine_tuning.ipynb",
          "notebooks/08_scaling_up.ipynb"]

CONSTANTS["minielectra/assets/bundled/MODEL_CARD.md"] = {
    "0.25": "the generator's width as a share of the discriminator's (generator_size), a setting",
    "2.5": "pretrain-en's words in millions, 2,487,082 by wc -w over its five files: the data",
    "3.11": "the Python version whose standard library's docstrings are pydocs, a name",
    "2.13": "torch's version (2.13.0), a name",
    "2%": "the share of documents held out (by hash), a setting",
    "15%": "the masking rate, and the share of selected tokens the paper leaves as they are: "
           "settings",
    "0.01": "the optimiser's weight decay, a setting",
    "1.0": "the gradient clip, a setting",
    "0.5": "the decision threshold P(replaced) > 0.5 for precision and recall, a setting",
}

# the lesson notebooks state the chapters' published figures and settings, and a few more
CONSTANTS["notebooks/07_fine_tuning.ipynb"] = CONSTANTS["tutorial/07_fine_tuning.md"]
CONSTANTS["notebooks/08_scaling_up.ipynb"] = {
    **CONSTANTS["tutorial/08_scaling_up.md"],
    "6.25%": "the share of its training after which ELECTRA-Small scores 74.1 (Table 1), "
             "published",
    "6.25": "a milestone checkpoint, 6.25% of the steps (Table 1), published",
    "12.5": "the next milestone, 12.5% (Table 1), published",
    "50%": "the last milestone before the end (Table 1), published; the word-order probe's "
           "chance, a property of the probe",
    "80.4": "ELECTRA-Small-OWT's GLUE score (the official README), published",
    "6.5": f"the official count's forward, 6.5e11: {FLOPS}",
    "16.4": "ELECTRA-Small's pre-training tokens in billions, 1M steps x 128 x 128: arithmetic "
            "of the paper's recipe",
}

CHECKED = ["docs/results/suite.md", "docs/results/squad.md", "docs/results/speed.md",
           "docs/results/learning-curves.md", "docs/results/sst2.md",
           "docs/results/paper-experiments.md", "docs/results/english.md",
           "docs/results/few-labels.md", *FILLED]

def prose(text: str) -> str:
    """A page's text without code, roles and link targets. A table typed into the page is
    checked like prose (a rendered table lives in its directive, not in the page's text)."""
    # an admonition is prose in a fence: keep its title and body
    text = re.sub(r"```\{(?:admonition|note|tip|warning)\}(.*?)```", r"\1", text, flags=re.S)
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    # the GPU table that tools/gpu/tables.py renders from a committed gpu_check JSON (--fill)
    text = re.sub(r"<!-- gpu-check -->.*?<!-- /gpu-check -->", "", text, flags=re.S)
    # figures and tables filled from a results file (python docs/_ext/results.py fill PAGE)
    text = results.FILLED_TABLE.sub("", results.FILLED_RESULT.sub("", text))
    text = ROLE.sub("", text)
    text = re.sub(r"`[^`]*`", "", text)
    return re.sub(r"\]\([^)]*\)", "]", text)


EVERYWHERE = {"2003.10555": "the paper's arXiv id"}


def page_text(page: str) -> str:
    """A page's Markdown: a notebook's is its Markdown cells (its code and outputs are what it
    computes when it runs, not what it states)."""
    text = (ROOT / page).read_text()
    if not page.endswith(".ipynb"):
        return text
    return "\n\n".join("".join(c["source"]) for c in json.loads(text)["cells"]
                       if c["cell_type"] == "markdown")


def bare_figures(page: str) -> list[str]:
    allowed = {**EVERYWHERE, **CONSTANTS.get(page, {})}
    return [f for f in FIGURE.findall(prose(page_text(page))) if f not in allowed]


def test_the_checker_finds_a_typed_figure_and_passes_a_rendered_one():
    text = ("ELECTRA is +4.3 points ahead (p 0.19), 28% of it on STS-B, with 5 seeds and "
            "{result}`suite:electra_vs_mlm.mean|+.1f` rendered; `lr=3e-4` is code.\n"
            "```{results-source} x.json\n:machine: 2.5 GHz\n```\n| 1.5 | typed table |\n")
    assert FIGURE.findall(prose(text)) == ["+4.3", "0.19", "28%", "1.5"]
    assert FIGURE.findall(prose("<!-- gpu-check -->\n| 1.93x |\n<!-- /gpu-check -->")) == []
    assert FIGURE.findall(prose("```{admonition} The runs\nAUC 0.856\n```\n")) == ["0.856"]
    filled = ("a lead of <!-- result suite:electra_vs_mlm.mean|+.1f -->+4.3<!-- /result -->, "
              "-0.5 typed\n<!-- results-table x.md\n-->\n\n| 1.5 |\n\n<!-- /results-table -->\n")
    assert FIGURE.findall(prose(filled)) == ["-0.5"]


@pytest.mark.parametrize("page", CHECKED)
def test_every_figure_on_a_checked_page_is_rendered(page):
    bare = bare_figures(page)
    assert not bare, f"{page}: figures typed by hand, not rendered from a results file: {bare}"


@pytest.mark.parametrize("page", CHECKED)
def test_every_rendered_figure_resolves(page):
    text = page_text(page)
    specs = ROLE.findall(text) + results.filled_specs(text)
    assert specs
    for spec in specs:
        assert results.render_result(spec), spec


@pytest.mark.parametrize("page", FILLED)
def test_every_filled_figure_is_what_its_file_gives(page):
    text, filled = results.fill_page(ROOT / page)
    assert filled == text, (f"{page}: a filled figure or table differs from its "
                                        f"file: python docs/_ext/results.py fill {page}")


def test_fill_writes_the_figure_and_the_table_a_comment_names():
    spec = "suite:electra_vs_mlm.mean|+.1f"
    page = (f"ahead by <!-- result {spec} -->9.9<!-- /result --> points\n\n"
            "<!-- results-table research/results/suite/results.md\n:tables: 1\n-->\nstale\n"
            "<!-- /results-table -->\n")
    d = results.load(results.FILES["suite"])
    table = results.md_tables((ROOT / "research/results/suite/results.md").read_text())[0]
    assert results.fill(page) == (
        f"ahead by <!-- result {spec} -->{d['electra_vs_mlm']['mean']:+.1f}<!-- /result --> "
        "points\n\n<!-- results-table research/results/suite/results.md\n:tables: 1\n-->\n\n"
        f"{table}\n\n<!-- /results-table -->\n")
    with pytest.raises(ValueError, match="not one of"):
        results.fill("<!-- results-table x.md\n:tabels: 1\n-->\n<!-- /results-table -->")


def test_a_role_names_a_value_that_exists_and_formats_it():
    d = results.load(results.FILES["suite"])
    bundled = next(r for r in d["rows"] if r["arm"] == "bundled" and r["recipe"] == "reinit-1")
    assert results.render_result("suite:rows[arm=bundled,recipe=reinit-1].suite.mean|.1f") == \
        f"{bundled['suite']['mean']:.1f}"
    assert results.render_result("suite:electra_vs_mlm.by_pretraining_seed.0.diffs[1]|+.1f") == \
        f"{d['electra_vs_mlm']['by_pretraining_seed']['0']['diffs'][1]:+.1f}"
    random = next(r for r in d["rows"] if r["arm"] == "random")
    assert results.render_result(
        "suite:rows[arm=bundled,recipe=reinit-1].suite.mean - suite:rows[arm=random].suite.mean"
        "|+.1f") == f"{bundled['suite']['mean'] - random['suite']['mean']:+.1f}"
    whole = next(r for r in results.load(results.FILES["sst2"])["runs"] if r["seeds"] == 10)
    middle = sorted(whole["pretrained"])[4:6]  # ten seeds: the median is the middle two's mean
    assert results.render_result("sst2:runs[seeds=10].pretrained.median|.3f") == \
        f"{(middle[0] + middle[1]) / 2:.3f}"
    mean = sum(whole["pretrained"]) / 10
    sd = (sum((x - mean) ** 2 for x in whole["pretrained"]) / 9) ** 0.5
    assert results.render_result("sst2:runs[seeds=10].pretrained.sd|.4f") == f"{sd:.4f}"
    assert results.render_result("suite:electra_vs_mlm.mean * 100|.0f") == \
        f"{d['electra_vs_mlm']['mean'] * 100:.0f}"
    point = next(p for p in results.load(results.FILES["word-order"])["points"]
                 if p["run"] == "ELECTRA, generator 1/8 (mini)" and p["step"] == 5000)
    assert results.render_result(  # a value with a comma in it
        "word-order:points[run=ELECTRA, generator 1/8 (mini),step=5000].swap.mean|.2f") == \
        f"{point['swap']['mean']:.2f}"
    with pytest.raises(KeyError, match="matches 3 items"):
        results.render_result("suite:rows[arm=bundled].suite.mean|.1f")
    with pytest.raises(KeyError, match="no key 'nope'"):
        results.render_result("suite:electra_vs_mlm.nope|.1f")
    with pytest.raises(ValueError, match="needs its format"):
        results.render_result("suite:electra_vs_mlm.mean")
