"""Nothing a user owns is lost: no write through a link, all-or-nothing output, one process per
folder, signals that clean up; and bad input is one line naming the culprit.

Each test builds the user's situation (their files beside the output, a link, a second process,
a full disk, SIGTERM) and checks the user's bytes after the command against their bytes before.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from minielectra import cli
from minielectra.finetune import saved

FIXTURES = Path(__file__).parent / "fixtures"
CORPUS = FIXTURES / "corpus.txt"
TRAIN, DEV = FIXTURES / "reviews_train.csv", FIXTURES / "reviews_dev.csv"
# A pre-training run of a few seconds (as tests/test_faults.py's).
TINY = ["--preset", "nano", "--corpus", str(CORPUS), "--set", "data.vocab_size=300",
        "--set", "train.batch_size=8", "--set", "data.held_out_fraction=0.2",
        "--set", "train.eval_examples=16", "--set", "model.num_layers=1",
        "--set", "train.log_every=2", "--set", "data.num_workers=1", "--set", "train.eval_every=0",
        "--set", "train.max_minutes=0", "--set", "train.save_every=4"]
FT = ["finetune", "--checkpoint", "bundled", "--train", str(TRAIN), "--dev", str(DEV),
      "--set", "finetune.epochs=1", "--set", "finetune.num_threads=1"]


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_error(code: int, err: str, *culprits: str) -> str:
    """Exit 2, exactly one ``error:`` line naming every culprit, no traceback."""
    errors = [line for line in err.splitlines() if " error: " in line]
    assert code == 2 and len(errors) == 1, err
    assert all(c in errors[0] for c in culprits), errors[0]
    assert "Traceback" not in err
    return errors[0]


def sums(root: Path) -> dict[str, str]:
    """Every file under ``root`` (the lock's holder line aside) -> its sha256."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and p.name != "run.lock"}


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.parent.glob(f".{folder.name}.*"))


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A `finetune --out` folder (the bundled checkpoint on the handmade reviews)."""
    out = tmp_path_factory.mktemp("first") / "model"
    assert cli.main([*FT, "--out", str(out)]) == 0
    return out


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MINIELECTRA_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


# ------------------------------------------------------------------------------ convert --out


def test_convert_never_deletes_other_files_in_out(tmp_path, capsys):
    out = tmp_path / "mine"
    (out / "thesis").mkdir(parents=True)
    (out / "thesis" / "chapter1.tex").write_text("years of work")
    for flag, src in (("--to-hf", "bundled"), ("--from-hf", "bundled")):
        one_error(*run_cli(capsys, "convert", flag, src, "--out", out)[::2], str(out), "thesis")
        assert (out / "thesis" / "chapter1.tex").read_text() == "years of work"
    # A folder of converted models is replaced, as the user asked by naming it again.
    assert run_cli(capsys, "convert", "--to-hf", "bundled", "--out", tmp_path / "hf")[0] == 0
    assert run_cli(capsys, "convert", "--to-hf", "bundled", "--out", tmp_path / "hf")[0] == 0


# ------------------------------------------------------------------------------ links


def test_lessons_never_write_through_a_link(tmp_path, capsys):
    course, outside = tmp_path / "course", tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("mine")
    (course / "notebooks").mkdir(parents=True)
    dangling = course / "notebooks" / "01_text_to_examples.ipynb"
    dangling.symlink_to(outside / "created-through-the-link")
    (course / "notebooks" / "README.md").symlink_to(outside / "precious.txt")
    for force in ([], ["--force"]):  # a link is never the tool's: --force replaces only its own
        one_error(*run_cli(capsys, "lessons", course, *force)[::2], "01_text_to_examples.ipynb",
                  "symbolic link")
    assert (outside / "precious.txt").read_text() == "mine"
    assert sorted(p.name for p in outside.iterdir()) == ["precious.txt"]
    assert dangling.is_symlink() and not (course / ".minielectra-files.json").exists()
    # A folder of the course that is a link elsewhere is refused, even with --force.
    other = tmp_path / "other"
    other.mkdir()
    (other / "tutorial").symlink_to(outside, target_is_directory=True)
    one_error(*run_cli(capsys, "lessons", other, "--force")[::2], "tutorial", "symbolic link")
    assert sorted(p.name for p in outside.iterdir()) == ["precious.txt"]


def test_lessons_force_replaces_only_what_lessons_wrote(tmp_path, capsys):
    course = tmp_path / "course"
    assert run_cli(capsys, "lessons", course)[0] == 0
    notebook = course / "notebooks" / "01_text_to_examples.ipynb"
    shipped = notebook.read_bytes()
    notebook.write_text("my edits")
    (course / "notebooks" / "mine.ipynb").write_text("my own notebook")  # not a lesson's name
    one_error(*run_cli(capsys, "lessons", course)[::2], "already exist", "--force")
    assert notebook.read_text() == "my edits"
    assert run_cli(capsys, "lessons", course, "--force")[0] == 0  # its own file, as asked
    assert notebook.read_bytes() == shipped
    assert (course / "notebooks" / "mine.ipynb").read_text() == "my own notebook"
    # A learner's folder without the record: the same names are theirs, even with --force.
    theirs = tmp_path / "theirs"
    (theirs / "notebooks").mkdir(parents=True)
    (theirs / "notebooks" / "01_text_to_examples.ipynb").write_text("my notebook")
    one_error(*run_cli(capsys, "lessons", theirs, "--force")[::2],
              "notebooks/01_text_to_examples.ipynb", "did not write")
    assert (theirs / "notebooks" / "01_text_to_examples.ipynb").read_text() == "my notebook"


def test_a_run_never_writes_through_its_lock_or_log_links(tmp_path, capsys, cache):
    run, outside = tmp_path / "run", tmp_path / "outside"
    run.mkdir()
    outside.mkdir()
    for name in ("run.lock", "metrics.jsonl", "config.json"):
        (outside / name).write_text(f"my {name}")
        (run / name).symlink_to(outside / name)
    one_error(*run_cli(capsys, "pretrain", *TINY, "--max-steps", "2", "--out", run)[::2],
              "config.json", "symbolic link")
    for name in ("run.lock", "metrics.jsonl", "config.json"):
        assert (outside / name).read_text() == f"my {name}", name
        assert (run / name).is_symlink()
    assert sorted(p.name for p in run.iterdir()) == ["config.json", "metrics.jsonl", "run.lock"]


def test_write_file_replaces_a_link_and_keeps_siblings_permissions(tmp_path):
    from minielectra import safeio
    (tmp_path / "target").write_text("keep")
    (tmp_path / "link").symlink_to(tmp_path / "target")
    safeio.write_file(tmp_path / "link", "new")
    assert (tmp_path / "target").read_text() == "keep"
    assert (tmp_path / "link").read_text() == "new" and not (tmp_path / "link").is_symlink()
    (tmp_path / "sibling").write_text("x")
    assert (tmp_path / "link").stat().st_mode == (tmp_path / "sibling").stat().st_mode


# ------------------------------------------------------------------------------ finetune --out


def test_finetune_out_is_locked_naming_the_holder(model, tmp_path, capsys, monkeypatch):
    from minielectra import safeio
    held = safeio.FolderLock(model, what="fine-tuning").acquire()
    before = sums(model)
    try:
        called = []
        monkeypatch.setattr("minielectra.finetune.train.train_classifier",
                            lambda *a, **k: called.append(1))
        line = one_error(*run_cli(capsys, *FT, "--out", model)[::2],
                         f"in use by another fine-tuning (pid {os.getpid()} on ")
        assert str(model) in line and not called  # refused before training
    finally:
        held.release()
    assert sums(model) == before


def test_finetune_interrupted_while_saving_keeps_the_first_model(model, tmp_path, capsys,
                                                                 monkeypatch):
    out = tmp_path / "model"
    shutil.copytree(model, out)
    before = sums(out)

    def ctrl_c_halfway(m, tokenizer, task, cfg, path, **kw):
        (Path(path) / saved.WEIGHTS).write_bytes(b"half a model")
        raise KeyboardInterrupt
    monkeypatch.setattr("minielectra.finetune.train.save_finetuned", ctrl_c_halfway)
    code, _, err = run_cli(capsys, *FT, "--out", out)
    assert code == 130 and "Traceback" not in err
    assert err.strip().splitlines()[-1] == (f"minielectra finetune: interrupted; nothing saved, "
                                            f"{out} is as it was")
    assert sums(out) == before and leftovers(out) == []


def test_finetune_full_disk_leaves_no_half_written_folder(tmp_path, capsys, monkeypatch):
    def full(path, data):
        Path(path).write_bytes(b"\0" * 64)  # part of it, then the disk is full
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
    monkeypatch.setattr(saved, "write_file", full, raising=False)
    out = tmp_path / "new"
    one_error(*run_cli(capsys, *FT, "--out", out)[::2], str(out), "No space left on device")
    assert not out.exists() and leftovers(out) == []


@pytest.fixture
def tiny_disk(tmp_path):
    """A real full disk: a 1 MB tmpfs (mounting one needs root; skipped otherwise)."""
    where = tmp_path / "disk"
    where.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs",
                                            str(where)], capture_output=True).returncode:
        pytest.skip("mounting a small tmpfs needs root")
    yield where
    subprocess.run(["umount", str(where)], check=True)


def test_a_real_full_disk_is_one_line_naming_the_path(tiny_disk, capsys, cache):
    out = tiny_disk / "model"
    one_error(*run_cli(capsys, *FT, "--out", out)[::2], str(out), "No space left on device")
    assert list(tiny_disk.iterdir()) == []  # nothing half-written
    run = tiny_disk / "run"
    one_error(*run_cli(capsys, "pretrain", *TINY, "--set", "model.hidden_size=256",
                       "--max-steps", "1", "--out", run)[::2], str(run), "No space left")
    assert not list((run / "checkpoints").glob("step_*"))


def test_finetune_out_is_checked_before_training(tmp_path, capsys, monkeypatch):
    called = []
    monkeypatch.setattr("minielectra.finetune.train.train_classifier",
                        lambda *a, **k: called.append(1))
    (tmp_path / "file").write_text("x")
    one_error(*run_cli(capsys, *FT, "--out", tmp_path / "file")[::2], "is a file")
    one_error(*run_cli(capsys, *FT, "--out", tmp_path / "file" / "sub")[::2], "file")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    one_error(*run_cli(capsys, *FT, "--out", mine)[::2], "notes.txt")
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o555)
        one_error(*run_cli(capsys, *FT, "--out", locked / "out")[::2], "cannot be written")
    assert not called and (mine / "notes.txt").read_text() == "keep"


def _finetune_process(out: Path, log) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "minielectra", *FT, "--set",
                             "finetune.epochs=100000", "--out", str(out)],
                            stdout=subprocess.DEVNULL, stderr=log, text=True)


def _wait(predicate, proc, log, seconds=120.0):
    deadline = time.monotonic() + seconds
    while not predicate():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            log.seek(0)
            pytest.fail(f"the process ended or never got there: {log.read()[-2000:]}")
        time.sleep(0.2)


def test_a_second_finetune_is_refused_and_sigterm_keeps_the_first_model(model, tmp_path,
                                                                         capsys):
    """Real processes: the second one into the same --out is refused; SIGTERM stops the first
    with 143 and one line, leaving the model that was there."""
    out = tmp_path / "model"
    shutil.copytree(model, out)
    before = sums(out)
    log = open(tmp_path / "stderr.txt", "w+")
    proc = _finetune_process(out, log)
    try:
        # training: the first holds the lock (its progress lines may come only at the end)
        _wait(lambda: f"pid {proc.pid} on " in (out / "run.lock").read_text(), proc, log)
        line = one_error(*run_cli(capsys, *FT, "--out", out)[::2],
                         f"in use by another fine-tuning (pid {proc.pid} on ")
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        proc.kill()
    log.seek(0)
    err = log.read()
    assert proc.returncode == 143 and "Traceback" not in err, err[-2000:]
    assert err.strip().splitlines()[-1] == (f"minielectra finetune: terminated (SIGTERM); "
                                            f"nothing saved, {out} is as it was")
    assert sums(out) == before and leftovers(out) == [] and line


# ------------------------------------------------------------------------------ pre-training


def test_sigterm_saves_a_pretraining_run_like_ctrl_c(tmp_path, cache):
    out = tmp_path / "run"
    log = open(tmp_path / "stderr.txt", "w+")
    proc = subprocess.Popen([sys.executable, "-m", "minielectra", "pretrain", *TINY,
                             "--max-steps", "100000", "--out", str(out)],
                            stdout=subprocess.DEVNULL, stderr=log, text=True)
    metrics = out / "metrics.jsonl"
    try:
        _wait(lambda: metrics.is_file() and metrics.read_text().count("\n") >= 2, proc, log,
              seconds=300)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    finally:
        proc.kill()
    log.seek(0)
    err = log.read()
    assert proc.returncode == 143 and "Traceback" not in err, err[-2000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith("minielectra pretrain: interrupted at step ") and \
        last.endswith(f"--out {out} --resume"), last
    step = int(last.split("interrupted at step ")[1].split(";")[0])
    from minielectra import Electra
    Electra.from_pretrained(out / "checkpoints" / f"step_{step:07d}")  # whole, and loads


def test_a_stale_lock_of_a_dead_process_is_recognised(tmp_path, caplog):
    from minielectra import safeio
    caplog.set_level(logging.INFO)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / "run.lock").write_text(f"pid {dead.pid} on {os.uname().nodename}, started x\n")
    lock = safeio.FolderLock(tmp_path).acquire()
    lock.release()
    assert f"left by pid {dead.pid}, which no longer runs" in caplog.text
    # A live holder in another process is named; a child it forked does not hold the lock (a
    # data worker left behind by a killed run never blocks the next one).
    holder = subprocess.Popen([sys.executable, "-c", (
        "import os, time; from minielectra import safeio; "
        f"lock = safeio.FolderLock({str(tmp_path)!r}).acquire(); child = os.fork(); "
        "child or time.sleep(60); print(child, flush=True); time.sleep(60)")],
        stdout=subprocess.PIPE, text=True)
    child = int(holder.stdout.readline())
    try:
        with pytest.raises(safeio.FolderBusy, match=f"pid {holder.pid} on "):
            safeio.FolderLock(tmp_path).acquire()
        holder.kill()
        holder.wait()
        safeio.FolderLock(tmp_path).acquire().release()  # the child still runs
        assert Path(f"/proc/{child}").exists()
    finally:
        holder.kill()
        os.kill(child, signal.SIGKILL)


def test_a_refused_pretraining_leaves_no_run_lock(tmp_path, capsys, cache):
    empty = tmp_path / "empty"
    empty.mkdir()
    for out in (tmp_path / "new", empty):
        one_error(*run_cli(capsys, "pretrain", *TINY[:2], "--corpus", tmp_path / "nope.txt",
                           "--out", out)[::2], "nope.txt")
    assert not (tmp_path / "new").exists() and list(empty.iterdir()) == []


def test_a_killed_cache_build_leaves_no_tmp_folder(tmp_path, capsys, cache):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    for kind in ("examples", "tokenizers"):
        (cache / kind / f"corpus-train-128-abc.tmp{dead.pid}").mkdir(parents=True)
        (cache / kind / f"corpus-train-128-abc.tmp{dead.pid}" / "part.npy").write_bytes(b"x")
    assert run_cli(capsys, "pretrain", *TINY, "--max-steps", "1", "--out", tmp_path / "r")[0] == 0
    assert not list(cache.rglob("*.tmp*"))


def test_weights_have_the_permissions_of_their_siblings(model, tmp_path, capsys, cache):
    assert run_cli(capsys, "pretrain", *TINY, "--max-steps", "1", "--out", tmp_path / "r")[0] == 0
    ckpt = tmp_path / "r" / "checkpoints" / "step_0000001"
    for folder in (ckpt, model):
        modes = {p.name: oct(p.stat().st_mode & 0o777) for p in folder.iterdir() if p.is_file()}
        assert len(set(modes.values())) == 1, modes


# ------------------------------------------------------------------------------ viz --out


def test_viz_out_refuses_an_existing_file_without_force(tmp_path, capsys):
    page = tmp_path / "page.html"
    page.write_text("my page")
    argv = ["viz", "--text", "the cat sat on the mat", "--out", page]
    one_error(*run_cli(capsys, *argv)[::2], str(page), "--force")
    assert page.read_text() == "my page"
    assert run_cli(capsys, *argv, "--force")[0] == 0 and "<html" in page.read_text().lower()
    (tmp_path / "target.html").write_text("keep")
    (tmp_path / "link.html").symlink_to(tmp_path / "target.html")
    assert run_cli(capsys, "viz", "--text", "the cat", "--out", tmp_path / "link.html",
                   "--force")[0] == 0
    assert (tmp_path / "target.html").read_text() == "keep"


# ------------------------------------------------------------------------------ one clear line


def _config(tmp: Path, edit) -> Path:
    from minielectra.model.storage import BUNDLED
    shutil.copytree(BUNDLED, tmp / "ckpt")
    path = tmp / "ckpt" / "config.json"
    data = edit(json.loads(path.read_text()))
    path.write_bytes(data if isinstance(data, bytes) else json.dumps(data).encode())
    return tmp / "ckpt"


def _set(d, key, value):
    d["model"][key] = value
    return d


BAD = {  # name -> (argv from tmp, the culprit(s) the line names)
    "batch_size inf": (lambda t: ["pretrain", *TINY, "--set", "train.batch_size=inf"],
                       ["train.batch_size", "inf"]),
    "batch_size 1e400": (lambda t: ["pretrain", *TINY, "--set", "train.batch_size=1e400"],
                         ["train.batch_size"]),
    "layer_norm_eps -1": (lambda t: ["pretrain", *TINY, "--set", "model.layer_norm_eps=-1",
                                     "--out", t / "never"], ["model.layer_norm_eps"]),
    "config.json a list": (lambda t: ["evaluate", "--checkpoint", _config(t, lambda d: [d])],
                           ["config.json", "list"]),
    "config.json hidden_size abc": (
        lambda t: ["evaluate", "--checkpoint", _config(t, lambda d: _set(d, "hidden_size", "abc"))],
        ["config.json", "model.hidden_size", "'abc'"]),
    "config.json layer_norm_eps -1": (
        lambda t: ["evaluate", "--checkpoint",
                   _config(t, lambda d: _set(d, "layer_norm_eps", -1))],
        ["config.json", "model.layer_norm_eps"]),
    "config.json garbage": (lambda t: ["evaluate", "--checkpoint", _config(t, lambda d: b"{{")],
                            ["config.json", "not valid JSON"]),
    "config.json not UTF-8": (lambda t: ["evaluate", "--checkpoint",
                                         _config(t, lambda d: b"\xff\xfe{}")],
                              ["config.json", "UTF-8"]),
    "finetune config not UTF-8": (
        lambda t: [*FT, "--checkpoint", _config(t, lambda d: b"\xff\x00")], ["config.json"]),
    "lessons FILE": (lambda t: ["lessons", _file(t)], ["f.txt", "is a file, not a folder"]),
    "prepare --out FILE": (lambda t: ["prepare", "--corpus", CORPUS, "--out", _file(t)],
                           ["f.txt", "is a file, not a folder"]),
    "viz --top-k -1": (lambda t: ["viz", "--text", "the cat", "--top-k", "-1", "--json"],
                       ["--top-k", "-1"]),
    "label nan": (lambda t: _labels(t, ["0", "1", "nan"] * 4), ["line 4", "'nan'"]),
    "label 0.5": (lambda t: _labels(t, ["0", "1"] * 6 + ["0.5"]), ["line 14", "'0.5'",
                                                                  "--regression"]),
    "label 1.5": (lambda t: _labels(t, ["1.5"] + ["0", "1"] * 6), ["line 2", "'1.5'"]),
    "JSONL text null": (lambda t: _jsonl(t, '{"text": null, "label": 1}'),
                        ["t.jsonl: line 3", "'text'", "null"]),
}


def _file(t: Path) -> Path:
    (t / "f.txt").write_text("my file")
    return t / "f.txt"


def _labels(t: Path, labels: list[str]) -> list:
    rows = "".join(f"text number {i},{label}\n" for i, label in enumerate(labels))
    (t / "t.csv").write_text("text,label\n" + rows)
    return [*FT[:3], "--train", t / "t.csv", "--dev", t / "t.csv", *FT[7:]]


def _jsonl(t: Path, bad: str) -> list:
    good = ['{"text": "a fine day", "label": 1}', '{"text": "a dull day", "label": 0}']
    (t / "t.jsonl").write_text("\n".join([*good, bad, *good]) + "\n")
    return [*FT[:3], "--train", t / "t.jsonl", "--dev", t / "t.jsonl", *FT[7:]]


@pytest.mark.parametrize("name", BAD)
def test_bad_input_is_one_line_naming_the_culprit(name, tmp_path, capsys, cache):
    argv, culprits = BAD[name]
    one_error(*run_cli(capsys, *argv(tmp_path))[::2], *culprits)
    assert not (tmp_path / "never").exists()


def test_labels_in_regression_may_have_fractions(tmp_path):
    from minielectra.finetune.owndata.data import task_from_files
    _labels(tmp_path, ["0", "1"] * 6 + ["0.5"])
    task = task_from_files(tmp_path / "t.csv", tmp_path / "t.csv", regression=True)
    assert task.is_regression and sorted({e.label for e in task.train_examples}) == [0, 0.5, 1]


def test_a_csv_field_longer_than_the_csv_module_default_is_read(tmp_path):
    from minielectra.finetune.owndata.data import read_rows
    long = "word " * 40_000  # 200,000 characters, over csv's 131,072
    (tmp_path / "t.csv").write_text(f'text,label\n"{long}",1\nshort,0\n')
    rows = read_rows(tmp_path / "t.csv")
    assert rows[0][1]["text"] == long and rows[1][1]["text"] == "short"


# ------------------------------------------------------------------------------ the mlm export


def test_the_mlm_objectives_export_keeps_its_mlm_head(tmp_path):
    transformers = pytest.importorskip("transformers")
    import torch
    from minielectra.config import ModelConfig, ObjectiveConfig
    from minielectra.model import hf
    from minielectra.objectives.compute import build_model
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=60, embedding_size=16, hidden_size=32, num_layers=2,
                      num_heads=2, intermediate_size=64, max_position_embeddings=20,
                      generator_size=0.5, cls_token_id=2, sep_token_id=3, mask_token_id=4)
    model = build_model(cfg, ObjectiveConfig(name="mlm")).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn(p.shape))
    hf.export(model, tmp_path / "hf")
    mlm = transformers.ElectraForMaskedLM.from_pretrained(tmp_path / "hf" / "masked_lm").eval()
    ids = torch.randint(5, 60, (2, 9))
    with torch.no_grad():
        torch.testing.assert_close(mlm(input_ids=ids).logits, model.disc_mlm(ids),
                                   rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------------ reproducibility


def test_the_same_corpus_gives_the_same_vocabulary_in_every_fresh_cache(tmp_path):
    """Equally frequent merges compete in this text; the trainer's hash-map order used to decide
    between them, differently in each training (in one process, too)."""
    from minielectra.config import DataConfig
    from minielectra.data.tokenizer import WordPieceTokenizer, resolve_tokenizer
    texts = [CORPUS.read_text()] * 3 + ["".join(f"word{i} zq{i % 7}x{i % 11} "
                                                for i in range(3000))]
    assert len({tuple(WordPieceTokenizer.train(texts, 400).tokens) for _ in range(8)}) == 1
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(texts))
    vocabs = []
    for i in range(3):
        resolve_tokenizer(DataConfig(corpus=str(corpus), vocab_size=400, held_out_fraction=0.0,
                                     cache_dir=str(tmp_path / f"cache{i}")))
        (found,) = (tmp_path / f"cache{i}").rglob("vocab.txt")
        vocabs.append(found.read_text())
    assert vocabs[0] == vocabs[1] == vocabs[2] and len(vocabs[0].split()) == 400


def test_the_same_seed_with_fresh_caches_gives_the_same_weights(tmp_path, capsys, monkeypatch):
    from safetensors.torch import load_file
    weights = []
    for i in range(2):
        monkeypatch.setenv("MINIELECTRA_CACHE", str(tmp_path / f"cache{i}"))  # a fresh vocab
        out = tmp_path / f"run{i}"
        assert run_cli(capsys, "pretrain", *TINY, "--max-steps", "2", "--out", out)[0] == 0
        weights.append(load_file(out / "checkpoints" / "step_0000002" / "model.safetensors"))
    assert weights[0].keys() == weights[1].keys()
    assert all(weights[0][k].equal(weights[1][k]) for k in weights[0])


# ------------------------------------------------------------------------------ squad as documented


@pytest.mark.parametrize("task, version", [("squad", "1.1"), ("squad_v2", "v2.0")])
def test_finetune_squad_works_from_the_command_line_as_documented(task, version, tmp_path,
                                                                  capsys, cache):
    from test_squad import FACTS, fixture_file
    train = fixture_file(tmp_path / f"train-v{version.lstrip('v')}.json", version)
    dev = fixture_file(tmp_path / f"dev-v{version.lstrip('v')}.json", version)
    out = tmp_path / "runs" / "squad"
    code, stdout, err = run_cli(capsys, "finetune", "--task", task, "--train", train, "--dev",
                                dev, "--out", out, "--set", "finetune.epochs=1",
                                "--set", "finetune.max_seq_len=48")
    assert code == 0, err
    result = json.loads(stdout)
    f1 = result["metrics"]["f1"]
    assert f"finetune {task}: dev F1 {f1:.1f}" in err and f"model: {out}" in err
    assert json.loads((out / "result.json").read_text())["metrics"] == result["metrics"]
    argv = ["squad-eval", dev, out / "predictions.json"]
    if task == "squad_v2":
        argv += ["--na-prob-file", out / "na_probs.json"]
    code, stdout, err = run_cli(capsys, *argv)
    assert code == 0, err
    assert json.loads(stdout)["f1"] == pytest.approx(f1)  # the official script's own reading
    context, question, _ = FACTS[0]
    code, stdout, err = run_cli(capsys, "predict", "--model", out, question, context)
    assert code == 0 and "answer" in json.loads(stdout), err


# ------------------------------------------------------------------------------ full disks


def _fill(disk: Path) -> None:
    """Fill ``disk`` (a tmpfs) to the last byte."""
    fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        for size in (1 << 16, 1 << 10, 1):  # unbuffered: each write takes what still fits
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * size)
    finally:
        os.close(fd)


def test_a_full_disk_at_the_start_of_pretraining_is_said_as_such(tiny_disk, capsys, cache):
    """The clean-up of a refused start (the run.lock it made, the folder) never hides the
    error that refused it."""
    _fill(tiny_disk)
    run = tiny_disk / "run"
    line = one_error(*run_cli(capsys, "pretrain", *TINY, "--max-steps", "1", "--out",
                              run)[::2], "No space left on device")
    assert "not empty" not in line
    assert sorted(p.name for p in tiny_disk.iterdir()) == ["filler"]


def test_a_full_disk_in_a_checkpoint_write_names_the_file(tmp_path, capsys, cache):
    """A 2 MB disk holds the run and the weights (1.1 MB), not the optimiser state (2.2 MB)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs",
                                            str(disk)], capture_output=True).returncode:
        pytest.skip("mounting a small tmpfs needs root")
    try:
        run = disk / "run"
        one_error(*run_cli(capsys, "pretrain", *TINY, "--max-steps", "2", "--out", run)[::2],
                  f"{run / 'checkpoints' / 'step_0000002' / 'trainer_state.pt'}: No space left")
        assert not list((run / "checkpoints").iterdir())  # no half checkpoint, no leftovers
    finally:
        subprocess.run(["umount", str(disk)], check=True)


# ------------------------------------------------------------------------------ checkpoints


def test_a_sum_naming_a_file_outside_is_refused_and_the_file_never_read(tmp_path, monkeypatch):
    from minielectra.data import files
    from minielectra.model.storage import BUNDLED, DamagedCheckpointError, verify_checksums
    ckpt = Path(shutil.copytree(BUNDLED, tmp_path / "ckpt"))
    secret = tmp_path / "secret.bin"
    secret.write_bytes(b"the user's")
    (ckpt / "linked.bin").symlink_to(secret)
    read, real = [], files.file_sha256
    monkeypatch.setattr(files, "file_sha256", lambda p: read.append(Path(p)) or real(p))
    for name in ("../secret.bin", str(secret), "linked.bin", "sub/../../secret.bin"):
        data = json.loads((BUNDLED / "checksums.json").read_text())
        data["sha256"][name] = real(secret)  # the true sum: hashed, it would match
        (ckpt / "checksums.json").write_text(json.dumps(data))
        with pytest.raises(DamagedCheckpointError, match="names a file outside"):
            verify_checksums(ckpt)
        with pytest.raises(DamagedCheckpointError, match="names a file outside"):
            verify_checksums(ckpt, ["model.safetensors"])  # whichever files are asked for
    assert all(p.resolve() != secret.resolve() for p in read), read


def test_identical_runs_write_identical_bytes(tmp_path):
    """safetensors wrote its metadata in a hash map's order, seeded afresh in each process."""
    runs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed,
               "MINIELECTRA_CACHE": str(tmp_path / f"cache{seed}")}
        out = tmp_path / f"run{seed}"
        subprocess.run([sys.executable, "-m", "minielectra", "pretrain", *TINY, "--max-steps",
                        "2", "--out", str(out)], env=env, check=True, capture_output=True)
        runs.append(out / "checkpoints" / "step_0000002")
    for name in ("model.safetensors", "checksums.json"):
        assert (runs[0] / name).read_bytes() == (runs[1] / name).read_bytes(), name
    from safetensors import safe_open  # and the file is still one safetensors reads
    with safe_open(runs[0] / "model.safetensors", "pt") as f:
        assert f.metadata()["format"] == "pt" and len(list(f.keys())) > 10


def test_a_reader_never_sees_a_checkpoint_that_pruning_is_deleting(tmp_path, monkeypatch):
    """Pruning deletes a checkpoint file by file; renamed first, a reader never lists it."""
    from minielectra.config import TrainConfig
    from minielectra.training import checkpoints
    run = tmp_path / "run"
    for step in (1, 2, 3):
        ckpt = run / "checkpoints" / f"step_{step:07d}"
        ckpt.mkdir(parents=True)
        for name in ("model.safetensors", "config.json", checkpoints.STATE_FILE):
            (ckpt / name).write_text("x")
    real = shutil.rmtree

    def rmtree_then_look(path, *a, **k):
        (Path(path) / "model.safetensors").unlink()  # the first file is gone...
        listed = [p for _, p in checkpoints.list_checkpoints(run)]  # ...and a reader looks
        assert all((p / "model.safetensors").is_file() for p in listed), listed
        real(path, *a, **k)
    monkeypatch.setattr(checkpoints.shutil, "rmtree", rmtree_then_look)
    t = TrainConfig(max_steps=3, save_every=1, keep_last=1, milestones=())
    deleted = checkpoints.prune_checkpoints(run, t)
    assert [p.name for p in deleted] == ["step_0000001", "step_0000002"]
    assert [p.name for p in (run / "checkpoints").iterdir()] == ["step_0000003"]


def test_evaluate_reads_the_newest_checkpoint_when_the_one_it_picked_is_pruned(tmp_path,
                                                                              capsys, cache,
                                                                              monkeypatch):
    """What a run that saves step 4 and prunes step 2 does to an `evaluate --checkpoint RUN`
    that picked step 2 a moment before."""
    from minielectra.model import checkpoint as model_checkpoint
    run = tmp_path / "run"
    assert run_cli(capsys, "pretrain", *TINY, "--max-steps", "2", "--out", run)[0] == 0
    old, new = (run / "checkpoints" / f"step_{s:07d}" for s in (2, 4))
    real = model_checkpoint.load_pretrained

    def pruned_while_read(path, *a, **k):
        if Path(path) == old and not new.exists():
            shutil.copytree(old, new)  # the run saves step 4...
            shutil.rmtree(old)  # ...and prunes step 2
            raise FileNotFoundError(f"{old} has no model.safetensors")
        return real(path, *a, **k)
    monkeypatch.setattr(model_checkpoint, "load_pretrained", pruned_while_read)
    code, stdout, err = run_cli(capsys, "evaluate", "--checkpoint", run, "--max-examples", 8)
    assert code == 0, err
    assert json.loads(stdout)["checkpoint"] == str(new)
