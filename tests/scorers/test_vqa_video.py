"""Chat video VLMs through ``vqa:`` and served ones through ``api:``, on clips this file encodes.

Tiny Qwen2-VL, LLaVA-OneVision and LLaVA-NeXT-Video built from configs take a clip through the chat
template's video input: VQAScore and candidate answers equal the processor's own ``apply_chat_template``
path with the same frames (the reference), with and without prefix reuse; each family samples by its video
processor's own rule. ``api:`` sends a clip as its frames, as images, after VLMEvalKit's opening line.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from spotdiff.errors import ConfigError
from spotdiff.scorers import ScorerOptions, load_scorer
from spotdiff.scorers.api import FRAMES_PROMPT
from spotdiff.scorers.chat import Request
from spotdiff.testing.openai_server import ChatCompletionsServer
from spotdiff.testing.tiny_vlms import VIDEO_VLMS, make_tiny_vlm, next_token_logprobs
from spotdiff.testing.videos import coloured, encode_numbered, frame_number
from spotdiff.video.clips import SampledVideo, VideoRef


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("vlms")
    return {arch: make_tiny_vlm(arch, root / arch) for arch in (*VIDEO_VLMS, "llava")}


@pytest.fixture(scope="module")
def video(tmp_path_factory) -> VideoRef:
    return VideoRef(encode_numbered(tmp_path_factory.mktemp("clips") / "v.mp4", 12, 4, coloured((200, 40, 30))))


@pytest.mark.parametrize("arch", VIDEO_VLMS)
def test_vqascore_of_a_clip_equals_the_processors_video_path(models, video, arch: str) -> None:
    scorer = load_scorer(f"vqa:{models[arch]}", ScorerOptions(device="cpu", batch_size=4))
    rule = scorer.frame_rule()
    assert rule.text == "processor:8"  # the tiny processors declare no frames of their own
    clip = SampledVideo(video, rule).load()
    assert [frame_number(f) for f in clip.frames] == [0, 1, 3, 4, 6, 7, 9, 10]  # arange(0, 12, 1.5)
    texts = ["a red ball", "a dog on a mat"]
    reference = [next_token_logprobs(scorer.chat, [clip], scorer.question.format(t), ["Yes"])[0] for t in texts]
    got = scorer.score_pairs([clip], [texts])[0]
    assert np.log(got) == pytest.approx(np.array(reference, dtype=float), abs=1e-4)
    whole = load_scorer(f"vqa:{models[arch]}?reuse=no", ScorerOptions(device="cpu", batch_size=4))
    assert whole.score_pairs([clip], [texts])[0] == pytest.approx(got, rel=1e-4)
    (rows,) = scorer.answer_scores([clip], [["Is the ball red?"]], ("Yes", "No"))
    assert rows[0] == pytest.approx(next_token_logprobs(scorer.chat, [clip], "Is the ball red?", ["Yes", "No"]),
                                    abs=1e-4)  # fmt: skip


@pytest.mark.parametrize("arch", VIDEO_VLMS)
def test_prefix_reuse_processes_several_clips_in_one_call(models, video, tmp_path, monkeypatch, arch: str) -> None:
    """Two clips' prefixes go through the processor in one call (their frames split per clip after it: Qwen2-VL's
    patches by ``video_grid_thw``, the LLaVA families' by clip); each score equals the processor's own path."""
    scorer = load_scorer(f"vqa:{models[arch]}", ScorerOptions(device="cpu", batch_size=4))
    blue = VideoRef(encode_numbered(tmp_path / "blue.mp4", 12, 4, coloured((20, 140, 230))))
    clips = [SampledVideo(ref, scorer.frame_rule()).load() for ref in (video, blue)]
    texts = [["a red ball", "a dog on a mat"], ["a blue sky", "a cat"]]
    calls: list[int] = []
    process = scorer.chat.process
    monkeypatch.setattr(scorer.chat, "process", lambda prompts, images: calls.append(len(prompts)) or
                        process(prompts, images))  # fmt: skip
    got = scorer.score_pairs(clips, texts)
    assert calls == [2]
    for clip, ts, row in zip(clips, texts, got, strict=True):
        want = [next_token_logprobs(scorer.chat, [clip], scorer.question.format(t), ["Yes"])[0] for t in ts]
        assert np.log(row) == pytest.approx(np.array(want, dtype=float), abs=1e-4)


def test_frame_rules_of_chat_models(models, video) -> None:
    qwen = load_scorer(f"vqa:{models['qwen2_vl']}?frames=processor:3", ScorerOptions())
    assert qwen.frame_rule().indices(12, 4.0) == [0, 3, 6, 9]  # Qwen2-VL rounds 3 frames to its temporal patch: 4
    uniform = load_scorer(f"vqa:{models['llava_onevision']}?frames=uniform:2fps", ScorerOptions())
    assert [frame_number(f) for f in SampledVideo(video, uniform.frame_rule()).load().frames] == [0, 2, 4, 6, 8, 10]
    images_only = load_scorer(f"vqa:{models['llava']}", ScorerOptions())
    assert images_only.frame_rule() is None
    with pytest.raises(ConfigError, match="takes no videos"):
        load_scorer(f"vqa:{models['llava']}?frames=8", ScorerOptions())


def test_api_sends_a_clip_as_its_frames(models, video) -> None:
    """The served model sees the clip's frames as images and the question after FRAMES_PROMPT: its VQAScore
    equals the in-process model's on that prompt (its LM head biased towards "Yes", so that the answer is among
    the top log-probabilities a server lists)."""
    vqa = load_scorer(f"vqa:{models['qwen2_vl']}", ScorerOptions(device="cpu"))
    head, tok = vqa.chat.model.lm_head, vqa.chat.tokenizer
    bias = torch.zeros(head.out_features)
    (yes,) = tok("Yes", add_special_tokens=False)["input_ids"]
    bias[yes] = 12.0
    head.bias = torch.nn.Parameter(bias)
    with ChatCompletionsServer(vqa.chat) as server:
        api = load_scorer(f"api:tiny-vlm@{server.base_url}?frames=uniform:3", ScorerOptions())
        clip = SampledVideo(video, api.frame_rule()).load()
        assert [frame_number(f) for f in clip.frames] == [0, 4, 8]
        ((score, bound),) = api.score_pairs([clip], [["a red ball"]])[0]
    question = f"{FRAMES_PROMPT}\n" + vqa.question.format("a red ball")
    request = Request((0, 1, 2), vqa.chat.render(question, 3), (yes,))
    (expected,) = vqa.chat.target_logprobs(list(clip.frames), [request])
    assert bound == 0 and np.log(score) == pytest.approx(float(expected[0]), abs=1e-4)
