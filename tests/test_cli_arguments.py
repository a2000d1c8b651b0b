"""Bad command-line values are refused up front with one line naming the option (spotdiff.commands._types):
seeds outside NumPy's range, empty counts, negative resamples, a non-positive learning rate, a folder given
as the run store and a file given as a folder; a reading command never creates a store."""

from __future__ import annotations

from pathlib import Path

import pytest

from spotdiff.cli import main
from spotdiff.commands import build_parser


def refused(argv: list[str], capsys: pytest.CaptureFixture) -> str:
    """argparse's one-line error for ``argv`` (exit status 2, no traceback)."""
    with pytest.raises(SystemExit) as stop:
        main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"spotdiff {argv[0]}") and ": error: argument " in last
    return last


EVAL = ["eval", "--model", "hf-clip:/nowhere", "--benchmark", "winoground"]
TRAIN = ["train", "--from-config", "tiny", "--captions", "c.jsonl"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([*EVAL, "--seed", "-1"], "--seed: a seed lies in 0..4294967295 (NumPy's range), got -1"),
        ([*EVAL, "--seed", str(2**32)], f"--seed: a seed lies in 0..4294967295 (NumPy's range), got {2**32}"),
        ([*EVAL, "--seed", "x"], "--seed: expected an integer, got 'x'"),
        ([*EVAL, "--limit", "0"], "--limit: must be >= 1, got 0"),
        ([*EVAL, "--n-boot", "-1"], "--n-boot: must be >= 0, got -1"),
        ([*TRAIN, "--out", "o", "--lr", "-1"], "--lr: must be a finite number > 0, got -1"),
        ([*TRAIN, "--out", "o", "--lr", "0"], "--lr: must be a finite number > 0, got 0"),
        ([*TRAIN, "--out", "o", "--lr", "nan"], "--lr: must be a finite number > 0, got nan"),
        ([*TRAIN, "--out", "o", "--batch-size", "0"], "--batch-size: must be >= 1, got 0"),
        ([*TRAIN, "--out", "o", "--save-every", "-1"], "--save-every: must be >= 0, got -1"),
        ([*TRAIN, "--out", "o", "--seed", str(2**40)], "--seed: a seed lies in 0..4294967295"),
        (["synth", "spec", "--out", "o", "--seed", "-1"], "--seed: a seed lies in 0..4294967295"),
        (["bias", "--benchmark", "winoground", "--model", "lm:x", "--limit", "0"], "--limit: must be >= 1, got 0"),
        (["compare", "a", "b", "--n-boot", "-5"], "--n-boot: must be >= 0, got -5"),
    ],
)
def test_bad_values_are_one_line_errors(argv, message, capsys):
    assert message in refused(argv, capsys)


def test_store_must_be_a_file_and_out_or_cache_a_folder(tmp_path, capsys):
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine")
    for argv in (
        [*EVAL, "--store", str(tmp_path)],
        ["runs", "--store", str(tmp_path)],
        ["report", "--out", str(tmp_path / "r"), "--store", str(tmp_path)],
    ):
        assert f"--store: {tmp_path} is a folder; give the run store's file, e.g. {tmp_path / 'runs.sqlite'}" in (
            refused(argv, capsys)
        )
    for argv in (
        [*EVAL, "--cache", str(a_file)],
        [*EVAL, "--out", str(a_file)],
        [*TRAIN, "--out", str(a_file)],
        ["synth", "corpus", "--out", str(a_file)],
        ["report", "--out", str(a_file)],
    ):
        option = argv[argv.index(str(a_file)) - 1]
        assert f"argument {option}: {a_file} is a file; give a folder" in refused(argv, capsys)
    assert a_file.read_text() == "mine"


def test_a_reading_command_does_not_create_a_mistyped_store(tmp_path, capsys):
    typo = tmp_path / "rusn.sqlite"
    for argv in (["runs", "--store", str(typo)], ["report", "--out", str(tmp_path / "r"), "--store", str(typo)],
                 ["compare", "abc", "def", "--store", str(typo)]):  # fmt: skip
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert f"no run store at {typo}: no run has been recorded there; give the store's file with --store" in err, err
    assert not typo.exists() and not (tmp_path / "r").exists()


def test_store_help_names_the_default_file():
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices
    for name in ("eval", "runs", "report", "compare", "train"):
        help_text = " ".join(commands[name].format_help().split())
        assert "(default $SPOTDIFF_STORE or ~/.local/share/spotdiff/runs.sqlite)" in help_text, name


def test_good_values_pass(tmp_path):
    args = build_parser().parse_args(
        [*TRAIN, "--out", str(tmp_path / "new"), "--seed", str(2**32 - 1), "--lr", "1e-4", "--save-every", "0"]
    )
    assert (args.seed, args.lr, args.save_every, args.out) == (2**32 - 1, 1e-4, 0, Path(tmp_path / "new"))


@pytest.mark.parametrize(
    ("argv", "read"),
    [
        (["synth", "spec", "--out", "d", "--n", "2"], (["synth", "spec"], [], {"out": ["d"], "n": ["2"]})),
        (["-v", "run", "--out=o", "p.yaml", "--set", "a=1", "--set", "b=2", "--dry-run"],
         (["run"], ["p.yaml"], {"out": ["o"], "set": ["a=1", "b=2"], "dry_run": [""]})),
        (["demo", "--out", "x", "tokenizer", "--captions", "c"], (["demo", "tokenizer"], [], {"captions": ["c"]})),
        (["demo", "findings", "dir"], (["demo", "findings"], ["dir"], {})),
        (["eval", "--no-such-option", "x"], (["eval"], [], {})),  # argparse refuses it when the command runs
    ],
)  # fmt: skip
def test_split_command_reads_a_command_line_as_the_parser_does(argv: list[str], read: tuple) -> None:
    from spotdiff.commands import split_command

    assert split_command(build_parser(), argv) == read


def test_a_command_builds_only_its_own_parser() -> None:
    """``spotdiff eval ...`` imports no other command's module; ``--help``, ``-v`` first and an unknown name
    still see every command (issue 34: a warm re-run pays for what it runs)."""
    import json
    import subprocess
    import sys

    probe = (
        "import json, sys; from spotdiff.commands import build_parser, _command; "
        "[build_parser(_command(a)) for a in ({argv!r},)]; "
        "print(json.dumps(sorted(m.rsplit('.', 1)[1] for m in sys.modules if m.startswith('spotdiff.commands.'))))"
    )

    def commands_imported(argv: list[str]) -> list[str]:
        out = subprocess.run([sys.executable, "-c", probe.format(argv=argv)], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return [m for m in json.loads(out.stdout) if not m.startswith("_")]

    assert commands_imported(["-v", "runs", "--store", "x.sqlite"]) == ["runs"]
    every = commands_imported(["--help"])
    assert {"eval", "runs", "synth", "demo"} <= set(every)
    assert commands_imported(["--help", "runs"]) == every
    assert commands_imported(["nosuch"]) == every
    assert sorted(build_parser("runs")._subparsers._group_actions[0].choices) == ["runs"]
