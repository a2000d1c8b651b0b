"""A frame-averaged CLIP and a video chat model (VQAScore through Qwen2-VL's video input) on Vinoground and
VITATECS: one grid, one run store, one cache, one report whose galleries show each clip as a strip of frames."""

from __future__ import annotations

import base64
import io
import re
from pathlib import Path

from PIL import Image

from spotdiff.cli import main
from spotdiff.diagnose.store import RunStore
from spotdiff.report.gallery import STRIP_FRAMES
from spotdiff.testing.hub_repos import unpack_repo, vinoground_repo
from spotdiff.testing.tiny_models import make_tiny_clip
from spotdiff.testing.tiny_vlms import make_tiny_vlm
from spotdiff.testing.videos import write_vitatecs


def test_clip_and_a_video_chat_model_share_store_grid_and_report(tmp_path: Path) -> None:
    vinoground = unpack_repo(vinoground_repo(n=4), tmp_path / "vinoground")
    vitatecs = write_vitatecs(tmp_path / "vitatecs")
    clip = "hf-clip:" + str(make_tiny_clip(tmp_path / "clip")) + "?frames=uniform:4"
    chat = "vqa:" + str(make_tiny_vlm("qwen2_vl", tmp_path / "qwen")) + "?frames=processor:4"
    store, report = tmp_path / "runs.sqlite", tmp_path / "report"
    argv = ["eval", "--model", clip, "--model", chat, "--benchmark", "vinoground", "--benchmark", "vitatecs",
            "--data", f"vinoground={vinoground}", "--data", f"vitatecs={vitatecs}", "--store", str(store),
            "--cache", str(tmp_path / "cache"), "--report", str(report), "-q", "--n-boot", "20"]  # fmt: skip
    assert main(argv) == 0
    with RunStore(store) as runs:
        recorded = {(r.model, r.benchmark): r for r in runs.runs(status="done")}
    assert set(recorded) == {(m, b) for m in (clip, chat) for b in ("vinoground", "vitatecs")}
    frames = list((tmp_path / "cache" / "frames").rglob("*.npz"))
    assert len(frames) == 2 * (8 + 4)  # two rules x (Vinoground's 8 clips + VITATECS's 4 videos)
    html = (report / "report.html").read_text()
    assert "vinoground" in html and "vitatecs" in html
    strips = [
        Image.open(io.BytesIO(base64.b64decode(uri)))
        for uri in re.findall(r'src="data:image/jpeg;base64,([^"]+)"', html)
    ]
    assert strips and all(s.width > (STRIP_FRAMES - 1) * s.height for s in strips)  # frames side by side
