"""Every ``minielectra`` command the documentation shows works as typed, at toy scale.

Where: README.md, tutorial/*.md, docs/**/*.md, and the examples under each command's ``--help``.
What: in a fenced shell block (```bash, ```sh, ```shell, ```console; in a fence without a
language, a line that starts with one), each command whose program is ``minielectra`` (after ``VAR=value`` settings; also
``python -m minielectra`` and ``torchrun ... -m minielectra``), read as the shell reads it: a
backslash at the end of a line continues it, ``#`` starts a comment, ``|``, ``;``, ``&&`` and
``||`` separate commands, ``export V=...`` and ``for V in a b ...; do`` bind a variable (a
loop's first value) that ``$V`` and ``${V}`` expand, and a here-document's lines are its
program's, not commands. An argument ``...`` (the docs' "and so on") stands for nothing. A
command shown only inline in prose is not collected.

How: each distinct command runs once through ``cli.main`` in a fresh folder where every input it
names exists (:func:`materialise`: a tiny run where a checkpoint or a run is named, a fine-tuned
model for ``--model``, tiny SQuAD files, ...), with MINIELECTRA_DATA_DIR a toy data directory
(GLUE, SQuAD, WikiText, OpenWebText, pretrain-en and the BERT vocabulary, all tiny) and with
toy-scale flags appended (:func:`toy`: a one-layer model, ``--max-steps 2``, 8 training
examples, one seed...). It must exit 0. A command that cannot run here is listed in
:data:`NOT_RUN` with the reason, and is still parsed as typed (the parser, and the preset,
experiment and task it names). A command added to the docs without either fails this test.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from minielectra import cli
from minielectra.config import PRESETS
from minielectra.model.storage import BUNDLED

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SHELL_FENCES = ("bash", "sh", "shell", "console", "")

# Commands that cannot run here, each with the reason. Keyed by the start of the command line.
NOT_RUN = {
    "torchrun": "data-parallel training over several GPUs (torchrun --nproc_per_node=8)",
}
# Commands the docs show that are not minielectra's (yet documented as such): each fails here as
# it would for a reader, until the docs say what to run instead.
WRONG_IN_THE_DOCS: dict[str, str] = {}  # "command start": why it fails (none today)


# ------------------------------------------------------------------------ 1. finding commands


@dataclass(frozen=True)
class Command:
    argv: tuple[str, ...]  # after the program
    launcher: str  # "minielectra", "python -m", "torchrun"
    where: str  # "README.md:35"

    @property
    def text(self) -> str:
        return shlex.join([self.launcher, *self.argv])


FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.S | re.M)
OPERATORS = {";", "&&", "||", "|", "&"}


def _words(line: str) -> list[str]:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split, lexer.commenters = True, "#"
    return list(lexer)


def _expand(word: str, variables: dict[str, str]) -> str:
    def value(m):
        name = m.group(1) or m.group(2)
        if name not in variables:
            raise KeyError(f"${name} is not set in the block")
        return variables[name]
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", value, word)


def _program(words: list[str], variables: dict[str, str]) -> tuple[str, list[str]] | None:
    """(launcher, argv) of one simple command, or None when it is not minielectra's."""
    while words and re.fullmatch(r"\w+=\S*", words[0]):  # VAR=value before the program
        words = words[1:]
    if not words:
        return None
    if words[0] == "export":
        for w in words[1:]:
            name, _, value = w.partition("=")
            variables[name] = value
        return None
    if words[0] == "minielectra":
        return "minielectra", words[1:]
    if "-m" in words and words.index("-m") + 1 < len(words) and \
            words[words.index("-m") + 1] == "minielectra":
        launcher = "torchrun" if words[0] == "torchrun" else "python -m"
        return launcher, words[words.index("-m") + 2:]
    return None


def block_commands(block: str, where: str, first_line: int) -> list[Command]:
    """The minielectra commands of one shell block (see the module docstring)."""
    found, variables, heredoc = [], {}, None
    lines = block.split("\n")
    i = 0
    while i < len(lines):
        start, line = i, lines[i]
        while line.endswith("\\") and i + 1 < len(lines):  # a continued line
            i += 1
            line = line[:-1] + " " + lines[i]
        i += 1
        if heredoc is not None:
            heredoc = None if line.strip() == heredoc else heredoc
            continue
        if m := re.search(r"<<-?\s*['\"]?(\w+)['\"]?", line):
            heredoc = m.group(1)
        words = _words(line.strip().removeprefix("$ "))
        simple: list[str] = []
        for word in [*words, ";"]:
            if word not in OPERATORS:
                simple.append(word)
                continue
            if simple[:1] == ["for"] and len(simple) >= 4 and simple[2] == "in":
                variables[simple[1]] = simple[3]  # the loop's first value
            elif simple[:1] in (["do"], ["then"]):
                simple = simple[1:]
            if simple and simple[0] not in ("for", "done", "fi"):
                prog = _program([_expand(w, variables) for w in simple], variables)
                if prog is not None:
                    argv = tuple(w for w in prog[1] if w != "...")
                    found.append(Command(argv, prog[0], f"{where}:{first_line + start}"))
            simple = []
    return found


def _command_lines(text: str) -> str:
    """Only the lines that start with a command (prose around examples is not shell)."""
    return "\n".join(x if re.match(r"\s*(\$ )?minielectra\s", x) else ""
                     for x in text.split("\n"))


def _doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "tutorial").glob("*.md")),
            *sorted((ROOT / "docs").rglob("*.md"))]


def commands_by_page() -> dict[str, list[Command]]:
    """Every page's commands in the order it shows them (a page: a file, or a command's --help)."""
    pages: dict[str, list[Command]] = {}
    for path in _doc_files():
        text, page = path.read_text(), str(path.relative_to(ROOT))
        for m in FENCE.finditer(text):
            if m.group(1) not in SHELL_FENCES:
                continue
            line, block = text.count("\n", 0, m.start(2)) + 1, m.group(2)
            if not m.group(1):  # a fence without a language: its lines that start a command
                block = _command_lines(block)
            pages.setdefault(page, []).extend(block_commands(block, page, line))
    parser = cli.build_parser()
    helps = [("minielectra --help", parser.epilog or "")] + [
        (f"minielectra {name} --help", p.epilog or "")
        for action in parser._subparsers._group_actions for name, p in action.choices.items()]
    for where, epilog in helps:
        pages.setdefault(where, []).extend(block_commands(_command_lines(epilog), where, 1))
    return {page: found for page, found in pages.items() if found}


def documented_commands() -> list[Command]:
    """Every command, first place it is shown; the --help examples last."""
    found: dict[tuple[str, tuple[str, ...]], Command] = {}
    for commands in PAGES.values():
        for c in commands:
            found.setdefault((c.launcher, c.argv), c)
    return list(found.values())


PAGES = commands_by_page()
COMMANDS = documented_commands()


def reason_not_run(c: Command) -> str | None:
    return next((why for start, why in NOT_RUN.items() if c.text.startswith(start)), None)


def wrong(c: Command) -> str | None:
    return next((why for start, why in WRONG_IN_THE_DOCS.items() if c.text.startswith(start)),
                None)


def test_the_finder_reads_commands_as_the_shell_does():
    block = ("# a comment\n"
             "minielectra pretrain --preset nano \\\n    --set train.keep_every=1  # kept\n"
             "export DIR=/data\n"
             "for step in 0062500 0125000; do\n"
             "  OMP_NUM_THREADS=1 minielectra glue --checkpoint runs/s/step_$step "
             "--out \"$DIR/glue ${step}\"\n"
             "done\n"
             "python - <<'PY'\nminielectra is not a command here\nPY\n"
             "minielectra experiment tying | minielectra viz --json ...; echo done\n"
             "torchrun --nproc_per_node=8 -m minielectra pretrain --out runs/x\n")
    got = [(c.launcher, list(c.argv), c.where) for c in block_commands(block, "f.md", 10)]
    assert got == [
        ("minielectra", ["pretrain", "--preset", "nano", "--set", "train.keep_every=1"],
         "f.md:11"),
        ("minielectra", ["glue", "--checkpoint", "runs/s/step_0062500", "--out",
                         "/data/glue 0062500"], "f.md:15"),
        ("minielectra", ["experiment", "tying"], "f.md:20"),
        ("minielectra", ["viz", "--json"], "f.md:20"),
        ("torchrun", ["pretrain", "--out", "runs/x"], "f.md:21")]
    assert len(COMMANDS) >= 20  # the docs show commands, and they are found


# ------------------------------------------------------------------------ 2. the toy world

TINY_WORDS = ("the cat dog sat on mat ran far away quick brown fox jumps over lazy river tree "
              "house green blue red small big old new day night sun moon star sky").split()
MODEL = ["model.embedding_size=32", "model.hidden_size=32", "model.num_layers=1",
         "model.num_heads=2", "model.intermediate_size=64", "model.max_position_embeddings=32"]
PRETRAIN = [*MODEL, "data.max_seq_len=16", "data.vocab_size=300", "train.batch_size=8",
            "train.eval_examples=16", "train.max_minutes=0", "data.num_workers=1",
            "data.held_out_fraction=0.2"]
FINETUNE = ["finetune.epochs=1", "finetune.num_threads=1", "finetune.max_seq_len=32",
            "finetune.eval_batch_size=64"]
SQUAD = ["squad.max_query_len=8", "squad.doc_stride=8"]


def _sentences(n: int, seed: int) -> list[str]:
    import random
    rng = random.Random(seed)
    return [" ".join(rng.choices(TINY_WORDS, k=rng.randint(4, 12))) + " ." for _ in range(n)]


def _corpus(path: Path, documents: int = 40, seed: int = 0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    docs = ["\n".join(_sentences(4, seed + i)) for i in range(documents)]
    path.write_text("\n\n".join(docs) + "\n")
    return path


def _wikitext(folder: Path) -> None:
    for split in ("train", "valid", "test"):
        articles = [f" = Article {i} = \n\n " + " ".join(_sentences(5, i)) + " \n"
                    for i in range(30)]
        _write(folder / f"wiki.{split}.raw", "\n".join(articles))


def _squad(path: Path, version: str, articles: int = 48) -> Path:
    data = []
    for i in range(articles):
        words = _sentences(1, i)[0].split()[:-1]
        context = f"Article {i} says {' '.join(words)} and ends here."
        qa = {"id": f"q{i}", "question": f"What does article {i} say?",
              "answers": [{"text": words[0], "answer_start": context.index(words[0])}]}
        qas = [qa]
        if version == "v2.0":
            qa["is_impossible"] = False
            qas.append({"id": f"n{i}", "question": "Who is the king of Mars?", "answers": [],
                        "is_impossible": True})
        data.append({"title": f"A{i}", "paragraphs": [{"context": context, "qas": qas}]})
    return _write(path, json.dumps({"version": version, "data": data}))


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@dataclass
class World:
    root: Path
    data: Path  # the toy data directory
    run: Path  # a pretrain --out folder (1 layer, 32 positions)
    model: Path  # a fine-tuned classifier
    squad: Path  # a fine-tuned SQuAD model
    hf: Path  # a transformers export: discriminator/, generator/
    prepared: Path  # a prepare --out folder (16 tokens, the BERT vocabulary stand-in)


@pytest.fixture(scope="module")
def world(tmp_path_factory, glue_slice_dir) -> World:
    root = tmp_path_factory.mktemp("documented")
    data = root / "data"
    shutil.copytree(glue_slice_dir / "glue", data / "glue")
    for version, name in (("1.1", "dev-v1.1.json"), ("v2.0", "dev-v2.0.json")):
        _squad(data / "squad" / name, version)
    _wikitext(data / "wikitext-2-raw")
    _wikitext(data / "wikitext-103-raw")
    _corpus(data / "pretrain-en" / "part.txt", seed=100)
    _corpus(data / "openwebtext" / "part.txt", seed=200)
    shutil.copy(BUNDLED / "vocab.txt", _write(data / "vocab" / "bert-base-uncased-vocab.txt", ""))
    with pytest.MonkeyPatch.context() as m:
        m.setenv("MINIELECTRA_DATA_DIR", str(data))
        m.setenv("MINIELECTRA_CACHE", str(root / "cache"))
        m.chdir(root)
        sets = [a for s in PRETRAIN for a in ("--set", s)]
        ft = [a for s in FINETUNE for a in ("--set", s)]
        steps = [["pretrain", "--corpus", str(_corpus(root / "tiny.txt")), "--max-steps", "2",
                  "--out", "run", *sets],
                 ["finetune", "--checkpoint", "run", "--train", str(FIXTURES / "reviews_train.csv"),
                  "--dev", str(FIXTURES / "reviews_dev.csv"), "--out", "model", *ft],
                 ["finetune", "--task", "squad", "--checkpoint", "run", "--out", "squad",
                  "--set", "squad.train_articles=40", *ft, *[a for s in SQUAD
                                                            for a in ("--set", s)]],
                 ["convert", "--to-hf", "run", "--out", "hf"],
                 toy(["prepare", "--corpus", "tiny.txt", "--tokenizer", "bert-base-uncased",
                      "--max-seq-len", "16", "--out", "prepared"])]
        for argv in steps:
            assert cli.main(argv) == 0, argv
    return World(root, data, root / "run", root / "model", root / "squad", root / "hf",
                 root / "prepared")


# ------------------------------------------------------------------------ 3. inputs and scale


def _flag_values(argv: list[str]) -> list[tuple[str, str]]:
    return [(a, b) for a, b in zip(argv, argv[1:]) if a.startswith("--")]


def _copy(src: Path, dst: Path) -> None:
    if dst.exists() or dst.is_symlink():
        return
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("run.lock"))
    else:
        shutil.copy(src, dst)


def _place_run(w: World, path: Path) -> None:
    """A run folder at ``path``, or (``.../checkpoints/step_N``) the run that holds it."""
    if path.exists():  # made by an earlier command
        return
    if path.parent.name == "checkpoints" and path.parent.is_dir():  # a run an earlier one made
        max(path.parent.glob("step_*")).rename(path)  # its last checkpoint, renamed
        return
    if re.fullmatch(r"step_\d+", path.name) and path.parent.name == "checkpoints":
        run = path.parent.parent
        _copy(w.run, run)
        (ckpt,) = (run / "checkpoints").iterdir()
        if ckpt != path:
            ckpt.rename(path)
        return
    _copy(w.run, path)


def materialise(w: World, argv: list[str], cwd: Path) -> None:
    """Every input ``argv`` names, made in ``cwd`` (paths outside it are the docs' own)."""
    command = argv[0] if argv else ""
    for flag, value in _flag_values(argv):
        path = cwd / value
        if Path(value).is_absolute() or value in ("bundled", "pydocs") or \
                value.startswith("hf:") or (flag != "--checkpoint" and path.exists()):
            continue  # the docs' own, the package's, or made by an earlier command
        if flag in ("--checkpoint", "--run", "--to-hf"):
            _place_run(w, path)
        elif flag == "--model":
            _copy(w.squad if "squad" in value else w.model, path)
        elif flag == "--from-hf":
            _copy(w.hf / "discriminator", path)
        elif flag == "--generator":
            _copy(w.hf / "generator", path)
        elif flag == "--data":
            _copy(w.prepared, path)
        elif flag in ("--train", "--dev") and value.endswith(".json"):
            _squad(path, "v2.0" if "v2" in value else "1.1")
        elif flag in ("--train", "--dev"):
            _copy(FIXTURES / ("reviews_dev.csv" if flag == "--dev" else "reviews_train.csv"),
                  path)
        elif flag == "--file":
            _write(path, "a warm, funny film\na dull one\n")
        elif flag == "--corpus" and (value.endswith((".txt", ".gz")) or "/" in value):
            _corpus(path)
    if command == "squad-eval":  # DATA.json PREDICTIONS.json [--na-prob-file F]
        data, predictions = (cwd / a for a in argv[1:3])
        if not data.exists():
            _squad(data, "v2.0" if "v2" in data.name else "1.1")
        dev = json.loads(data.read_text())
        ids = [q["id"] for art in dev["data"] for par in art["paragraphs"] for q in par["qas"]]
        if not predictions.exists():
            _write(predictions, json.dumps({q: "" for q in ids}))
        if "--na-prob-file" in argv and not (cwd / argv[argv.index("--na-prob-file") + 1]).exists():
            _write(cwd / argv[argv.index("--na-prob-file") + 1],
                   json.dumps({q: 0.5 for q in ids}))


def _replace(argv: list[str], flag: str, value: str) -> list[str]:
    if flag in argv:
        i = argv.index(flag)
        return [*argv[:i + 1], value, *argv[i + 2:]]
    return [*argv, flag, value]


def _sets(values: list[str]) -> list[str]:
    return [a for s in values for a in ("--set", s)]


def toy(argv: list[str]) -> list[str]:
    """``argv`` at toy scale: its flags kept, sizes, steps, examples and seeds made tiny."""
    command = argv[0] if argv else ""
    if command == "pretrain":
        preset = argv[argv.index("--preset") + 1] if "--preset" in argv[:-1] else "nano"
        two = ["data.long_seq_len=32"] if PRESETS.get(preset, {}).get("data.long_seq_len") else []
        return [*_replace(argv, "--max-steps", "2"), *_sets(PRETRAIN + two)]
    if command == "finetune":
        argv = _replace(argv, "--max-train-examples", "8")
        argv = _replace(argv, "--seeds", "2") if "--seeds" in argv else argv
        squad = any(a.startswith("squad") for a in argv)
        return [*argv, *_sets(FINETUNE + (SQUAD if squad else []))]
    if command == "glue":
        argv = _replace(_replace(argv, "--max-train-examples", "8"), "--seeds", "1")
        return [*argv, *_sets(FINETUNE)]
    if command == "evaluate":
        return _replace(argv, "--max-examples", "16")
    if command == "viz" and "--run" in argv:
        return _replace(argv, "--heldout-examples", "16")
    if command == "experiment" and "toy-grammar" in argv:
        argv = _replace(_replace(argv, "--seeds", "1"), "--steps", "4")
        return _replace(argv, "--words-per-class", "3")
    if command == "experiment":
        argv = _replace(_replace(argv, "--budget", "4"), "--seeds", "1")
        argv = _replace(_replace(argv, "--probe-examples", "16"), "--finetune-examples", "16")
        return [*argv, *_sets(PRETRAIN)]
    if command == "prepare":  # a tiny corpus holds out some documents at 20%, not at 2%
        argv = _replace(_replace(argv, "--workers", "1"), "--held-out-fraction", "0.2")
        return _replace(argv, "--max-seq-len", "16")  # the toy pre-training's length
    return argv


# ------------------------------------------------------------------------ 4. the tests


def _parses(c: Command) -> None:
    """As typed: the parser takes it, and the preset, experiment and task it names exist."""
    from minielectra.experiments.specs import EXPERIMENTS
    from minielectra.finetune.glue.data import TASKS
    try:
        args = cli.build_parser().parse_args(list(c.argv))
    except SystemExit as e:
        assert e.code == 0, f"{c.where}: {c.text}: the parser refuses it"
        return
    if getattr(args, "preset", None) is not None:
        assert args.preset in PRESETS, f"{c.where}: unknown preset {args.preset}"
    if args.command == "experiment":
        assert args.name in {*EXPERIMENTS, "toy-grammar"}, f"{c.where}: {args.name}"
    for task in [getattr(args, "task", None), *(getattr(args, "tasks", None) or [])]:
        assert task is None or task in {*TASKS, "squad", "squad_v2"} or task.startswith("hf:")


def _main(argv: list[str]) -> int:
    try:
        return cli.main(argv)
    except SystemExit as e:  # --version, --help
        return e.code


@pytest.mark.parametrize("c", COMMANDS, ids=[f"{c.where} {c.text[:60]}" for c in COMMANDS])
def test_every_documented_command_works_as_typed(c, world, tmp_path, monkeypatch, capsys):
    if wrong(c) is not None:  # still wrong, or this list must lose it
        with pytest.raises(AssertionError):
            _parses(c)
        pytest.xfail(wrong(c))
    _parses(c)
    if reason_not_run(c) is not None:
        pytest.skip(f"not run here: {reason_not_run(c)}")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # ~ in a command: here, not the user's
    monkeypatch.setenv("MINIELECTRA_DATA_DIR", str(world.data))
    monkeypatch.setenv("MINIELECTRA_CACHE", str(world.root / "cache"))
    argv = list(c.argv)
    materialise(world, argv, tmp_path)
    if "--resume" in argv:  # a run to continue: the same command, once without --resume
        assert _main(toy([a for a in argv if a != "--resume"])) == 0
    code = _main(toy(argv))
    err = capsys.readouterr().err
    assert code == 0, f"{c.where}: {c.text}\n{err[-3000:]}"
    assert "Traceback" not in err


SEQUENCES = [page for page, found in PAGES.items() if page != "README.md" and len(found) > 1]


@pytest.mark.parametrize("page", SEQUENCES)
def test_each_pages_commands_run_in_sequence_in_one_folder(page, world, tmp_path, monkeypatch,
                                                          capsys):
    """A reader follows a page top to bottom in one folder: each command of the page (once), in
    its order, finds what the ones before it left (a run it continues, an output folder it must not
    clobber); only what no earlier command made is put there. (The README's own test is
    stricter: there, every input but the reader's reviews is made by an earlier command.)"""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MINIELECTRA_DATA_DIR", str(world.data))
    monkeypatch.setenv("MINIELECTRA_CACHE", str(world.root / "cache"))
    ran = set()
    for c in PAGES[page]:
        if reason_not_run(c) is not None or wrong(c) is not None or c.argv in ran:
            continue  # a command the page repeats is one the reader has already run
        ran.add(c.argv)
        argv = list(c.argv)
        materialise(world, argv, tmp_path)
        out = next((v for f, v in _flag_values(argv) if f == "--out"), None)
        if "--resume" in argv and not (out and Path(out).exists()):
            assert _main(toy([a for a in argv if a != "--resume"])) == 0, c.text
        code = _main(toy(argv))
        err = capsys.readouterr().err
        assert code == 0, f"{c.where}: {c.text}\n{err[-3000:]}"
        assert "Traceback" not in err


def test_the_docs_show_no_command_known_to_fail():
    """The list of commands the docs get wrong only shrinks: each entry is still shown."""
    for start in WRONG_IN_THE_DOCS:
        assert any(c.text.startswith(start) for c in COMMANDS), f"no longer shown: {start}"


# ------------------------------------------------------------------------ 5. the printed next steps


def printed_commands(err: str) -> list[list[str]]:
    """The minielectra commands a command's stderr offers as next steps ("next:" and what follows
    it, a command a line, continued by a backslash), each as the shell splits it."""
    if "next:" not in err:
        return []
    text = err[err.index("next:"):].replace("next:", "")
    return [list(c.argv) for c in block_commands(text, "stderr", 1)]


def _run_printed(argv: list[str], capsys) -> str:
    """Run one printed command at toy scale (its own words kept); its stderr."""
    for flag, value in _flag_values(argv):  # the user's own files, named by placeholders
        if flag in ("--train", "--dev") and not Path(value).exists():
            _copy(FIXTURES / f"reviews_{flag[2:]}.csv", Path(value))
    code = _main(toy(argv))
    err = capsys.readouterr().err
    assert code == 0, f"{shlex.join(['minielectra', *argv])}\n{err[-3000:]}"
    return err


def test_every_printed_next_step_runs_in_the_state_the_last_left(world, tmp_path, monkeypatch,
                                                                capsys):
    """The main job's next steps, as printed, one after the other in its folder: evaluate, the
    report, fine-tuning, and the predict commands that fine-tuning and the main job print."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MINIELECTRA_DATA_DIR", str(world.data))
    monkeypatch.setenv("MINIELECTRA_CACHE", str(world.root / "cache"))
    corpus = _corpus(tmp_path / "tiny.txt")
    queue = printed_commands(_run_printed(["pretrain", "--preset", "nano", "--corpus",
                                           str(corpus), "--out", "runs/nano"], capsys))
    assert [a[0] for a in queue] == ["evaluate", "viz", "finetune", "predict"]
    ran = []
    while queue:
        argv = queue.pop(0)
        queue = printed_commands(_run_printed(argv, capsys)) + queue  # its own next step first
        ran.append(argv)
    assert [a[0] for a in ran] == ["evaluate", "viz", "finetune", "predict", "predict"]
    assert Path(ran[1][ran[1].index("--out") + 1]).is_file()  # the report was written


def _jupyter_serves(argv: list[str], home: Path, folder: Path) -> str:
    """Start ``jupyter lab`` as printed (no browser, any free port) until it serves; its log."""
    import os
    import subprocess
    import sys
    import time
    env = {**os.environ, "HOME": str(home), "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
           "JUPYTER_CONFIG_DIR": str(home / "config"), "JUPYTER_DATA_DIR": str(home / "data")}
    cmd = [sys.executable, "-m", "jupyterlab", *argv[2:], "--no-browser", "--port=0"]
    cmd += ["--allow-root"] if os.geteuid() == 0 else []  # CI runs as root; a learner does not
    home.mkdir(parents=True, exist_ok=True)
    log = home / "jupyter.log"
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None and \
                "is running at" not in log.read_text():
            time.sleep(0.5)
    finally:
        proc.terminate()
        proc.wait(30)
    return log.read_text()


def test_the_printed_next_step_of_lessons_opens_the_copied_course(tmp_path, monkeypatch,
                                                                  capsys):
    pytest.importorskip("jupyterlab", reason="the course's extra (jupyterlab) is not installed")
    monkeypatch.chdir(tmp_path)
    assert _main(["lessons", "my-course"]) == 0
    err = capsys.readouterr().err
    (line,) = [x for x in err.splitlines() if x.startswith("next: ")]
    argv = shlex.split(line.removeprefix("next: "))
    assert argv[:2] == ["jupyter", "lab"] and Path(argv[2]) == Path("my-course")
    log = _jupyter_serves(argv, tmp_path / "home", tmp_path / "my-course")
    assert "is running at" in log, log[-3000:]
    assert str(tmp_path / "my-course") in log  # it serves the copied course


def test_the_readmes_commands_run_in_sequence_in_one_folder(world, tmp_path, monkeypatch,
                                                           capsys):
    """The README's commands one after the other, as a reader runs them: each finds what the
    ones before it made (the fine-tuned model predict reads, the prepared data the Small run
    reads); only the reader's own files (their reviews) and the Small run's far milestone
    (a toy run stops at step 2) are put there."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MINIELECTRA_DATA_DIR", str(world.data))
    monkeypatch.setenv("MINIELECTRA_CACHE", str(world.root / "cache"))
    readme = [c for c in COMMANDS if c.where.startswith("README.md:")]
    assert len(readme) >= 6
    made_here = set()
    for c in readme:
        if reason_not_run(c) is not None:
            continue
        argv = list(c.argv)
        for flag, value in _flag_values(argv):
            if flag in ("--train", "--dev") and not Path(value).exists():
                _copy(FIXTURES / f"reviews_{flag[2:]}.csv", Path(value))
            elif flag in ("--model", "--data") or (flag == "--checkpoint" and value != "bundled"
                                                   and "step_" not in value):
                assert Path(value).exists(), f"{c.where}: {value} is made by no command before"
            elif flag == "--checkpoint" and "step_" in value and not Path(value).exists():
                max(Path(value).parent.glob("step_*")).rename(value)  # the run's last, renamed
        err = (_main(toy(argv)), capsys.readouterr().err)
        assert err[0] == 0, f"{c.where}: {c.text}\n{err[1][-3000:]}"
        made_here |= {v for f, v in _flag_values(argv) if f == "--out"}
    assert {"runs/reviews", "data/owt", "runs/small"} <= made_here
