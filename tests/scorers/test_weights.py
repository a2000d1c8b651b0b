"""``scorers.weights``: a model folder's digests cover what ``from_pretrained`` loads, nothing a trainer adds."""

from __future__ import annotations

from pathlib import Path

from spotdiff.scorers.weights import model_dir_digests


def _model(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"hidden_size": 8}\n')
    (folder / "tokenizer.json").write_text("{}\n")
    (folder / "model.safetensors").write_bytes(b"weights")
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text('{"pooling_mode_mean_tokens": true}\n')
    return folder


def test_training_records_and_checkpoints_leave_the_digests_unchanged(tmp_path: Path) -> None:
    """A resumed training's folder (other checkpoints, other timestamps in its records) is the same model."""
    folder = _model(tmp_path / "m")
    before = model_dir_digests(folder)
    (folder / "training.json").write_text('{"created": "2026-11-25T22:41:38+0000"}\n')
    (folder / "train_log.jsonl").write_text('{"step": 1}\n')
    (folder / "train_summary.json").write_text("{}\n")
    (folder / "tensorboard").mkdir()
    (folder / "tensorboard" / "events.out.tfevents.1").write_bytes(b"event")
    for step in ("0000010", "0000020"):
        ckpt = folder / f"checkpoint-{step}"
        ckpt.mkdir()
        (ckpt / "model.safetensors").write_bytes(b"other weights " + step.encode())
        (ckpt / "trainer_state.pt").write_bytes(b"state")
        (ckpt / "COMPLETE").write_text("")
    (folder / ".lock").write_text("")
    assert model_dir_digests(folder) == before


def test_the_digests_follow_the_models_own_files(tmp_path: Path) -> None:
    folder = _model(tmp_path / "m")
    config, weights = model_dir_digests(folder)
    (folder / "1_Pooling" / "config.json").write_text('{"pooling_mode_cls_token": true}\n')
    changed_config, same_weights = model_dir_digests(folder)
    (folder / "model.safetensors").write_bytes(b"new weights")
    assert changed_config != config and same_weights == weights
    assert model_dir_digests(folder)[1] != weights
