"""The first hour, from the command line: predict with several texts and standard input, progress
lines in a log, the main job's next commands, and the next step after ``minielectra lessons``.

References are independent of the code under test: predictions one text at a time through the
library's ``predict`` (a different path from the command line's grouping), progress lines counted
against a fake clock, the next commands parsed by the real parser, and JupyterLab's presence
decided by the test.
"""

import io
import json
import shlex
import sys

import pytest

from minielectra import lessons, progress
from minielectra.cli import build_parser, main
from minielectra.finetune import predict as pr
from minielectra.usage import next_commands

from test_firsthour import FAST, FIXTURES


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 and out.strip() else None), err


@pytest.fixture(scope="module")
def reviews_model(char_run_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("reviews") / "model"
    assert main([str(a) for a in ("finetune", "--checkpoint", char_run_dir, "--train",
                                  FIXTURES / "reviews_train.csv", "--dev",
                                  FIXTURES / "reviews_dev.csv", "--out", out, *FAST)]) == 0
    return out


def test_predict_takes_several_texts(capsys, reviews_model):
    texts = ["a warm, funny film", "dull", "the best thing this year"]
    code, got, err = run_cli(capsys, "predict", "--model", reviews_model, *texts)
    assert code == 0, err
    assert [p["text_a"] for p in got["predictions"]] == texts
    one_by_one = [pr.predict(reviews_model, [t])[0] for t in texts]
    for p, ref in zip(got["predictions"], one_by_one):
        assert p["label"] == ref["label"]
        assert p["probabilities"] == pytest.approx(ref["probabilities"], abs=1e-6)


def test_predict_reads_standard_input(capsys, reviews_model, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("first line\n\nsecond \"quoted\n"))
    code, got, err = run_cli(capsys, "predict", "--model", reviews_model, "-")
    assert code == 0, err
    assert [p["text_a"] for p in got["predictions"]] == ["first line", 'second "quoted']
    assert [p["label"] for p in got["predictions"]] == [
        r["label"] for r in pr.predict(reviews_model, ["first line", 'second "quoted'])]
    code, _, err = run_cli(capsys, "predict", "--model", reviews_model, "-", "more")
    assert code == 2 and "standard input" in err


def test_pair_models_read_texts_two_at_a_time():
    class Pairs:
        is_pair, display = True, "RTE"

    class Singles:
        is_pair, display = False, "SST-2"

    assert pr.group_texts(["a", "b", "c", "d"], Pairs) == [("a", "b"), ("c", "d")]
    assert pr.group_texts(["a", "b"], Singles) == [("a", None), ("b", None)]
    with pytest.raises(ValueError, match="pairs.*odd"):
        pr.group_texts(["a", "b", "c"], Pairs)


# ------------------------------------------------------------------------ progress in a log


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_progress_in_a_log_is_a_few_plain_lines(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(progress.time, "monotonic", clock)
    log = io.StringIO()  # not a terminal
    bar = progress.progress_bar(total=1000, desc="pretrain", file=log)
    assert isinstance(bar, progress.LineProgress)
    with bar:
        for step in range(1000):
            clock.now += 0.1  # 100 s in all: a line at 30, 60 and 90 s, and one at the end
            bar.update(1)
            bar.set_postfix(loss=f"{1 / (step + 1):.3f}", refresh=False)
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue() and len(lines) == 4
    assert lines[0].startswith("pretrain: 300/1000 (30%), 0.5 min, 10.0 it/s, loss=")
    assert lines[-1].startswith("pretrain: 1000/1000 (100%), 1.7 min") and "loss=0.001" in lines[-1]


def test_progress_on_a_terminal_is_tqdm():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    from tqdm import tqdm
    bar = progress.progress_bar(total=3, file=Tty())
    assert isinstance(bar, tqdm)
    bar.close()


class Terminal(io.StringIO):
    def isatty(self):
        return True


def on_screen(raw: str) -> list[str]:
    """The lines a terminal shows of ``raw``: a carriage return goes back to its line's start,
    where the next characters write over what is there."""
    lines, line, col = [], [], 0
    for ch in raw:
        if ch == "\n":
            lines, line, col = lines + ["".join(line).rstrip()], [], 0
        elif ch == "\r":
            col = 0
        else:
            line[col:col + 1] = [ch]
            col += 1
    return lines + ["".join(line).rstrip()]


def test_the_screen_reader_of_these_tests_overwrites_on_a_carriage_return():
    assert on_screen("abc\rX\nde\r  \rf") == ["Xbc", "f"]


def test_the_main_jobs_start_line_is_not_written_onto_its_progress_bar(monkeypatch, tmp_path,
                                                                      write_tiny_corpus):
    """On a terminal the bar is drawn (0%) before the run says whether it compiles: that line
    is a line of its own, with the bar below it."""
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    sets = ["data.vocab_size=128", f"data.cache_dir={tmp_path / 'cache'}", "train.max_minutes=0"]
    assert main(["pretrain", "--preset", "tiny", "--corpus", write_tiny_corpus(tmp_path / "t.txt"),
                 "--out", tmp_path / "run", "--max-steps", "2",
                 *[a for x in sets for a in ("--set", x)]]) == 0
    shown = on_screen(terminal.getvalue())
    (said,) = [line for line in shown if "torch.compile" in line]
    assert said.startswith("pretrain: torch.compile "), shown
    assert any(line.startswith("pretrain: ") and "%|" in line for line in shown)  # the bar


def test_a_disabled_bar_writes_nothing():
    log = io.StringIO()
    with progress.progress_bar(total=3, file=log, disable=True) as bar:
        bar.update(3)
    assert log.getvalue() == ""


# ------------------------------------------------------------------------ what to run next


def test_the_main_jobs_next_commands_parse_and_lead_to_predict():
    text = next_commands("runs/nano")
    commands = [shlex.split(c, comments=True) for c in text.replace("\\\n", " ").splitlines()[1:]]
    parser = build_parser()
    parsed = [parser.parse_args(c[1:] if c[0] == "minielectra" else c) for c in commands]
    finetune = next(a for a in parsed if a.command == "finetune")
    predict = next(a for a in parsed if a.command == "predict")
    assert finetune.out and predict.model == finetune.out  # predict reads what finetune wrote
    assert not finetune.set  # own data gets its recipe by default (finetune.run.OWN_DATA_RECIPE)


def test_lessons_next_step_installs_jupyterlab_where_it_is_missing(monkeypatch, tmp_path):
    real = lessons.importlib.util.find_spec
    monkeypatch.setattr(lessons.importlib.util, "find_spec",
                        lambda name, *a: object() if name == "jupyterlab" else real(name, *a))
    present = lessons.next_step(tmp_path / "my course")
    assert present == f"jupyter lab '{tmp_path / 'my course'}'"
    monkeypatch.setattr(lessons.importlib.util, "find_spec",
                        lambda name, *a: None if name == "jupyterlab" else real(name, *a))
    missing = lessons.next_step(tmp_path / "c")
    assert missing == f'pip install "jupyterlab>=4.0" && jupyter lab {tmp_path / "c"}'
