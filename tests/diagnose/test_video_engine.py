"""Video cases through the engine: VITATECS end to end with a tiny X-CLIP (pairs scored jointly, X-CLIP's
segment sampling) and a tiny CLIP averaging its frames' embeddings; each distinct clip decoded and scored once,
frames cached by clip content and frame rule, a second run computing nothing; a model of images refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from spotdiff import evaluate, load_model
from spotdiff.benchmarks import get_benchmark
from spotdiff.cli import main
from spotdiff.testing.tiny_models import make_tiny_blip_retrieval, make_tiny_clip, make_tiny_xclip
from spotdiff.testing.videos import frame_number, write_vitatecs
from spotdiff.video.clips import FrameRule, SampledVideo


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("models")
    return {
        "xclip": "xclip:" + str(make_tiny_xclip(root / "xclip", num_frames=4)),
        "clip": "hf-clip:" + str(make_tiny_clip(root / "clip")) + "?frames=uniform:4",
        "blip": "blip-itm:" + str(make_tiny_blip_retrieval(root / "blip")),
    }


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return write_vitatecs(tmp_path_factory.mktemp("vitatecs"))


def test_xclip_scores_each_clip_once_and_a_rerun_computes_nothing(tmp_path, models, data) -> None:
    cache = tmp_path / "cache"
    kw = {"cache": cache, "use_store": False, "n_boot": 0, "progress": False, "workers": 0}
    first = evaluate(models["xclip"], "vitatecs", data, **kw)
    assert first.n_cases == 6 and set(first.metrics) >= {"all", "Direction", "Sequence", "Type"}
    # 4 distinct videos, each scored once against its distinct texts: video9770 2 (its line repeated), the
    # piñata 3 (kicks, lifts, punches: "kicks" in two aspects), VFYCU8 2, video8646 2 = 9 pairs
    assert first.run.engine_stats["computed"] == 9
    assert len(list((cache / "frames").rglob("*.npz"))) == 4  # one entry per clip under segments:4
    again = evaluate(models["xclip"], "vitatecs", data, **kw)
    assert again.run.engine_stats.get("computed", 0) == 0 and again.metrics == first.metrics

    scorer = load_model(models["xclip"])
    assert scorer.frame_rule() == FrameRule("segments", frames=4)
    case = get_benchmark("vitatecs")(data).load()[1]
    clip = SampledVideo(case.images[0], scorer.frame_rule()).load()  # 8 frames: segment centres 1, 3, 5, 7
    assert [frame_number(f) for f in clip.frames] == [1, 3, 5, 7]
    direct = scorer.score_pairs([clip], [list(case.texts)])[0]
    assert np.allclose(first.cases[1]["scores"], [direct], atol=1e-6)


def test_frame_averaged_clip_and_xclip_share_a_cache_apart(tmp_path, models, data) -> None:
    cache = tmp_path / "cache"
    kw = {"cache": cache, "use_store": False, "n_boot": 0, "progress": False, "workers": 0}
    evaluate(models["xclip"], "vitatecs", data, **kw)
    clip = evaluate(models["clip"], "vitatecs", data, **kw)
    # CLIP embeds each distinct clip once (4) and each distinct text once (9)
    assert clip.run.engine_stats["computed"] == 4 + 9
    assert len(list((cache / "frames").rglob("*.npz"))) == 8  # uniform:4 frames are other frames than segments:4
    scorer = load_model(models["clip"])
    case = get_benchmark("vitatecs")(data).load()[0]
    frames = SampledVideo(case.images[0], scorer.frame_rule()).load()
    rows = scorer.encode_images(list(frames.frames))
    mean = rows.mean(axis=0)
    expected = mean / np.linalg.norm(mean) @ scorer.encode_texts(list(case.texts)).T
    assert np.allclose(scorer.score_matrix([frames], list(case.texts))[0], expected, atol=1e-5)


def test_a_model_of_images_is_refused_in_one_line(tmp_path, models, data, capsys) -> None:
    code = main(["eval", "--model", models["blip"], "--benchmark", "vitatecs", "--data", str(data), "--no-cache",
                 "--no-store", "-q", "--n-boot", "0"])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "scores images, and case Direction/1 holds videos" in err and "Traceback" not in err


def test_vinoground_lmm_asks_each_question_about_its_own_video_only(tmp_path) -> None:
    """A tiny Qwen2-VL through vqa: on vinoground-lmm: 4 (video, question) pairs a pair, never the 12 others;
    the matrix NaN where nothing was asked, and no case counted as a NaN score."""
    from spotdiff.testing.hub_repos import unpack_repo, vinoground_repo
    from spotdiff.testing.tiny_vlms import make_tiny_vlm

    data = unpack_repo(vinoground_repo(n=3), tmp_path / "vinoground")
    model = "vqa:" + str(make_tiny_vlm("qwen2_vl", tmp_path / "qwen")) + "?generate=2&frames=processor:4"
    kw = {"use_store": False, "n_boot": 0, "progress": False, "workers": 0}
    result = evaluate(model, "vinoground-lmm", data, cache=tmp_path / "cache", **kw)
    assert result.run.engine_stats["computed"] == 3 * 4
    assert set(result.metrics["all"]) == {"text", "video", "group", "gen_text", "gen_video", "gen_group", "unparsed"}
    scores = np.asarray(result.cases[0]["scores"], dtype=float)
    assert scores.shape == (4, 4, 3) and np.isnan(scores[~np.eye(4, dtype=bool)]).all()
    assert not np.isnan(scores[np.eye(4, dtype=bool)][:, :2]).any()
    assert result.run.diagnostics["n_nan_cases"] == 0 and result.run.diagnostics["n_answers"] == 12
