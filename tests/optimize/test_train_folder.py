"""`spotdiff train --out`: a folder that is not this training's is never written into, one training
holds a folder at a time, and SIGINT / SIGTERM save a checkpoint that `--resume` continues from."""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from test_train import TOKENIZER, config, data, uninterrupted, weights  # noqa: F401  (the shared fixtures)

from spotdiff.cli import main
from spotdiff.errors import ConfigError
from spotdiff.optimize.callbacks import Callback
from spotdiff.optimize.checkpoint import TrainingLock, read_rng_state, rng_state, set_rng_state
from spotdiff.optimize.loop import Trainer, TrainingInterrupted, default_callbacks, train
from spotdiff.testing.tiny_models import make_tiny_clip

# ---------------------------------------------------------------------------------- whose folder


def test_out_is_never_the_model_folder_nor_someone_elses(tmp_path, data):  # noqa: F811
    _, pairs, cases = data
    clip_dir = make_tiny_clip(tmp_path / "clip")
    before = {p.name: p.read_bytes() for p in clip_dir.iterdir() if p.is_file()}
    for out, where in ((clip_dir, "the folder"), (clip_dir / "run", "inside the folder")):
        with pytest.raises(ConfigError, match=rf"--out {out} is {where} of the model trained from \({clip_dir}\)"):
            train(config(out, from_config=None, model=f"hf-clip:{clip_dir}", steps=1), pairs, cases)
    assert {p.name: p.read_bytes() for p in clip_dir.iterdir() if p.is_file()} == before
    assert not (clip_dir / "run").exists()
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "config.json").write_text('{"mine": true}')
    with pytest.raises(ConfigError, match=rf"--out {mine} is not empty \(config.json\) and is not a spotdiff training"):
        train(config(mine, steps=1), pairs, cases)
    assert (mine / "config.json").read_text() == '{"mine": true}' and sorted(os.listdir(mine)) == ["config.json"]
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="is a file"):
        train(config(tmp_path / "file", steps=1), pairs, cases)


def test_cli_refuses_the_model_folder_as_out(tmp_path, data, capsys):  # noqa: F811
    root, _, _ = data
    clip_dir = make_tiny_clip(tmp_path / "clip")
    before = (clip_dir / "model.safetensors").read_bytes()
    argv = ["train", "--model", f"hf-clip:{clip_dir}", "--out", str(clip_dir), "--captions",
            str(root / "captions.jsonl"), "--steps", "1", "--batch-size", "8", "--device", "cpu"]  # fmt: skip
    assert main(argv) == 2
    assert "folder of the model trained from" in capsys.readouterr().err
    assert (clip_dir / "model.safetensors").read_bytes() == before


def test_a_training_folder_is_taken_up_again(tmp_path, data):  # noqa: F811
    """A folder a training wrote stays writable: a start that failed (the lock files only), a run, --resume."""
    _, pairs, cases = data
    out = tmp_path / "run"
    with pytest.raises(ConfigError, match="cannot load model") as failed:
        train(config(out, from_config=None, model=str(tmp_path / "nowhere"), steps=2), pairs, cases)
    assert out.is_dir()
    first = train(config(out, steps=2, stop_after=1), pairs, cases)  # the failed start's lock is released
    assert failed.tb is not None  # its traceback (and Trainer) were alive all along
    assert first.step == 1 and (out / "training.json").is_file()
    assert train(config(out, steps=2, resume=True), pairs, cases).finished


# ---------------------------------------------------------------------------------------- the lock


def test_a_second_training_on_the_folder_is_refused_naming_the_holder(tmp_path, data):  # noqa: F811
    _, pairs, cases = data
    out = tmp_path / "locked"
    out.mkdir()
    holder = TrainingLock(out)
    try:
        with pytest.raises(ConfigError, match=rf"in use by another training \(pid {os.getpid()} on "
                           rf"{socket.gethostname()} since .*\); wait for it"):  # fmt: skip
            train(config(out, steps=1), pairs, cases)
        assert not (out / "train_log.jsonl").exists() and not (out / "training.json").exists()
    finally:
        holder.release()
    assert train(config(out, steps=1), pairs, cases).finished  # released: the folder is free again


# ----------------------------------------------------------------------------------- interruption


class SignalAt(Callback):
    """Sends ``signum`` to this process at the end of step ``step`` (the handler runs before the next)."""

    def __init__(self, signum: int, step: int) -> None:
        self.signum, self.step = signum, step

    def on_step(self, trainer, out):
        if out.step == self.step:
            os.kill(os.getpid(), self.signum)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_saves_a_checkpoint_that_resume_continues(tmp_path, data, uninterrupted, signum):  # noqa: F811
    _, pairs, cases = data
    ref_out, ref = uninterrupted
    before = signal.getsignal(signum)
    out = tmp_path / "stopped"
    trainer = Trainer(config(out, loss="spec-hn"), pairs, cases)  # --save-every 0: no periodic checkpoint
    trainer.callbacks = [*default_callbacks(trainer), SignalAt(signum, 2)]
    name = signal.Signals(signum).name
    with pytest.raises(TrainingInterrupted, match=rf"^{name} at step 2/6: checkpoint saved in "
                       rf"{out / 'checkpoint-0000002'}; --resume continues from step 2$"):  # fmt: skip
        trainer.run()
    assert signal.getsignal(signum) is before  # the previous handler is back
    assert (out / "checkpoint-0000002" / "COMPLETE").is_file() and not (out / "model.safetensors").exists()
    resumed = train(config(out, loss="spec-hn", resume=True), pairs, cases)
    assert resumed.finished and ref.losses[:2] + resumed.losses == ref.losses
    got, want = weights(out), weights(ref_out)
    assert all(torch.equal(got[k], want[k]) for k in want)


def test_resume_without_a_checkpoint_warns_that_it_starts_at_step_0(tmp_path, data, caplog):  # noqa: F811
    _, pairs, cases = data
    with caplog.at_level(logging.WARNING, logger="spotdiff.optimize.loop"):
        assert train(config(tmp_path / "fresh", steps=1, resume=True), pairs, cases).finished
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert f"--resume: no complete checkpoint in {tmp_path / 'fresh'}; training starts at step 0" in warned


# ------------------------------------------------------------------------------- damaged checkpoints


def test_resume_skips_damaged_checkpoints_for_the_newest_that_loads(tmp_path, data, uninterrupted, caplog):  # noqa: F811
    """A truncated model.safetensors, a garbled trainer_state.pt, an empty rng_state_0.pt: each checkpoint
    is skipped with one warning naming it, the file and why; the run continues exactly from the one that
    loads. A changed --lr is reported and not applied (the checkpoint's optimiser state continues)."""
    _, pairs, cases = data
    _, ref = uninterrupted
    out = tmp_path / "damaged"
    first = train(config(out, loss="spec-hn", save_every=1, keep_checkpoints=0, stop_after=4), pairs, cases)
    assert first.step == 4 and [p.name[-1] for p in sorted(out.glob("checkpoint-*"))] == ["1", "2", "3", "4"]
    ckpt = {k: out / f"checkpoint-{k:07d}" for k in (1, 2, 3, 4)}
    weights_file = ckpt[4] / "model.safetensors"
    weights_file.write_bytes(weights_file.read_bytes()[:1000])
    (ckpt[3] / "trainer_state.pt").write_bytes(b"\x00garbage" * 50)
    (ckpt[2] / "rng_state_0.pt").write_bytes(b"")
    good = (ckpt[1] / "trainer_state.pt").read_bytes()
    (ckpt[1] / "trainer_state.pt").unlink()
    with pytest.raises(ConfigError, match=r"^--resume: no checkpoint loads \(") as none:
        train(config(out, loss="spec-hn", resume=True), pairs, cases)
    for k, name in ((4, "model.safetensors: SafetensorError"), (3, "trainer_state.pt: UnpicklingError"),
                    (2, "rng_state_0.pt: EOFError"), (1, "trainer_state.pt: FileNotFoundError")):  # fmt: skip
        assert f"{ckpt[k]}: {name}: " in str(none.value)
    (ckpt[1] / "trainer_state.pt").write_bytes(good)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="spotdiff.optimize.loop"):
        resumed = train(config(out, loss="spec-hn", resume=True, lr=2e-3), pairs, cases)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert [w.split(", which")[0] for w in warned[:3]] == [f"--resume: skipping {ckpt[k]}" for k in (4, 3, 2)]
    assert "(model.safetensors: SafetensorError: Error while deserializing header" in warned[0]
    kept = ("--resume: --lr 0.002 is not applied: the checkpoint's 0.001 continues with its optimiser state "
            "(as Hugging Face Trainer resumes); start a new --out to train with --lr 0.002")  # fmt: skip
    assert warned[3] == kept
    assert len(warned) == 4
    assert resumed.finished and ref.losses[:1] + resumed.losses == ref.losses  # continued exactly from step 1


class _Exploit:
    """An object whose unpickling writes a file: what a shared checkpoint's pickle could do."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return Path.write_text, (self.marker, "ran")


def test_rng_states_round_trip_as_tensors_and_plain_values(tmp_path):
    random.gauss(0, 1), np.random.normal()  # cached Gaussians in both generators: part of their state
    state = rng_state()
    torch.save(state, tmp_path / "rng_state_0.pt")
    want = (torch.rand(3), np.random.normal(size=3), [random.gauss(0, 1) for _ in range(3)])
    torch.manual_seed(99), np.random.seed(99), random.seed(99)
    set_rng_state(read_rng_state(tmp_path / "rng_state_0.pt"))  # torch.load(weights_only=True) inside
    got = (torch.rand(3), np.random.normal(size=3), [random.gauss(0, 1) for _ in range(3)])
    assert torch.equal(got[0], want[0]) and np.array_equal(got[1], want[1]) and got[2] == want[2]


def test_resume_never_unpickles_a_checkpoints_rng_state(tmp_path, data, uninterrupted, caplog):  # noqa: F811
    """An rng_state_R.pt holding a pickled object (a checkpoint downloaded or shared) is refused unread,
    with one line saying what to do; the run resumes from the checkpoint before it, exactly."""
    _, pairs, cases = data
    _, ref = uninterrupted
    out, marker = tmp_path / "shared", tmp_path / "code-ran"
    train(config(out, loss="spec-hn", save_every=1, keep_checkpoints=0, stop_after=2), pairs, cases)
    torch.save({**rng_state(), "extra": _Exploit(marker)}, out / "checkpoint-0000002" / "rng_state_0.pt")
    with caplog.at_level(logging.WARNING, logger="spotdiff.optimize.loop"):
        resumed = train(config(out, loss="spec-hn", resume=True), pairs, cases)
    assert not marker.exists()  # the pickle's code never ran
    (warned,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warned.startswith(f"--resume: skipping {out / 'checkpoint-0000002'}, which does not load (rng_state_0.pt: "
                             "holds pickled objects, not tensors and plain values")  # fmt: skip
    assert "delete the checkpoint's rng_state_*.pt files to resume with the seeded generators" in warned
    assert resumed.finished and ref.losses[:1] + resumed.losses == ref.losses  # continued exactly from step 1


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not (path.is_file() and path.read_text()):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"{path} not written in {timeout} s"
        time.sleep(0.05)


def test_ctrl_c_on_the_cli_saves_a_checkpoint(tmp_path, data, capsys):  # noqa: F811
    """The real command: a second `train` on its folder is refused naming it; SIGINT once the train log
    has a line: exit 130, a checkpoint, a plain message."""
    root, _, _ = data
    out = tmp_path / "cli"
    cmd = [sys.executable, "-m", "spotdiff", "train", "--from-config", "tiny", "--tokenizer", str(TOKENIZER[-1]),
           "--captions", str(root / "captions.jsonl"), "--batch-size", "8", "--steps", "100000", "--lr", "1e-3",
           "--device", "cpu", "--out", str(out), "--no-tensorboard"]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(out / "train_log.jsonl", proc)
        assert main(cmd[3:]) == 2  # the same command again, while the first one trains
        holder = f"is in use by another training (pid {proc.pid} on {socket.gethostname()} since "
        assert holder in capsys.readouterr().err
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    step = json.loads((out / "train_summary.json").read_text())["step"]
    assert step >= 1 and (out / f"checkpoint-{step:07d}" / "COMPLETE").is_file()
    assert f"spotdiff train: interrupted by SIGINT at step {step}/100000: checkpoint saved in " in err
    assert f"--resume continues from step {step}" in err and "Traceback" not in err
    assert not (out / ".spotdiff-train.lock.json").exists()  # the lock's holder file goes with the run
