"""A file system's refusals (full, read-only, no permission) as one error naming the file and the remedy
(spotdiff.errors.file_system_error and writing)."""

from __future__ import annotations

import errno
import os
import re
import subprocess
from pathlib import Path

import pytest

from spotdiff.errors import DataError, file_system_error, writing


@pytest.mark.parametrize(
    ("code", "says"),
    [
        (errno.ENOSPC, "disk full ([Errno 28] No space left on device); free space there"),
        (errno.EDQUOT, "disk full ([Errno 122] Disk quota exceeded); free space there"),
        (errno.EROFS, "read-only file system ([Errno 30] Read-only file system); write to a folder on a writable"),
        (errno.EACCES, "permission denied ([Errno 13] Permission denied); give this user access to it"),
    ],
)
def test_a_refusal_names_the_file_the_system_named_else_the_folder_written(code: int, says: str) -> None:
    named = OSError(code, os.strerror(code), "out/metrics.json")
    assert str(file_system_error(named, "out")).startswith(f"file out/metrics.json: {says}")
    assert str(file_system_error(OSError(code, os.strerror(code)), "out")).startswith(f"file out: {says}")


def test_other_errors_are_not_refusals() -> None:
    assert file_system_error(OSError(errno.ENOENT, "No such file or directory", "x")) is None
    assert file_system_error(ValueError("no")) is None


def test_writing_reads_a_librarys_own_report_of_a_full_disk(tmp_path: Path) -> None:
    """safetensors reports a full disk in its own exception ("... (os error 28)"); within ``writing`` that is
    a full disk by its message, and any other error stays itself while the file system has room."""
    serializing = "Error while serializing: I/O error: No space left on device (os error 28)"
    full = rf"^file {tmp_path}: disk full \({re.escape(serializing)}\); free"
    with pytest.raises(DataError, match=full), writing(tmp_path):
        raise RuntimeError(serializing)
    with pytest.raises(RuntimeError, match="unexpected pos"), writing(tmp_path):
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 231168 vs 231060")
    with pytest.raises(DataError, match=rf"^file {tmp_path / 'ckpt'}: read-only file system"), writing(tmp_path):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(tmp_path / "ckpt"))
    with pytest.raises(DataError, match=r"^no$"), writing(tmp_path):
        raise DataError("no")


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_writing_calls_a_librarys_failure_on_a_full_file_system_a_full_disk(tmp_path: Path) -> None:
    """torch's zip writer reports a write the full disk cut short as ``unexpected pos``: no reason given, so
    the file system's free space decides (a real tmpfs filled to the last byte)."""
    full = tmp_path / "full"
    full.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(full)], check=False).returncode:
        pytest.skip("this root may not mount")
    try:
        with pytest.raises(OSError) as filling, open(full / "filler", "wb") as f:
            while True:
                f.write(b"x" * 4096)
                f.flush()
        assert filling.value.errno == errno.ENOSPC
        said = rf"^file {full / 'model'}: disk full \(\[enforce fail"
        with pytest.raises(DataError, match=said), writing(full / "model"):
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 231168 vs 231060")
    finally:
        subprocess.run(["umount", str(full)], check=False)
