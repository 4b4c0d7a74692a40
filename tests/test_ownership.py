"""Folders by their record (``minielectra/ownership.py``): what a command may write, read, replace.

Each test builds the user's situation through the command line (their files in an output folder, a
link where a file goes, an output that is an input, an old folder without a record, a second
process, a Ctrl-C or a full disk halfway) and checks the user's bytes after the command against
their bytes before, and the one line that says why. The references are the user's own files and
what the command promises, never the command's own output recorded once.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path

import pytest

from minielectra import cli
from minielectra.model.storage import BUNDLED
from minielectra.safeio import ASIDE
from test_safety import CORPUS, FT, TINY, one_error, run_cli, sums

MANIFEST = ".minielectra-files.json"
GLUE_FAST = ["--max-train-examples", "8", "--set", "finetune.epochs=1",
             "--set", "finetune.num_threads=1"]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A finished tiny run (checkpoints at steps 4 and 8) and a fine-tuned model, made once."""
    root = tmp_path_factory.mktemp("owned")
    with pytest.MonkeyPatch.context() as m:
        m.setenv("MINIELECTRA_CACHE", str(root / "cache"))
        assert cli.main(["pretrain", *TINY, "--max-steps", "8", "--out", str(root / "run")]) == 0
        assert cli.main([*FT, "--out", str(root / "model")]) == 0
    return root


@pytest.fixture
def env(world, monkeypatch):
    monkeypatch.setenv("MINIELECTRA_CACHE", str(world / "cache"))
    return world


def copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("run.lock"))
    return dst


def at_step_4(env: Path, dst: Path) -> Path:
    """A copy of the run as it was at step 4: ``--resume`` trains steps 5 to 8 again."""
    run = copy(env / "run", dst)
    shutil.rmtree(run / "checkpoints" / "step_0000008")
    return run


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


# ------------------------------------------------------------------ a user's file in the way


@pytest.mark.parametrize("name", ["config.json", "tokenizer/vocab.txt", "metrics.jsonl",
                                  "run.lock", "checkpoints/notes.txt"])
def test_pretrain_never_writes_over_a_file_it_did_not_write(name, tmp_path, capsys, env):
    out = tmp_path / "mine"
    (out / name).parent.mkdir(parents=True, exist_ok=True)
    (out / name).write_text("the user's own")
    before = listing(out)
    one_error(*run_cli(capsys, "pretrain", *TINY, "--max-steps", "2", "--out", out)[::2],
              name, "did not write")
    assert (out / name).read_text() == "the user's own" and listing(out) == before


def test_a_folder_of_other_files_is_refused_but_ones_own_run_keeps_them(tmp_path, capsys, env):
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("mine")
    one_error(*run_cli(capsys, "pretrain", *TINY, "--max-steps", "2", "--out", project)[::2],
              "notes.txt")
    assert listing(project) == ["notes.txt"]
    # In a run's own folder a file of the user's is not in the way: kept, and the run resumes.
    run = at_step_4(env, tmp_path / "run")
    (run / "notes.txt").write_text("mine")
    code, _, err = run_cli(capsys, "pretrain", *TINY, "--max-steps", "8", "--out", run,
                           "--resume")
    assert code == 0, err
    assert (run / "notes.txt").read_text() == "mine"
    assert (run / "checkpoints" / "step_0000008").is_dir()


def test_a_link_standing_for_tokenizer_is_never_written_through(tmp_path, capsys, env):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "vocab.txt").write_text("my vocabulary\n")
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "tokenizer").symlink_to(outside, target_is_directory=True)
    one_error(*run_cli(capsys, "pretrain", *TINY, "--max-steps", "2", "--out", fresh)[::2],
              "tokenizer", "symbolic link")
    # The same link put into a run's own folder later: its resume is refused too.
    run = at_step_4(env, tmp_path / "run")
    shutil.rmtree(run / "tokenizer")
    (run / "tokenizer").symlink_to(outside, target_is_directory=True)
    one_error(*run_cli(capsys, "pretrain", *TINY, "--max-steps", "8", "--out", run,
                       "--resume")[::2], "tokenizer", "symbolic link")
    assert listing(outside) == ["vocab.txt"]
    assert (outside / "vocab.txt").read_text() == "my vocabulary\n"


@pytest.mark.parametrize("name", ["labels.json", "settings.json", "weights.bin", "vocab.txt",
                                  "seed-3/notes.txt"])
def test_finetune_and_convert_never_delete_a_users_file(name, tmp_path, capsys, env):
    for argv in ([*FT], ["convert", "--to-hf", "bundled"], ["convert", "--from-hf", "bundled"]):
        out = tmp_path / f"out-{argv[0]}"
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text("the user's own")
        one_error(*run_cli(capsys, *argv, "--out", out)[::2], name, "did not write")
        assert (out / name).read_text() == "the user's own", argv
        assert not list(tmp_path.glob(f".out-{argv[0]}.*"))  # no half-built folder beside


def test_a_finetuned_folder_is_replaced_and_another_commands_folder_refused(env, tmp_path,
                                                                            capsys):
    model = copy(env / "model", tmp_path / "model")
    assert run_cli(capsys, *FT, "--out", model)[0] == 0  # its own: replaced as asked
    assert json.loads((model / MANIFEST).read_text())["command"] == "finetune"
    before = sums(model)
    one_error(*run_cli(capsys, "pretrain", *TINY, "--max-steps", "2", "--out", model)[::2],
              "minielectra finetune's output")
    one_error(*run_cli(capsys, "convert", "--to-hf", "bundled", "--out", model)[::2],
              "minielectra finetune's output")
    assert sums(model) == before


# ------------------------------------------------------------------ an output is not an input


def _checkpoint(t: Path) -> Path:
    return copy(BUNDLED, t / "ckpt")


OVERLAP = {  # name -> (argv from tmp, the relation the line names)
    "finetune --checkpoint X --out X": (lambda t: [*FT[:1], "--checkpoint", _checkpoint(t),
                                                  *FT[3:], "--out", t / "ckpt"], "is"),
    "finetune --out inside --checkpoint": (lambda t: [*FT[:1], "--checkpoint", _checkpoint(t),
                                                      *FT[3:], "--out", t / "ckpt" / "ft"],
                                           "lies inside"),
    "finetune --out holding --train": (
        lambda t: [*FT[:3], "--train", _copy_file(FT[4], t / "data"), *FT[5:],
                   "--out", t / "data"], "contains"),
    "convert --to-hf X --out X": (lambda t: ["convert", "--to-hf", _checkpoint(t), "--out",
                                             t / "ckpt"], "is"),
    "convert --from-hf X --out X/sub": (lambda t: ["convert", "--from-hf", _checkpoint(t),
                                                   "--out", t / "ckpt" / "sub"], "lies inside"),
    "glue --checkpoint X --out X": (lambda t: ["glue", "--checkpoint", _checkpoint(t), "--out",
                                               t / "ckpt"], "is"),
    "pretrain --out holding --corpus": (lambda t: ["pretrain", *TINY[:2], "--corpus",
                                                   _copy_file(CORPUS, t / "run"), *TINY[4:],
                                                   "--out", t / "run"], "contains"),
    "prepare --out holding --corpus": (lambda t: ["prepare", "--corpus",
                                                  _copy_file(CORPUS, t / "prep"), "--tokenizer",
                                                  BUNDLED / "vocab.txt", "--out", t / "prep"],
                                       "contains"),
    "viz --out inside --run": (lambda t: ["viz", "--run", _checkpoint(t), "--out",
                                          t / "ckpt" / "page.html"], "lies inside"),
}


def _copy_file(src, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy(src, folder))


@pytest.mark.parametrize("name", OVERLAP)
def test_an_output_is_never_one_of_its_inputs(name, tmp_path, capsys, env):
    make, how = OVERLAP[name]
    argv = make(tmp_path)
    before = sums(tmp_path)
    one_error(*run_cli(capsys, *argv)[::2], f" {how} ", "which this command reads")
    assert sums(tmp_path) == before


# ------------------------------------------------------------------ glue and experiment outputs


@pytest.fixture
def glue_data(glue_slice_dir, monkeypatch):
    monkeypatch.setenv("MINIELECTRA_DATA_DIR", str(glue_slice_dir))
    return glue_slice_dir


def test_an_interrupted_glue_save_models_leaves_the_folder_it_had(glue_data, tmp_path, capsys,
                                                                 monkeypatch):
    from minielectra.finetune.glue import suite
    out = tmp_path / "glue"
    argv = ["glue", "--checkpoint", "bundled", "--tasks", "sst2", "rte", "--save-models",
            *GLUE_FAST, "--out", out]
    assert run_cli(capsys, *argv)[0] == 0
    before = sums(out)
    summary = json.loads((out / "glue.json").read_text())
    assert sorted(summary["tasks"]) == ["rte", "sst2"]  # the summary describes what is there
    assert all((out / t / "model.safetensors").is_file() for t in summary["tasks"])
    real, calls = suite.finetune_loaded, []

    def ctrl_c_in_the_second_task(*a, **k):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*a, **k)
    monkeypatch.setattr(suite, "finetune_loaded", ctrl_c_in_the_second_task)
    code, _, err = run_cli(capsys, *argv, "--seed", "1")  # another seed: other models
    assert code == 130 and f"nothing saved, {out} is as it was" in err
    assert sums(out) == before and not list(tmp_path.glob(".glue.*"))


def test_a_full_disk_while_glue_writes_its_summary_keeps_the_old_one(glue_data, tmp_path,
                                                                    capsys, monkeypatch):
    from minielectra.finetune.glue import suite
    out = tmp_path / "glue"
    argv = ["glue", "--checkpoint", "bundled", "--tasks", "sst2", *GLUE_FAST, "--out", out]
    assert run_cli(capsys, *argv)[0] == 0
    before = sums(out)
    real = suite.write_file if hasattr(suite, "write_file") else None

    def full(path, data):
        if Path(path).name == "glue.json":
            Path(path).write_bytes(b'{"tasks": {"ss')  # part of it, then the disk is full
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return real(path, data)
    monkeypatch.setattr(suite, "write_file", full, raising=False)
    one_error(*run_cli(capsys, *argv, "--seed", "1")[::2], "No space left on device",
              "glue.json")
    assert sums(out) == before  # result.json of sst2 is the old one, beside the old summary


def test_glue_and_experiment_reports_are_never_written_through_a_link(glue_data, tmp_path,
                                                                      capsys, monkeypatch):
    outside = tmp_path / "outside.md"
    outside.write_text("mine")
    out = tmp_path / "glue"
    out.mkdir()
    (out / "glue.md").symlink_to(outside)
    one_error(*run_cli(capsys, "glue", "--checkpoint", "bundled", "--tasks", "sst2",
                       *GLUE_FAST, "--out", out)[::2], "glue.md", "symbolic link")
    monkeypatch.delenv("MINIELECTRA_DATA_DIR")  # and an experiment without a data directory
    argv = ["experiment", "tying", "--budget", "4", "--out", tmp_path / "exp",
            *TINY[2:4], *TINY[4:]]
    code, out_json, err = run_cli(capsys, *argv)
    assert code == 0, err
    report = tmp_path / "exp" / "tying"
    assert "Not judged: linear probes" in (report / "results.md").read_text()
    assert "word-order probe" in (report / "results.md").read_text()
    (report / "results.md").unlink()
    (report / "results.md").symlink_to(outside)
    one_error(*run_cli(capsys, *argv)[::2], "results.md", "symbolic link")
    assert outside.read_text() == "mine"


# ------------------------------------------------------------------ folders from before records


def test_an_old_run_folder_resumes_once_adopted_and_never_with_a_users_file(env, tmp_path,
                                                                           capsys):
    old = at_step_4(env, tmp_path / "old")
    (old / MANIFEST).unlink()  # as a run written before records existed
    code, _, err = run_cli(capsys, "pretrain", *TINY, "--max-steps", "8", "--out", old,
                           "--resume")
    assert code == 0, err
    record = json.loads((old / MANIFEST).read_text())
    assert {"config.json", "metrics.jsonl", "tokenizer/", "checkpoints/"} <= set(record["files"])
    mixed = at_step_4(env, tmp_path / "mixed")
    (mixed / MANIFEST).unlink()
    (mixed / "thesis.tex").write_text("years of work")
    before = sums(mixed)
    one_error(*run_cli(capsys, "pretrain", *TINY, "--max-steps", "8", "--out", mixed,
                       "--resume")[::2], "did not write")
    assert sums(mixed) == before and not (mixed / MANIFEST).exists()
    # An old fine-tuned folder is adopted as well, and replaced as asked.
    model = copy(env / "model", tmp_path / "model")
    (model / MANIFEST).unlink()
    assert run_cli(capsys, *FT, "--out", model)[0] == 0
    assert json.loads((model / MANIFEST).read_text())["command"] == "finetune"


def test_an_old_prepare_folder_resumes(tmp_path, capsys):
    argv = ["prepare", "--corpus", CORPUS, "--tokenizer", BUNDLED / "vocab.txt",
            "--max-seq-len", "16", "--workers", "1", "--out", tmp_path / "prep"]
    assert run_cli(capsys, *argv)[0] == 0
    (tmp_path / "prep" / MANIFEST).unlink()
    shutil.rmtree(tmp_path / "prep" / "heldout")  # as if interrupted before the held-out part
    assert run_cli(capsys, *argv)[0] == 0
    assert (tmp_path / "prep" / "heldout" / "done.json").is_file()
    assert (tmp_path / "prep" / MANIFEST).is_file()


def test_a_second_prepare_or_glue_on_the_same_folder_is_refused(tmp_path, capsys, glue_data):
    from minielectra.safeio import FolderLock
    prep = tmp_path / "prep"
    argv = ["prepare", "--corpus", CORPUS, "--tokenizer", BUNDLED / "vocab.txt", "--workers",
            "1", "--out", prep]
    assert run_cli(capsys, *argv)[0] == 0
    for command, out in (("prepare", prep), ("glue", tmp_path / "glue")):
        out.mkdir(exist_ok=True)
        held = FolderLock(out).acquire()
        try:
            args = argv if command == "prepare" else [
                "glue", "--checkpoint", "bundled", "--tasks", "sst2", *GLUE_FAST, "--out", out]
            one_error(*run_cli(capsys, *args)[::2], f"in use by another {command}",
                      f"pid {os.getpid()}")
        finally:
            held.release()


def test_a_full_disk_in_a_folder_built_aside_names_the_file_at_its_place(tmp_path):
    from minielectra.outputs import output_folder
    from minielectra.ownership import Layout
    out = tmp_path / "out"
    with pytest.raises(OSError) as caught:
        with output_folder(out, Layout("convert"), replace=True) as tmp:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp / "sub" / "a.bin"))
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(out)
    assert f"while writing {out / 'sub' / 'a.bin'}; nothing saved" in caught.value.strerror
    assert not out.exists() and not list(tmp_path.iterdir())
    with pytest.raises(FileNotFoundError, match="train.csv: no such file"):  # not a write's
        with output_folder(out, Layout("convert"), replace=True):
            raise FileNotFoundError("train.csv: no such file")


def test_a_damaged_record_is_named_not_trusted(env, tmp_path, capsys):
    run = at_step_4(env, tmp_path / "run")
    (run / MANIFEST).write_text('{"command": "pretrain", "fil')  # cut short, or edited
    before = sums(run)
    one_error(*run_cli(capsys, "pretrain", *TINY, "--max-steps", "8", "--out", run,
                       "--resume")[::2], MANIFEST, "not a record")
    assert sums(run) == before
    (run / MANIFEST).unlink()  # as the line says: then checked as a folder from before records
    assert run_cli(capsys, "pretrain", *TINY, "--max-steps", "8", "--out", run, "--resume")[0] == 0


def test_ctrl_c_or_a_kill_while_converting_leaves_the_output_as_it_was(tmp_path, capsys,
                                                                      monkeypatch):
    from minielectra import outputs
    out = tmp_path / "hf"
    assert run_cli(capsys, "convert", "--to-hf", "bundled", "--out", out)[0] == 0
    before = sums(out)

    def ctrl_c(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr("minielectra.model.hf.export", ctrl_c)
    assert run_cli(capsys, "convert", "--to-hf", "bundled", "--out", out)[0] == 130
    assert sums(out) == before and not list(tmp_path.glob(".hf.*"))
    monkeypatch.undo()
    # kill -9 between the swap's two renames: the old folder aside, none in place; the next
    # command puts it back (then replaces it as asked).
    real_rename = os.rename

    def killed_after_the_first(src, dst):
        real_rename(src, dst)
        aside = Path(dst)  # the old folder renamed aside (not the export's own swap inside it)
        if aside.name == ASIDE and aside.parent.name.startswith(".hf.old-"):
            raise SystemExit("killed")
    monkeypatch.setattr(outputs.os, "rename", killed_after_the_first)
    with pytest.raises(SystemExit):
        cli.main(["convert", "--to-hf", "bundled", "--out", str(out)])
    monkeypatch.undo()
    assert not out.exists() and list(tmp_path.glob(".hf.old-*"))
    outputs._recover(out)
    assert sums(out) == before


def test_a_folder_inside_that_the_command_wrote_is_its_own_but_a_users_file_in_it_is_not(
        tmp_path):
    """``experiment toy-grammar`` writes ``experiments/toy-grammar`` by default and the other
    experiments write ``experiments/``: one after the other, the second finds the first's
    folder, whole and by its record, and goes on; a file of the user's in it is still refused."""
    from minielectra.ownership import Layout, check_claim, claim
    ours = Layout("experiment")
    claim(tmp_path / "experiments" / "toy-grammar", ours, ["results.json"])
    (tmp_path / "experiments" / "toy-grammar" / "results.json").write_text("{}")
    (tmp_path / "experiments" / "toy-grammar" / "run.lock").write_text("")  # a released lock
    check_claim(tmp_path / "experiments", ours, ["runs", "efficiency"])  # goes on
    (tmp_path / "experiments" / "toy-grammar" / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="toy-grammar/notes.txt"):
        check_claim(tmp_path / "experiments", ours, ["runs", "efficiency"])
    (tmp_path / "experiments" / "toy-grammar" / "notes.txt").unlink()
    with pytest.raises(FileExistsError, match="holds toy-grammar/"):  # another command's
        check_claim(tmp_path / "experiments", Layout("glue"), ["glue.json"])
