"""A new user's first hour: --version, --from-scratch, the finetune summary and its epochs,
long texts (the share cut, sliding windows), predict --file tables, and hub model ids.

References are computed here without the code under test: the version in pyproject.toml, the
tokenizer's own ``encode_pair``, hand-built windows and means of the model's forward pass,
scikit-learn's accuracy on the saved model's predictions, transformers' logits.
"""

import json
import logging
import re
import shlex
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from sklearn import metrics as skm

import minielectra
from minielectra.cli import build_parser, main
from minielectra.data import hub as data_hub
from minielectra.finetune import predict as pr
from minielectra.finetune import saved, windows
from minielectra.finetune.task import Example

FIXTURES = Path(__file__).parent / "fixtures"
ROOT = Path(__file__).parents[1]
FAST = ["--set", "finetune.epochs=3", "--set", "finetune.num_threads=1",
        "--set", "finetune.batch_size=4"]


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 and out.strip() else None), err


# ------------------------------------------------------------------------ --version, --help


def test_version_is_the_packages(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    declared = re.search(r'^version = "(.+)"', (ROOT / "pyproject.toml").read_text(), re.M)[1]
    assert capsys.readouterr().out.strip() == f"minielectra {declared}" == \
        f"minielectra {minielectra.__version__}"


def test_the_top_level_help_shows_examples_that_parse():
    parser = build_parser()
    examples = [line.strip() for line in parser.format_help().splitlines()
                if line.strip().startswith("minielectra ")]
    assert len(examples) >= 3
    for example in examples:
        parser.parse_args(shlex.split(example)[1:])  # argparse exits on a bad one


def test_from_scratch_is_a_finetune_flag():
    (sub,) = build_parser()._subparsers._group_actions
    assert "--from-scratch" in sub.choices["finetune"].format_help()


def test_from_scratch_starts_from_random_weights(capsys, char_run_dir, tmp_path):
    """With a learning rate too small to move the weights, the saved encoder is the checkpoint's
    discriminator encoder, and with --from-scratch it is not (a fresh one of the same shape)."""
    args = ["finetune", "--checkpoint", char_run_dir, "--train", FIXTURES / "reviews_train.csv",
            "--dev", FIXTURES / "reviews_dev.csv", *FAST, "--set", "finetune.learning_rate=1e-12"]
    ckpt = load_file(sorted((char_run_dir / "checkpoints").glob("step_*"))[-1]
                     / "model.safetensors")
    emb = "discriminator.encoder.layers.0.ffn_in.weight"
    for flags, same in (([], True), (["--from-scratch"], False)):
        code, r, _ = run_cli(capsys, *args, *flags, "--out", tmp_path / str(same))
        assert code == 0 and r["config"]["from_scratch"] is not same
        got = load_file(tmp_path / str(same) / "model.safetensors")
        tuned = got[emb.replace("discriminator.", "", 1)]
        assert torch.allclose(tuned, ckpt[emb], atol=1e-6) is same


# ------------------------------------------------------------------------ finetune's ending


def test_finetune_summary_epochs_and_the_kept_model(capsys, char_run_dir, tmp_path):
    out = tmp_path / "reviews"
    code, r, err = run_cli(capsys, "finetune", "--checkpoint", char_run_dir, "--train",
                           FIXTURES / "reviews_train.csv", "--dev",
                           FIXTURES / "reviews_dev.csv", "--out", out, *FAST)
    assert code == 0  # the default keeps the last epoch: the dev score is never chosen on
    assert len(r["epoch_scores"]) == 3 and r["score"] == r["epoch_scores"][-1]
    assert r["kept_epoch"] == 3 and r["config"]["keep_epoch"] == "last"
    # The saved model is the kept epoch's: its dev predictions score what the JSON says.
    dev = [line.split(",")[-1] for line in (FIXTURES / "reviews_dev.csv").read_text()
           .splitlines()[1:] if line.strip()]
    p = pr.run_predict(out, file=FIXTURES / "reviews_dev.csv")["predictions"]
    assert 100 * skm.accuracy_score(dev, [x["label"] for x in p]) == pytest.approx(r["score"])
    # stderr: the score rounded, the model, and a next command that runs.
    assert f"dev accuracy {r['score']:.1f}" in err and f"model: {out}" in err
    nxt = next(line for line in err.splitlines() if line.startswith("next: "))
    code, q, _ = run_cli(capsys, *shlex.split(nxt.removeprefix("next: "))[1:])
    assert code == 0 and len(q["predictions"]) == len(dev)


def test_keep_epoch_last_is_the_paper_protocol(capsys, char_run_dir):
    code, r, err = run_cli(capsys, "finetune", "--checkpoint", char_run_dir, "--train",
                           FIXTURES / "reviews_train.csv", "--dev",
                           FIXTURES / "reviews_dev.csv", "--keep-epoch", "last", *FAST)
    assert code == 0 and r["score"] == r["epoch_scores"][-1] and r["kept_epoch"] == 3
    assert "not saved" in err and "--out" in err and "the paper's protocol" in err


def test_keep_epoch_best_chooses_on_held_out_training_examples(capsys, char_run_dir, tmp_path):
    """The kept epoch is the best on training examples held out from training, never on the dev
    set that is reported; the saved model is that epoch's."""
    out, train = tmp_path / "best", tmp_path / "train.csv"
    header, *rows = [line for line in (FIXTURES / "reviews_train.csv").read_text().splitlines()
                     if line.strip()]
    train.write_text("\n".join([header] + rows * 3) + "\n")  # 48: enough to hold 10% out
    code, r, err = run_cli(capsys, "finetune", "--checkpoint", char_run_dir, "--train", train,
                           "--dev", FIXTURES / "reviews_dev.csv", "--keep-epoch", "best",
                           "--out", out, *FAST)
    assert code == 0
    choice = r["choice_scores"]
    assert len(choice) == 3 and r["kept_epoch"] == 1 + max(range(3), key=lambda i: (choice[i], -i))
    assert r["score"] == r["epoch_scores"][r["kept_epoch"] - 1]
    n_train = 3 * len(rows)
    assert r["choice_examples"] == round(0.1 * n_train)
    assert r["train_examples_used"] == n_train - r["choice_examples"]
    assert f"the best on {r['choice_examples']} training examples held out" in err
    code, _, err = run_cli(capsys, "finetune", "--checkpoint", char_run_dir, "--train",
                           FIXTURES / "reviews_train.csv", "--dev", FIXTURES / "reviews_dev.csv",
                           "--keep-epoch", "best", *FAST)  # 16 examples: too few to hold out
    assert code == 2 and "needs at least 20 training examples" in err
    dev = [line.split(",")[-1] for line in (FIXTURES / "reviews_dev.csv").read_text()
           .splitlines()[1:] if line.strip()]
    p = pr.run_predict(out, file=FIXTURES / "reviews_dev.csv")["predictions"]
    assert 100 * skm.accuracy_score(dev, [x["label"] for x in p]) == pytest.approx(r["score"])


# ------------------------------------------------------------------------------ long texts


@pytest.fixture(scope="module")
def tokenizer(char_run_dir):
    from minielectra.data.tokenizer import WordPieceTokenizer
    return WordPieceTokenizer.load(sorted((char_run_dir / "checkpoints").glob("step_*"))[-1])


def test_windows_cover_the_text_and_overlap_by_half():
    ids = [2] + list(range(100, 123)) + [3]  # [CLS], 23 pieces, [SEP]
    got = windows.windows_of(ids, 10)  # 8 pieces a window, a new one every 4
    body = list(range(100, 123))
    starts = [0, 4, 8, 12, 15]  # the last ends at the text's end
    assert got == [[2] + body[s:s + 8] + [3] for s in starts]
    assert windows.windows_of(ids[:5], 10) == [ids[:5]]


def test_truncate_mode_is_encode_pair_and_counts_the_long_texts(tokenizer, caplog):
    examples = [Example("short", None, 0), Example("a much longer text " * 5, None, 1),
                Example("pair a " * 4, "pair b " * 4, 0)]
    with caplog.at_level(logging.WARNING):
        enc = windows.encode_texts(tokenizer, examples, 24)
        windows.warn_long(enc, "demo", "truncate")
    assert enc.rows == [tokenizer.encode_pair(e.text_a, e.text_b, max_len=24) for e in examples]
    naive = sum(len(tokenizer.encode_pair(e.text_a, e.text_b, max_len=10_000)[0]) > 24
                for e in examples)
    assert enc.long == naive == 2 and enc.owner is None
    assert "2 of 3 (67%) texts are longer than 24 tokens" in caplog.text


def test_predict_windows_is_the_mean_of_the_windows_logits(capsys, char_run_dir, tmp_path):
    out = tmp_path / "m"
    assert run_cli(capsys, "finetune", "--checkpoint", char_run_dir, "--train",
                   FIXTURES / "reviews_train.csv", "--dev", FIXTURES / "reviews_dev.csv",
                   "--out", out, "--long-text", "windows", "--set", "finetune.max_seq_len=16",
                   *FAST)[0] == 0
    ft = saved.load_finetuned(out)
    text = "a warm and funny film that runs on and on"
    ids, _ = ft.tokenizer.encode_pair(text, None, max_len=10_000)
    body, size = ids[1:-1], 14
    starts = list(range(0, len(body) - size + 1, size // 2))
    starts += [len(body) - size] if starts[-1] + size < len(body) else []
    with torch.no_grad():
        logits = torch.stack([ft.model(torch.tensor([[ids[0]] + body[s:s + size] + [ids[-1]]]))[0]
                              for s in starts]).mean(0)
    got = pr.predict(ft, [text])[0]["probabilities"]
    assert list(got.values()) == pytest.approx(logits.softmax(-1).tolist(), abs=1e-5)
    cut = pr.predict(ft, [text], long_text="truncate")[0]["probabilities"]
    assert list(cut.values()) != pytest.approx(list(got.values()), abs=1e-5)


def test_a_checkpoint_used_beyond_its_pretraining_length_is_named(char_run_dir, tmp_path,
                                                                   caplog):
    run = json.loads((sorted((char_run_dir / "checkpoints").glob("step_*"))[-1]
                      / "run_config.json").read_text())
    (tmp_path / "run_config.json").write_text(json.dumps({**run, "data": {
        **run["data"], "max_seq_len": 16}}))
    rows = [([2] + [9] * 10 + [3], [0] * 12), ([2] + [9] * 20 + [3], [0] * 22)]
    with caplog.at_level(logging.WARNING):
        assert windows.warn_untrained_positions(tmp_path, rows, "demo") == 1
    assert "1 of 2 inputs (50%) are longer than the 16 tokens" in caplog.text
    assert windows.pretrained_length(minielectra.model.storage.BUNDLED) == 32


# ------------------------------------------------------------------------------ predict --file


@pytest.fixture(scope="module")
def reviews_model(char_run_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("reviews") / "m"
    assert main(["finetune", "--checkpoint", str(char_run_dir), "--train",
                 str(FIXTURES / "reviews_train.csv"), "--dev", str(FIXTURES / "reviews_dev.csv"),
                 "--out", str(out), *FAST]) == 0
    return out


@pytest.mark.parametrize("name, content", [
    ("in.csv", 'id,text,label\n1,"good, warm film",x\n2,dull,y\n'),
    ("in.tsv", "text\tid\ngood, warm film\t1\ndull\t2\n"),
    ("in.jsonl", '{"text": "good, warm film", "id": 1}\n\n{"text": "dull"}\n'),
    ("in.txt", "good, warm film\ndull\n"),
])
def test_predict_file_reads_tables_by_their_text_column(capsys, reviews_model, tmp_path, name,
                                                        content):
    (tmp_path / name).write_text(content)
    code, p, _ = run_cli(capsys, "predict", "--model", reviews_model, "--file", tmp_path / name)
    assert code == 0
    assert [x["text_a"] for x in p["predictions"]] == ["good, warm film", "dull"]
    ref = pr.predict(reviews_model, ["good, warm film", "dull"])
    assert [x["probabilities"] for x in p["predictions"]] == [x["probabilities"] for x in ref]


def test_predict_file_without_a_text_column_names_the_columns(capsys, reviews_model, tmp_path):
    (tmp_path / "in.csv").write_text("review,stars\ngood,5\n")
    code, _, err = run_cli(capsys, "predict", "--model", reviews_model, "--file",
                           tmp_path / "in.csv")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "'text'" in err and "review, stars" in err and "--text-column" in err
    code, p, _ = run_cli(capsys, "predict", "--model", reviews_model, "--file",
                         tmp_path / "in.csv", "--text-column", "review")
    assert code == 0 and [x["text_a"] for x in p["predictions"]] == ["good"]


# ------------------------------------------------------------------------------ hub model ids


@pytest.fixture
def hub_state(monkeypatch):
    """Forget the once-per-process hub probe, so each test sets its own."""
    monkeypatch.setattr(data_hub, "_PROBED", [])
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)


def test_a_hub_id_offline_is_one_line(capsys, hub_state, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty cache
    for cmd in (["evaluate"], ["finetune", "--train", FIXTURES / "reviews_train.csv", "--dev",
                               FIXTURES / "reviews_dev.csv"]):
        code, _, err = run_cli(capsys, *cmd, "--checkpoint", "google/electra-small-discriminator")
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert "google/electra-small-discriminator" in err and "unreachable" in err


def test_a_hub_id_is_downloaded_and_converted(capsys, hub_state, monkeypatch, tmp_path):
    """The download is a local transformers directory (no network here); the model loaded by
    its id gives transformers' own discriminator logits, and finetune takes the id."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.ElectraConfig(vocab_size=60, embedding_size=16, hidden_size=32,
                                     num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=64, max_position_embeddings=128)
    torch.manual_seed(0)
    disc = transformers.ElectraForPreTraining(cfg).eval()
    gen = transformers.ElectraForMaskedLM(transformers.ElectraConfig(**{
        **cfg.to_dict(), "hidden_size": 16, "intermediate_size": 32, "num_attention_heads": 1})
    ).eval()
    gen.electra.embeddings.load_state_dict(disc.electra.embeddings.state_dict())  # tied
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list("abcdefghijklmnopqrstuvwxyz")
    snapshots = {"someone/tiny-electra": disc, "someone/tiny-electra-gen": gen}
    for name, net in snapshots.items():
        net.save_pretrained(tmp_path / name)
        (tmp_path / name / "vocab.txt").write_text(
            "\n".join(tokens + ["##" + c for c in tokens[5:]]) + "\n")
    snapshot = tmp_path / "someone/tiny-electra"
    asked = []

    def snapshot_download(repo_id, *, allow_patterns, local_files_only):
        asked.append((repo_id, local_files_only))
        return str(tmp_path / repo_id)

    import huggingface_hub
    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    monkeypatch.setattr(data_hub, "_PROBED", [None])  # the hub is reachable
    from minielectra import Electra
    model = Electra.from_pretrained("someone/tiny-electra").eval()
    ids = torch.tensor([[2, 7, 8, 9, 3]])
    with torch.no_grad():
        torch.testing.assert_close(model.discriminator(ids), disc(ids).logits)
    assert asked[0] == ("someone/tiny-electra", False)
    both = Electra.from_pretrained("someone/tiny-electra", generator="someone/tiny-electra-gen"
                                   ).eval()
    with torch.no_grad():
        torch.testing.assert_close(both.generator(ids), gen(ids).logits)
    code, r, err = run_cli(capsys, "finetune", "--checkpoint", "someone/tiny-electra", "--train",
                         FIXTURES / "reviews_train.csv", "--dev", FIXTURES / "reviews_dev.csv",
                         *FAST)
    assert code == 0 and r["checkpoint"] == str(snapshot), err


# ------------------------------------------------------------------- the main job's time cap


@pytest.fixture(scope="module")
def capped_run(tmp_path_factory, write_tiny_corpus):
    """A tiny `pretrain` stopped at once by its time cap: (run dir, stderr); its stdout is
    the JSON alone."""
    root = tmp_path_factory.mktemp("capped")
    corpus = write_tiny_corpus(root / "tiny.txt")
    sets = [f"data.corpus={corpus}", f"data.cache_dir={root / 'cache'}", "data.vocab_size=128",
            "train.max_steps=50", "train.max_minutes=1e-9", f"train.out_dir={root / 'run'}"]
    import contextlib
    import io
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        assert main(["pretrain", "--preset", "tiny", *[a for s in sets for a in ("--set", s)]]) == 0
    result = json.loads(out.getvalue())  # stdout is one JSON document; people read stderr
    assert result["stopped_by"] == "max_minutes"
    return root / "run", err.getvalue()


def test_the_time_cap_is_announced_with_the_command_that_continues(capped_run):
    run, err = capped_run
    line = next(x for x in err.splitlines() if "train.max_minutes" in x)
    step = int(re.search(r"stopped by the time cap train.max_minutes=1e-09 at step (\d+) of 50",
                         line)[1])
    assert f"checkpoint saved: {run / 'checkpoints' / f'step_{step:07d}'}" in line
    assert (run / "checkpoints" / f"step_{step:07d}" / "model.safetensors").is_file()
    again = shlex.split(line.split("continue with: ")[1].split(" (add")[0])
    args = build_parser().parse_args(again[1:])
    assert args.resume and args.command == "pretrain"
    # as printed, it resumes the run (this cap, a nanosecond, stops it again at once)
    assert main(again[1:]) == 0
    assert (run / "checkpoints" / f"step_{step:07d}" / "model.safetensors").is_file()


def test_viz_and_evaluate_count_the_same_heldout_examples(capsys, capped_run, tmp_path):
    run, _ = capped_run
    code, e, _ = run_cli(capsys, "evaluate", "--checkpoint", run)
    code2, v, _ = run_cli(capsys, "viz", "--run", run, "--out", tmp_path / "r.html")
    assert code == code2 == 0
    assert v["heldout_examples"] == e["examples"] and v["heldout_auc"] == pytest.approx(
        e["disc_auc"], abs=1e-12)
    assert f"{e['examples']} held-out examples" in (tmp_path / "r.html").read_text()


# ------------------------------------------------------------------------ the README's set-up


def test_readme_setup_is_two_commands_that_need_only_the_package_index():
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", readme, re.S)
    clone = next(b for b in blocks if "git clone" in b)
    setup = next(b for b in blocks if "minielectra pretrain --preset nano" in b)
    commands = [line.strip() for line in setup.splitlines() if line.strip()]
    # one installs and runs the main job, one runs the tests
    assert commands == ['pip install torch==2.13.0 && pip install -e ".[dev,notebooks]" && '
                        "minielectra pretrain --preset nano",
                        "python -m pytest -q --nbval tests notebooks"]
    # no other index on the set-up line (an unreachable one makes pip wait minutes); the CPU
    # index is named for Linux without a GPU, as an alternative in the prose
    assert "--index-url" not in setup and "--extra-index-url" not in setup
    assert "--index-url https://download.pytorch.org/whl/cpu" in readme
    # a clone and a virtual environment, and no `cd minielectra` (from a checkout: the package)
    assert "python3 -m venv" in clone and not re.search(r"cd minielectra\b(?!-)", readme)
    assert not any(c.startswith("pip install minielectra") for c in commands)  # not published


@pytest.mark.slow
def test_the_readmes_own_data_example_labels_its_two_texts_as_meant(capsys, tmp_path):
    """The README's recipe (the bundled checkpoint, its defaults) on the handmade reviews of
    tests/fixtures: the README's first text comes out positive, its second negative."""
    readme = (ROOT / "README.md").read_text()
    line = next(x for x in readme.splitlines() if x.startswith("minielectra predict --model"))
    texts = shlex.split(line)[4:]
    assert len(texts) == 2
    code, _, _ = run_cli(capsys, "finetune", "--checkpoint", "bundled", "--train",
                         FIXTURES / "reviews_train.csv", "--dev", FIXTURES / "reviews_dev.csv",
                         "--out", tmp_path / "reviews")
    assert code == 0
    got = pr.predict(tmp_path / "reviews", texts)
    assert [p["label"] for p in got] == ["positive", "negative"], got
