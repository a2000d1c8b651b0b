"""Vinoground: the hub dataset's layout (vinoground.csv, the prompt files, the video folders, the shared copy
linked as Vinoground/), its quirks; protocol group equal to a transcription of the authors' eval/imagebind_eval.py
on score tables with ties, in strict and argmax modes; and vinoground-lmm's protocol vinoground equal to a
transcription of get_score_all.py on generated answers (empty ones included)."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import re
from pathlib import Path

import numpy as np
import pytest

from spotdiff.benchmarks import get_benchmark
from spotdiff.cases import case_pairs, case_reader
from spotdiff.errors import DataError
from spotdiff.protocols import get_protocol
from spotdiff.protocols.stats import evaluate
from spotdiff.readers import ANSWER_READERS
from spotdiff.testing.hub_repos import unpack_repo, vinoground_repo
from spotdiff.video.clips import VideoRef


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return unpack_repo(vinoground_repo(n=4), tmp_path_factory.mktemp("vinoground"))


def test_reads_the_hub_layout(data: Path, tmp_path: Path) -> None:
    bench = get_benchmark("vinoground")(data)
    cases = bench.load()
    rows = list(csv.DictReader(io.StringIO((data / "vinoground.csv").read_text())))
    assert [c.id for c in cases] == ["0", "1", "2", "3"] and bench.report.records == 4
    first = cases[0]
    assert first.texts == (rows[0]["pos_cap"], rows[0]["neg_cap"]) and "," in first.texts[0]  # quoted in the CSV
    assert first.truth.tolist() == [[True, False], [False, True]]
    assert [ref.path.name for ref in first.images] == ["0_pos.mp4", "0_neg.mp4"]
    assert all(isinstance(ref, VideoRef) and ref.start is None for ref in first.images)
    assert first.tags == {"subset": "action", "major": "action", "minor": "", "pos_vid": "vid0a", "neg_vid": "vid0b"}
    assert cases[1].tags["minor"] == "interaction;cyclical" and cases[1].subset == "object"
    assert [c.id for c in get_benchmark("vinoground")(data).load("viewpoint")] == ["2"]
    linked = tmp_path / "home"  # spotdiff data fetch's layout: the shared copy linked as Vinoground/
    linked.mkdir()
    (linked / "Vinoground").symlink_to(data)
    first = get_benchmark("vinoground")(linked, image_root=str(data)).load()[0]
    assert first.images[0].path == linked / "Vinoground/vinoground_videos/0_pos.mp4"


def test_bad_rows_name_file_line_and_field(tmp_path: Path) -> None:
    root = unpack_repo(vinoground_repo(n=3), tmp_path)
    path = root / "vinoground.csv"
    text = path.read_text()
    path.write_text(text.replace("\n2,viewpoint,", "\n7,viewpoint,"))
    with pytest.raises(DataError, match=r"index '7' at position 2") as err:
        get_benchmark("vinoground")(root).load()
    assert "vinoground.csv" in str(err.value) and "line 4" in str(err.value)
    path.write_text(text.replace("\n1,object,", "\n1,scenery,"))
    with pytest.raises(DataError, match=r"unknown major category 'scenery'.*major|major.*unknown major"):
        get_benchmark("vinoground")(root).load()


def _official_scores(results: np.ndarray) -> tuple[float, float, float]:
    """The loop of eval/imagebind_eval.py (github.com/Vinoground/Vinoground, commit 06a5715), transcribed:
    ``results`` is per pair ``videos @ texts.T`` ([pos, neg] x [pos_cap, neg_cap]); divided by the pairs."""
    text_correct = video_correct = group_correct = 0
    for r in results:
        video_correct += r[0][0] > r[1][0] and r[1][1] > r[0][1]
        text_correct += r[0][0] > r[0][1] and r[1][1] > r[1][0]
        group_correct += r[0][0] > r[1][0] and r[1][1] > r[0][1] and r[0][0] > r[0][1] and r[1][1] > r[1][0]
    n = len(results)
    return text_correct / n, video_correct / n, group_correct / n


def test_group_equals_imagebind_eval_with_ties(data: Path) -> None:
    cases = get_benchmark("vinoground")(data).load()
    rng = np.random.default_rng(2)
    scores = rng.integers(0, 3, size=(400, 2, 2)).astype(float)  # [pair, video, caption]: many ties
    chosen = [dataclasses.replace(cases[k % len(cases)], id=str(k)) for k in range(len(scores))]
    metrics = evaluate(get_protocol("group"), chosen, list(scores), n_boot=0).metrics["all"]
    text, video, group = _official_scores(scores)
    ours = (metrics["text"], metrics["image"], metrics["group"])
    assert ours == pytest.approx((100 * text, 100 * video, 100 * group))
    argmax = evaluate(get_protocol("group", "argmax"), chosen, list(scores), n_boot=0).metrics["all"]
    # argmax: a tie goes to the candidate listed first, so pos (listed first) wins its ties, neg loses them
    text_a = np.mean([r[0][0] >= r[0][1] and r[1][1] > r[1][0] for r in scores])
    video_a = np.mean([r[0][0] >= r[1][0] and r[1][1] > r[0][1] for r in scores])
    group_a = np.mean([r[0][0] >= r[0][1] and r[1][1] > r[1][0] and r[0][0] >= r[1][0] and r[1][1] > r[0][1]
                       for r in scores])  # fmt: skip
    assert (argmax["text"], argmax["image"], argmax["group"]) == pytest.approx((100 * text_a, 100 * video_a,
                                                                                100 * group_a))  # fmt: skip


# ------------------------------------------------------------------ the chat models' reading: vinoground-lmm
def test_lmm_reads_the_authors_prompts(data: Path, tmp_path: Path) -> None:
    cases = get_benchmark("vinoground-lmm")(data).load()
    text = json.loads((data / "vinoground_textscore.json").read_text())
    video = json.loads((data / "vinoground_videoscore.json").read_text())
    assert [c.id for c in cases] == ["0", "1", "2", "3"]
    odd = cases[1]  # pair 1 lists neg first in its text questions and asks its video questions on the reverse
    assert odd.texts == (text[2]["question"], text[3]["question"], video[2]["question"], video[3]["question"])
    assert [r.path.name for r in odd.images] == ["1_pos.mp4", "1_neg.mp4", "1_reverse.mp4", "1.mp4"]
    assert odd.truth.tolist() == np.diag([text[2]["GT"] == "A", text[3]["GT"] == "A", video[2]["GT"] == "A",
                                          video[3]["GT"] == "A"]).tolist()  # fmt: skip
    assert [text[2]["GT"], text[3]["GT"], video[2]["GT"], video[3]["GT"]] == ["B", "A", "B", "B"]
    assert odd.tags == {"subset": "object", "major": "object", "minor": "interaction;cyclical", "answers": "A/B",
                        "reader": "first-char", "pairs": "diagonal"}  # fmt: skip
    assert get_benchmark("vinoground-lmm")(data, reader="lists").load()[1].tags["reader"] == "first-char-lists"
    assert case_pairs(odd) == [(0, 0), (1, 1), (2, 2), (3, 3)]
    lmms = get_benchmark("vinoground-lmm")(data, suffix="lmms-eval").load()[0]
    assert lmms.texts[0] == text[0]["question"] + "\nPlease only output one English character."
    moved = unpack_repo(vinoground_repo(n=4), tmp_path / "lmms")  # lmms-eval's places for the two prompt files
    (moved / "vinoground_textscore.json").rename(moved / "vinoground_videos/vinoground_textscore.json")
    (moved / "vinoground_videoscore.json").rename(moved / "vinoground_videos_concated/vinoground_videoscore.json")
    assert [c.texts for c in get_benchmark("vinoground-lmm")(moved).load()] == [c.texts for c in cases]


@pytest.mark.parametrize(
    ("edit", "message"),
    [(lambda items: items.reverse(), "idx '3_neg' at position 0, where get_score_all.py reads 0_pos"),
     (lambda items: items[5].update(GT="C"), "GT 'C' is neither A nor B"),
     (lambda items: items.pop(), "expected a JSON list of 2 questions per pair")],
)  # fmt: skip
def test_lmm_bad_prompts_name_file_item_and_field(tmp_path: Path, edit, message: str) -> None:
    root = unpack_repo(vinoground_repo(n=4), tmp_path)
    path = root / "vinoground_videoscore.json"
    items = json.loads(path.read_text())
    edit(items)
    path.write_text(json.dumps(items))
    with pytest.raises(DataError, match=re.escape(message)) as err:
        get_benchmark("vinoground-lmm")(root).load()
    assert "vinoground_videoscore.json" in str(err.value)


def _official_get_score_all(gts: list[list[str]], responses: list[list]) -> dict[str, float]:
    """The scoring loop of get_score_all.py (github.com/Vinoground/Vinoground, commit 2602b94), transcribed for
    one model's responses: per pair ``[text pos, text neg, video pos, video neg]`` GT letters and responses as the
    authors' script saved them (eval/llava-onevision.py the string, eval/qwen.py the list batch_decode returns);
    the script reads ``response[0][:len(gt)]``, which on an empty string raises, caught by its bare ``except:
    continue`` after the pair was counted)."""
    category_all = text_correct = video_correct = group_correct = 0
    for gt, said in zip(gts, responses, strict=True):

        def right(k: int, gt=gt, said=said) -> bool:  # get_text_correct_wrong / get_video_correct_wrong
            return said[k][0][: len(gt[k])].lower() == gt[k].lower()

        try:
            is_curr_right = True
            category_all += 1
            if right(0) and right(1):
                text_correct += 1
            else:
                is_curr_right = False
            if right(2) and right(3):
                video_correct += 1
            else:
                is_curr_right = False
            if is_curr_right:
                group_correct += 1
        except Exception:
            continue
    return {"text": text_correct / category_all, "video": video_correct / category_all,
            "group": group_correct / category_all}  # fmt: skip


@pytest.mark.parametrize(("reader", "saved"), [("strings", lambda text: text), ("lists", lambda text: [text])])
def test_lmm_generated_answers_score_as_get_score_all(data: Path, reader: str, saved) -> None:
    """Issue 45, item 6: with reader=strings (the default) an empty answer stops its pair's scoring, as
    get_score_all.py on the strings of eval/llava-onevision.py; with reader=lists it is only wrong, as on the
    lists of eval/qwen.py; either equals the transcription on the answers saved so."""
    cases = get_benchmark("vinoground-lmm")(data, reader=reader).load()
    protocol = get_protocol("vinoground")
    rng = np.random.default_rng(11)
    replies = ["A", "B", "a", "b. the second", "", "The answer is A", " A", "C"]
    gts, responses, ours = [], [], []
    for k in range(400):
        case = cases[k % len(cases)]
        read_answer = ANSWER_READERS[case_reader(case)]
        said = [str(rng.choice(replies)) for _ in range(4)]
        gold = ["A" if case.truth[q, q] else "B" for q in range(4)]
        scores = np.full((4, 4, 3), np.nan)
        for q in range(4):
            read = read_answer(said[q], ("A", "B"))
            scores[q, q] = [-1.0, -2.0, np.nan if read is None else read]
        gts.append(gold)
        responses.append([saved(text) for text in said])
        ours.append(protocol.outcomes(case, scores)[0])
    official = _official_get_score_all(gts, responses)
    for metric in ("text", "video", "group"):
        assert np.mean([o[f"gen_{metric}"] for o in ours]) == pytest.approx(official[metric])
    assert official["text"] > 0 and official["group"] > 0  # the table exercises every branch, right answers too


def test_the_two_readings_differ_on_a_pair_with_an_empty_answer(data: Path) -> None:
    """Worked by hand: a pair whose text-score answers are "" (pos) and "B", video-score answers right. Saved as
    strings, ""[0] raises on the first check: text, video and group all 0; saved as lists, the text score is 0
    (an empty answer is wrong) and the video score 1."""
    for reader, video in (("strings", 0.0), ("lists", 1.0)):
        case = get_benchmark("vinoground-lmm")(data, reader=reader).load()[0]
        read_answer = ANSWER_READERS[case_reader(case)]
        gold = ["A" if case.truth[q, q] else "B" for q in range(4)]
        said = ["", "B", gold[2], gold[3]]
        scores = np.full((4, 4, 3), np.nan)
        for q in range(4):
            read = read_answer(said[q], ("A", "B"))
            scores[q, q] = [-1.0, -2.0, np.nan if read is None else read]
        out = get_protocol("vinoground").outcomes(case, scores)[0]
        assert (out["gen_text"], out["gen_video"], out["gen_group"]) == (0.0, video, 0.0)
        official = _official_get_score_all([gold], [[s if reader == "strings" else [s] for s in said]])
        assert (official["text"], official["video"], official["group"]) == (0.0, video, 0.0)


@pytest.mark.parametrize("ties", ["strict", "argmax"])
def test_lmm_likelihood_reading_with_ties(data: Path, ties: str) -> None:
    case = get_benchmark("vinoground-lmm")(data).load()[1]  # golds B, A, B, B
    protocol = get_protocol("vinoground", ties)
    scores = np.full((4, 4, 2), np.nan)
    for q, lps in enumerate(([-2.0, -1.0], [-1.0, -3.0], [-1.0, -1.0], [-1.5, -1.0])):  # B, A, tie, B
        scores[q, q] = lps
    out = protocol.outcomes(case, scores)[0]
    # text: B and A both right; video: the tie is no answer (strict) or A (argmax), wrong against B either way
    assert (out["text"], out["video"], out["group"]) == (1.0, 0.0, 0.0)
    scores[2, 2] = [-2.0, -1.0]
    assert protocol.outcomes(case, scores)[0] == {"text": 1.0, "video": 1.0, "group": 1.0}
    scores[1, 1] = [-1.0, -1.0]  # a tie: no answer (strict), A (argmax: the first listed), A is right here
    assert protocol.outcomes(case, scores)[0]["text"] == (1.0 if ties == "argmax" else 0.0)
    assert not protocol.nan_scores(case, scores)  # the pairs not asked are NaN by design
    scores[1, 1, 0] = np.nan
    assert protocol.nan_scores(case, scores)
