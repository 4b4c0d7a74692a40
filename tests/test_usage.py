"""What the command line says besides results: --help, "did you mean", the next commands."""

import argparse
import json
import shlex

import pytest

from minielectra.cli import build_parser
from minielectra.config import apply_overrides, preset
from minielectra.config import finetune_config
from minielectra.usage import next_commands


def commands():
    parser = build_parser()
    (sub,) = parser._subparsers._group_actions
    return parser, sub.choices


def test_the_top_help_says_what_the_tool_does_in_a_users_words():
    parser, choices = commands()
    line = parser.format_help().split("\n\n")[1]  # after the usage lines
    assert "ELECTRA" in line and "fine-tune" in line, line
    assert not any(dev in line for dev in ("``", "argparse", "library function")), line
    for name, sub in choices.items():  # each command's own line is a user's too
        assert "``" not in (sub.description or "") + (sub.format_usage()), name


@pytest.mark.parametrize("name", sorted(commands()[1]))
def test_every_command_shows_an_example_that_parses(name):
    parser, choices = commands()
    text = choices[name].format_help()
    examples = [line.strip() for line in text.splitlines()
                if line.strip().startswith(f"minielectra {name} ")]
    assert examples, f"`minielectra {name} --help` shows no example"
    for example in examples:
        args = parser.parse_args(shlex.split(example)[1:])  # argparse exits on a bad one
        assert args.command == name


@pytest.mark.parametrize("name", sorted(commands()[1]))
def test_every_option_has_a_help_line_with_its_default(name):
    assert_help_lines_with_defaults(commands()[1][name], name)


def assert_help_lines_with_defaults(sub: argparse.ArgumentParser, name: str) -> None:
    shown = sub.format_help()
    one_of = {a for g in sub._mutually_exclusive_groups if g.required for a in g._group_actions}
    for action in sub._actions:
        if not action.option_strings or isinstance(action, argparse._HelpAction):
            continue
        flag = action.option_strings[-1]
        assert action.help, f"{name} {flag} has no help line"
        if not action.required and action not in one_of:  # a default, in words or appended
            options = shown[shown.index("options:"):]
            entry = options[options.index("\n  " + action.option_strings[0]) + 3:]
            entry = entry[:entry.index("\n  -") if "\n  -" in entry else len(entry)]
            assert "default" in " ".join(entry.split()), f"{name} {flag}: no default shown"


def experiments() -> dict[str, argparse.ArgumentParser]:
    (names,) = commands()[1]["experiment"]._subparsers._group_actions
    return names.choices


@pytest.mark.parametrize("name", sorted(experiments()))
def test_each_experiment_is_a_subcommand_with_only_its_own_flags(name):
    sub = experiments()[name]
    flags = {a.option_strings[-1] for a in sub._actions if a.option_strings} - {"--help"}
    paper = name != "toy-grammar"
    assert ("--budget" in flags, "--set" in flags, "--shard" in flags) == (paper,) * 3
    assert ("--budgets" in flags) == (name == "efficiency")  # the one with several budgets
    assert ("--words-per-class" in flags) == (not paper)
    assert_help_lines_with_defaults(sub, f"experiment {name}")
    examples = [line.strip() for line in sub.format_help().splitlines()
                if line.strip().startswith(f"minielectra experiment {name} ")]
    assert examples
    for example in examples:
        args = build_parser().parse_args(shlex.split(example)[1:])
        assert (args.command, args.name) == ("experiment", name)


@pytest.mark.parametrize("typo, suggestion", [
    ("train.max_stepz", "train.max_steps"), ("trian.max_steps", "train.max_steps"),
    ("train.lr", "train.learning_rate"), ("train.hidden_size", "model.hidden_size"),
    ("modle.dropout", "model.dropout"), ("data.corpsu", "data.corpus"), ("modle", "model"),
])
def test_a_mistyped_set_key_gets_did_you_mean(typo, suggestion):
    with pytest.raises(KeyError) as e:
        apply_overrides(preset("nano"), [f"{typo}=1"])
    message = e.value.args[0]
    assert "did you mean" in message
    assert suggestion in message.split("did you mean")[1].split("?")[0]


def test_a_key_with_nothing_close_lists_what_is_valid():
    with pytest.raises(KeyError, match=r"valid keys: \['train.batch_size'"):
        apply_overrides(preset("nano"), ["train.xyzzy=1"])
    with pytest.raises(KeyError, match=r"sections: \['data', 'model', 'objective', 'train'\]"):
        apply_overrides(preset("nano"), ["xyzzy.q=1"])
    with pytest.raises(KeyError, match="did you mean finetune.learning_rate"):
        finetune_config(["train.learning_rate=1"])


def test_next_commands_parse():
    parser = build_parser()
    lines = next_commands("runs/my run").replace("\\\n", " ").splitlines()
    assert lines[0] == "next:" and len(lines) == 5
    for line in lines[1:]:
        argv = shlex.split(line, comments=True)
        assert argv[0] == "minielectra" and any(a.startswith("runs/my run") for a in argv)
        parser.parse_args(argv[1:])


def test_the_license_pyproject_declares_ships_in_the_wheel():
    import tomllib
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    text = (root / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text


@pytest.mark.parametrize("argv", [
    ["evaluate", "--checkpoint", "electra-small-discriminator"],
    ["viz", "--checkpoint", "electra-small-discriminator", "--text", "a cat", "--json"],
    ["convert", "--from-hf", "electra-small-discriminator", "--out", "small"],
    ["finetune", "--checkpoint", "electra-small-discriminator", "--train", "t.csv", "--dev",
     "d.csv"]])
def test_a_hub_model_id_without_its_owner_is_told_the_form(argv, tmp_path, monkeypatch, capsys):
    """The name users remember is the model's, not its owner's: a checkpoint that is neither a
    local path nor owner/name gets one line that gives the form, whichever command took it."""
    from minielectra.cli import main
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.csv").write_text("text,label\na,0\nb,1\n")
    (tmp_path / "d.csv").write_text("text,label\na,0\nb,1\n")
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "electra-small-discriminator" in err and "owner/name" in err, err
    assert "google/electra-small-discriminator" in err, err


def test_the_convert_example_names_a_hub_model_id():
    from minielectra.model.hubmodels import HUB_ID
    from minielectra.usage import EXAMPLES
    src = shlex.split(EXAMPLES["convert"])[shlex.split(EXAMPLES["convert"]).index("--from-hf") + 1]
    assert HUB_ID.match(src), src


@pytest.mark.parametrize("command", [["evaluate", "--checkpoint"], ["viz", "--text", "a cat",
                                     "--json", "--checkpoint"], ["convert", "--out", "x",
                                     "--to-hf"]])
def test_a_fine_tuned_model_where_a_checkpoint_goes_points_to_predict(command, tmp_path,
                                                                      monkeypatch, capsys):
    from minielectra.cli import main
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.csv").write_text("text,label\ngood,1\nbad,0\nfine,1\nawful,0\n")
    assert main(["finetune", "--train", "t.csv", "--dev", "t.csv", "--out", "model",
                 "--set", "finetune.epochs=1"]) == 0
    capsys.readouterr()
    assert main([*command, "model"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "a fine-tuned model" in err and "minielectra predict --model model" in err, err


def test_a_refused_pretrain_is_one_line_with_no_word_before(tmp_path, monkeypatch, capsys):
    """The compiling rule's line tells of a run about to start; a run refused at the start
    (--resume with nothing to resume or another config, a fresh run over an earlier one's
    checkpoints, a GPU this machine lacks) says only why."""
    import torch

    from minielectra.cli import main
    monkeypatch.chdir(tmp_path)
    run = ["pretrain", "--preset", "tiny", "--out", "run"]
    refused = [[*run, "--resume"]]
    if not torch.cuda.is_available():
        refused.append([*run, "--device", "cuda"])
    for argv in refused:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "error:" in err[0], (argv, err)
    assert main(run) == 0
    capsys.readouterr()
    for argv, why in [(run, "already holds 1 checkpoint"),
                      ([*run, "--resume", "--max-steps", "3"], "train.max_steps: 6 -> 3")]:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and why in err[0], (argv, err)


@pytest.mark.parametrize("argv", [["finetune", "--train", "latin1.csv", "--dev", "t.csv"],
                                  ["finetune", "--task", "sst2"], ["glue", "--tasks", "rte"],
                                  ["finetune", "--task", "squad"]])
def test_a_refused_fine_tuning_is_one_line_with_no_word_before(argv, tmp_path, monkeypatch,
                                                               capsys):
    """Without --checkpoint the bundled one is fine-tuned, and that is said once the data is
    read: a bad file, or no data and no hub, is its one error line."""
    import datasets

    from minielectra.cli import main
    from minielectra.data import hub as data_hub
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MINIELECTRA_DATA_DIR", raising=False)
    monkeypatch.setattr(data_hub, "_PROBED", ["no connection to huggingface.co:443: test"])

    def load_dataset(*args, **kwargs):
        raise ConnectionError("offline")
    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    (tmp_path / "latin1.csv").write_bytes(b"text,label\ncaf\xe9,0\nb,1\n")
    (tmp_path / "t.csv").write_text("text,label\na,0\nb,1\n")
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "error:" in err[0], err


def test_fine_tuning_the_bundled_checkpoint_says_so_once_when_it_starts(tmp_path, monkeypatch,
                                                                        capsys):
    from minielectra.cli import main
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.csv").write_text("text,label\ngood,1\nbad,0\nfine,1\nawful,0\n")
    assert main(["finetune", "--train", "t.csv", "--dev", "t.csv", "--set",
                 "finetune.epochs=1"]) == 0
    err = capsys.readouterr().err.splitlines()
    said = [i for i, line in enumerate(err) if "no --checkpoint given" in line]
    recipe = [i for i, line in enumerate(err) if "the recipe for your own data" in line]
    assert len(said) == 1 and said[0] == 0, err  # the first line, before the run's own
    assert not recipe  # finetune.epochs given: the recipe's epochs are not added


def test_predict_shows_progress_on_a_long_file_and_none_for_a_few_texts(tmp_path, monkeypatch,
                                                                        capsys):
    from minielectra.cli import main
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.csv").write_text("text,label\ngood,1\nbad,0\nfine,1\nawful,0\n")
    assert main(["finetune", "--train", "t.csv", "--dev", "t.csv", "--out", "model",
                 "--set", "finetune.epochs=1"]) == 0
    capsys.readouterr()
    (tmp_path / "many.txt").write_text("".join(f"text number {i}\n" for i in range(9 * 128)))
    assert main(["predict", "--model", "model", "--file", "many.txt"]) == 0
    said = capsys.readouterr()
    assert len(json.loads(said.out)["predictions"]) == 9 * 128
    assert "predict: 9/9 (100%)" in said.err, said.err
    assert main(["predict", "--model", "model", "a fine film"]) == 0
    assert "predict:" not in capsys.readouterr().err
