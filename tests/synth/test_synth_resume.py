"""Every engine's run is resumable: stopped after some items, the same command keeps them, makes the rest and
writes a clean run's bytes; another command is refused; ``--overwrite`` replaces what a failed run left;
each engine shows a progress bar (done / total, rate, time left), and ``-q`` silences it."""

from __future__ import annotations

import hashlib
import json

import pytest

from spotdiff.commands import main
from spotdiff.synth import run as synth_run

MAKE = synth_run._Journaled.__call__  # the real one, before any test patches it

COMMON = ["--image-size", "64", "--workers", "1"]
ENGINES = {
    "spec": ["--n", "2", "--subsets", "count,existence"],
    "eqben": ["--n", "1"],
    "zeroshot": ["--n", "4"],
    "corpus": ["--n", "4"],
    "visla": ["--n", "4"],
}


def digest(root):
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


class Stop:
    """Makes ``after`` items, then stops the run as Ctrl-C would; counts the items it made."""

    def __init__(self, after: int | None) -> None:
        self.after, self.made = after, 0

    def __call__(self, journaled, task):
        if self.after is not None and self.made == self.after:
            raise KeyboardInterrupt
        self.made += 1
        return MAKE(journaled, task)


def clean_and_stopped(argv, tmp_path, monkeypatch, after):
    """The output folders of ``argv`` run whole (``clean``) and stopped after ``after`` items (``out``)."""
    clean, out = tmp_path / "clean", tmp_path / "out"
    assert main([*argv, "--out", str(clean)]) == 0
    stop = Stop(after)
    monkeypatch.setattr(synth_run._Journaled, "__call__", lambda j, t: stop(j, t))
    assert main([*argv, "--out", str(out)]) == 130
    return clean, out


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_an_interrupted_run_resumes_to_a_clean_runs_bytes(engine, tmp_path, monkeypatch):
    base = ["synth", engine, *ENGINES[engine], *COMMON, "-q"]
    argv = [*base, "--seed", "3"]
    clean = tmp_path / "clean"
    assert main([*argv, "--out", str(clean)]) == 0
    total = Stop(None)
    monkeypatch.setattr(synth_run._Journaled, "__call__", lambda j, t: total(j, t))
    assert main([*argv, "--out", str(tmp_path / "count")]) == 0

    stop = Stop(2)
    monkeypatch.setattr(synth_run._Journaled, "__call__", lambda j, t: stop(j, t))
    out = tmp_path / "out"
    assert main([*argv, "--out", str(out)]) == 130
    assert (out / ".synth-run.json").is_file() and not (out / "synth.json").exists()
    assert main([*base, "--seed", "4", "--out", str(out)]) == 2  # other options: refused
    resumed = Stop(None)
    monkeypatch.setattr(synth_run._Journaled, "__call__", lambda j, t: resumed(j, t))
    assert main([*argv, "--out", str(out)]) == 0
    assert resumed.made == total.made - 2  # the two finished items were kept, not made again
    assert digest(out) == digest(clean)


def test_a_tampered_journal_entry_is_made_again(tmp_path, monkeypatch, caplog):
    """Issue 44: a journal entry replaced by ``[]`` was a TypeError traceback on resume. Entries are checked
    when read back (what was journaled, for the item it names); a bad one is made again, with a warning
    counting them, and the run's bytes are a clean run's."""
    import logging

    argv = ["synth", "zeroshot", "--n", "4", *COMMON, "-q", "--seed", "3"]
    clean, out = clean_and_stopped(argv, tmp_path, monkeypatch, after=3)
    entries = sorted((out / ".partial" / "items").glob("*.json"))
    assert len(entries) == 3
    entries[0].write_text("[]")
    entries[1].write_text(entries[2].read_text())  # another item's entry in its place
    resumed = Stop(None)
    monkeypatch.setattr(synth_run._Journaled, "__call__", lambda j, t: resumed(j, t))
    with caplog.at_level(logging.WARNING):
        assert main([*argv, "--out", str(out)]) == 0
    assert resumed.made == 3  # the two bad entries and the item never made
    assert digest(out) == digest(clean)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("2 journal entries" in w and "made again" in w for w in warnings), warnings


def test_overwrite_replaces_what_a_failed_run_left(tmp_path, monkeypatch, capsys):
    argv = ["synth", "zeroshot", "--n", "4", *COMMON, "-q"]
    stop = Stop(1)
    monkeypatch.setattr(synth_run._Journaled, "__call__", lambda j, t: stop(j, t))
    out = tmp_path / "out"
    assert main([*argv, "--out", str(out)]) == 130
    monkeypatch.undo()
    assert main(["synth", "zeroshot", "--n", "5", *COMMON, "-q", "--out", str(out)]) == 2
    assert "holds an unfinished run with other options (n: 4 -> 5)" in capsys.readouterr().err
    assert main(["synth", "zeroshot", "--n", "5", *COMMON, "-q", "--out", str(out), "--overwrite"]) == 0
    assert json.loads((out / "synth.json").read_text())["options"]["n"] == 5
    assert not (out / ".partial").exists() and not (out / ".synth-run.json").exists()


def test_every_engine_shows_progress_and_q_silences_it(tmp_path, capsys):
    argv = ["synth", "zeroshot", "--n", "3", *COMMON]
    assert main([*argv, "--out", str(tmp_path / "a")]) == 0
    err = capsys.readouterr().err
    assert "images: 100%" in err and "3/3" in err and "item/s" in err
    assert main([*argv, "-q", "--out", str(tmp_path / "b")]) == 0
    assert "images:" not in capsys.readouterr().err


def test_eqsd_resumes_without_rendering_its_finished_pairs_again(tiny_generative, tmp_path, monkeypatch):
    argv = ["synth", "eqsd", "--n", "3", "--image-size", "32", "--steps", "2", "--device", "cpu", "-q"]
    argv += ["--t2i", tiny_generative.t2i]
    clean, out = clean_and_stopped(argv, tmp_path, monkeypatch, after=2)
    resumed = Stop(None)
    monkeypatch.setattr(synth_run._Journaled, "__call__", lambda j, t: resumed(j, t))
    assert main([*argv, "--out", str(out)]) == 0
    assert resumed.made == 1 and digest(out) == digest(clean)
