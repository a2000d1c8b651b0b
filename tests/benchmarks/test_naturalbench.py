"""NaturalBench: the hub parquet layout (both spellings of the question-type column), the authors'
prompts, and protocol naturalbench equal to a transcription of the authors' extract_answer and
get_scores on answer tables with ties, in strict and argmax modes."""

from __future__ import annotations

import dataclasses
import io
import json
import re
import zipfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from spotdiff.benchmarks import get_benchmark
from spotdiff.benchmarks.suites import suite_benchmarks
from spotdiff.cases import ParquetImage
from spotdiff.errors import ConfigError, DataError
from spotdiff.protocols import get_protocol
from spotdiff.protocols.stats import evaluate
from spotdiff.readers.naturalbench import extract_answer
from spotdiff.testing.hub_repos import naturalbench_repo, naturalbench_retrieval_repo


def _hub(root: Path, **kw) -> Path:
    for rel, data in naturalbench_repo(**kw).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


@pytest.mark.parametrize("type_column", ["Question Type", "Question_Type"])
def test_reads_the_hub_layout(tmp_path: Path, type_column: str) -> None:
    bench = get_benchmark("naturalbench")(_hub(tmp_path, type_column=type_column))
    cases = bench.load()
    assert len(cases) == 6 == bench.report.records and [c.id for c in cases[:2]] == ["0", "1"]
    yes_no, mc = cases[0], cases[1]
    assert yes_no.tags == {"subset": "yes_no", "answers": "Yes/No", "reader": "words", "source": "Flickr30K"}
    assert mc.tags["answers"] == "A/B" and mc.subset == "multiple_choice"
    assert yes_no.truth.tolist() == [[True, False], [False, True]]  # [image][question]: q0_i0 and q1_i1 are Yes
    question = pq.read_table(tmp_path / "data/train-00000-of-00001.parquet").column("Question_0")[0].as_py()
    assert yes_no.texts[0] == question + "Please answer Yes or No."  # naturalbench_vqa.py concatenates
    assert mc.texts[1].endswith(";Please output the letter corresponding to the correct option.")
    assert isinstance(yes_no.images[1], ParquetImage) and yes_no.images[1].load().size == (40, 32)
    assert [c.id for c in get_benchmark("naturalbench")(tmp_path).load("multiple_choice")] == ["1", "3", "5"]
    spaced = get_benchmark("naturalbench")(tmp_path, suffix="lmms-eval").load()[0]
    assert spaced.texts[0] == question + " Please answer Yes or No."
    assert {"naturalbench", "naturalbench-retrieval"} <= set(suite_benchmarks("compositionality-2024"))


def test_reads_the_three_shards_of_the_main_revision_in_order(tmp_path: Path) -> None:
    cases = get_benchmark("naturalbench")(_hub(tmp_path, n=7, shards=3)).load()
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == [
        f"train-0000{k}-of-00003.parquet" for k in range(3)
    ]
    assert [c.id for c in cases] == [str(i) for i in range(7)]
    assert [c.images[0].path.name for c in cases] == ["train-00000-of-00003.parquet"] * 2 + [
        "train-00001-of-00003.parquet"
    ] * 2 + ["train-00002-of-00003.parquet"] * 3


def test_bad_records_name_file_row_and_field(tmp_path: Path) -> None:
    import pyarrow as pa

    root = _hub(tmp_path)
    path = root / "data/train-00000-of-00001.parquet"
    table = pq.read_table(path)
    golds = table.column("Image_1_Question_0").to_pylist()
    golds[2] = "Maybe"
    pq.write_table(table.set_column(table.schema.get_field_index("Image_1_Question_0"), "Image_1_Question_0",
                                    pa.array(golds)), path)  # fmt: skip
    with pytest.raises(DataError, match=r"row 2.*Image_1_Question_0|Image_1_Question_0.*row 2") as err:
        get_benchmark("naturalbench")(root).load()
    assert "Maybe" in str(err.value) and str(path) in str(err.value)
    golds[2] = "Yes"  # a valid answer, but the pattern get_scores presumes is broken
    pq.write_table(table.set_column(table.schema.get_field_index("Image_1_Question_0"), "Image_1_Question_0",
                                    pa.array(golds)), path)  # fmt: skip
    with pytest.raises(DataError, match="get_scores"):
        get_benchmark("naturalbench")(root).load()
    with pytest.raises(ConfigError, match="no subset"):
        get_benchmark("naturalbench")(root).load("open")


# ------------------------------------------------------------------ the authors' code, transcribed
def _official_extract_answer(output_string, task_type="yes_no"):
    """extract_answer of naturalbench_vqa.py (github.com/Baiqi-Li/NaturalBench, commit 9967605)."""

    def find_word_position(string, word):
        pattern = r"\b" + re.escape(word) + r"\b"
        match = re.search(pattern, string, re.IGNORECASE)
        if match:
            return match.start()
        return -1

    if task_type == "yes_no":
        position_yes_and_a = find_word_position(output_string, "yes")
        position_no_and_b = find_word_position(output_string, "no")
    else:
        position_yes_and_a = find_word_position(output_string, "A")
        position_no_and_b = find_word_position(output_string, "B")
    if position_yes_and_a == -1 and position_no_and_b == -1:
        return -1
    elif position_yes_and_a != -1 and position_no_and_b != -1:
        return 1 if position_yes_and_a < position_no_and_b else 0
    else:
        return 0 if position_yes_and_a == -1 else 1


def _official_get_scores(scores):
    """get_scores of naturalbench_vqa.py (commit 9967605), list form: [q0_i0, q0_i1, q1_i0, q1_i1]."""
    q_acc = i_acc = acc = g_acc = 0.0
    for r in scores:
        image = int(r[0] == 1.0 and r[2] == 0.0) + int(r[3] == 1.0 and r[1] == 0.0)
        question = int(r[0] == 1.0 and r[1] == 0.0) + int(r[3] == 1.0 and r[2] == 0.0)
        acc += int(r[0] == 1.0) + int(r[1] == 0.0) + int(r[2] == 0.0) + int(r[3] == 1.0)
        q_acc += question
        i_acc += image
        g_acc += int(question == 2 and image == 2)
    n = len(scores)
    return {"Q_Acc": q_acc / (n * 2), "I_Acc": i_acc / (n * 2), "Acc": acc / (n * 4), "G_Acc": g_acc / n}


TRICKY = [
    ("yes_no", "Yes"), ("yes_no", "no."), ("yes_no", "No, yes it is"), ("yes_no", "Yes, no doubt"),
    ("yes_no", "Nope, yesterday"), ("yes_no", "I cannot tell"), ("yes_no", "YES!"), ("yes_no", "nothing"),
    ("yes_no", "The answer: no; yes would be wrong"), ("yes_no", ""), ("multiple_choice", "B"),
    ("multiple_choice", "(A)"), ("multiple_choice", "It is a dog, so B"), ("multiple_choice", "Answer: B. a cat"),
    ("multiple_choice", "b"), ("multiple_choice", "AB"), ("multiple_choice", "Option B-A"),
    ("multiple_choice", "Both"), ("multiple_choice", "A.B."),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "text"), TRICKY)
def test_extract_answer_equals_the_authors(kind: str, text: str) -> None:
    answers = ("Yes", "No") if kind == "yes_no" else ("A", "B")
    said = extract_answer(text, answers)
    assert {None: -1, 0: 1, 1: 0}[said] == _official_extract_answer(text, kind)


def _official_answer(lps: np.ndarray, ties: str) -> int:
    """extract_answer's code (1: Yes/A, 0: No/B, -1: none) of a likelihood answer under a tie rule."""
    if lps[0] == lps[1]:
        return 1 if ties == "argmax" else -1
    return 1 if lps[0] > lps[1] else 0


@pytest.mark.parametrize("ties", ["strict", "argmax"])
def test_scores_equal_get_scores_with_ties(tmp_path: Path, ties: str) -> None:
    cases = get_benchmark("naturalbench")(_hub(tmp_path)).load()
    protocol = get_protocol("naturalbench", ties)
    rng = np.random.default_rng(3)
    table, ours = [], []
    for k in range(300):
        case = cases[k % len(cases)]
        lps = rng.integers(-2, 0, size=(2, 2, 2)).astype(float)  # [image, question, answer]: many ties
        table.append([_official_answer(lps[i, q], ties) for q, i in ((0, 0), (0, 1), (1, 0), (1, 1))])
        ours.append(protocol.outcomes(case, lps)[0])
    official = _official_get_scores(table)
    for ours_name, name in (("acc", "Acc"), ("q_acc", "Q_Acc"), ("i_acc", "I_Acc"), ("g_acc", "G_Acc")):
        assert np.mean([o[ours_name] for o in ours]) == pytest.approx(official[name])


def test_generated_answers_equal_get_scores(tmp_path: Path) -> None:
    cases = get_benchmark("naturalbench")(_hub(tmp_path)).load()
    protocol = get_protocol("naturalbench")
    rng = np.random.default_rng(4)
    table, ours, unparsed = [], [], 0
    for k in range(200):
        case = cases[k % len(cases)]
        said = rng.choice([0.0, 1.0, np.nan], size=(2, 2))  # the read answer: candidate index, NaN none
        scores = np.concatenate([np.zeros((2, 2, 2)), said[..., None]], axis=2)
        table.append(
            [-1 if np.isnan(said[i, q]) else int(said[i, q] == 0) for q, i in ((0, 0), (0, 1), (1, 0), (1, 1))]
        )
        ours.append(protocol.outcomes(case, scores)[0])
        assert protocol.answer_counts(case, scores) == (4, int(np.isnan(said).sum()))
        unparsed += int(np.isnan(said).sum())
    official = _official_get_scores(table)
    for ours_name, name in (("gen_acc", "Acc"), ("gen_q_acc", "Q_Acc"), ("gen_i_acc", "I_Acc"), ("gen_g_acc", "G_Acc")):
        assert np.mean([o[ours_name] for o in ours]) == pytest.approx(official[name])
    assert np.mean([o["unparsed"] for o in ours]) == pytest.approx(unparsed / 800)


def test_yes_rate_hand_worked(tmp_path: Path) -> None:
    yes_no, mc = get_benchmark("naturalbench")(_hub(tmp_path)).load()[:2]
    protocol = get_protocol("naturalbench")
    # [image, question, (Yes, No)]: (i0, q0) yes, (i0, q1) yes, (i1, q0) no, (i1, q1) a tie
    lps = np.array([[[-0.1, -3.0], [-0.5, -1.0]], [[-2.0, -0.2], [-1.0, -1.0]]])
    out = protocol.outcomes(yes_no, lps)[0]
    # answers [image][question]: [[Yes, Yes], [No, none]]; gold [[Yes, No], [No, Yes]]: right (0,0), (1,0)
    assert (out["acc"], out["yes_rate"]) == (0.5, 0.5)
    assert (out["q_acc"], out["i_acc"], out["g_acc"]) == (0.5, 0.0, 0.0)  # q0 right on both images
    assert protocol.yes_counts(yes_no, lps) == (4, 2)
    argmax = get_protocol("naturalbench", "argmax")
    assert argmax.outcomes(yes_no, lps)[0]["yes_rate"] == 0.75 and argmax.yes_counts(yes_no, lps) == (4, 3)
    assert protocol.yes_counts(mc, lps) is None and np.isnan(protocol.outcomes(mc, lps)[0]["yes_rate"])
    assert protocol.tied_units(yes_no, lps, [out]) == [True]  # the tie at (i1, q1) decides the outcome
    with pytest.raises(DataError, match=r"\(2, 2, 2 to 4\)"):
        protocol.outcomes(yes_no, np.zeros((2, 2)))


# ------------------------------------------------------------------ NaturalBench-Retrieval
def _retrieval(root: Path, n: int = 4) -> Path:
    with zipfile.ZipFile(io.BytesIO(naturalbench_retrieval_repo(n=n)["NaturalBench-Retrieval.zip"])) as zf:
        zf.extractall(root)
    return root / "NaturalBench-Retrieval"


def _official_retrieval_acc(scores_i2t: np.ndarray) -> dict[str, float]:
    """naturalbench_retrieval.py get_retrieval_scores + get_retrieval_acc (github.com/Baiqi-Li/NaturalBench,
    commit 9967605; t2v_metrics' get_winoground_scores / get_winoground_acc are the same), transcribed:
    ``scores_i2t`` is N x images x captions."""
    results = [{"c0_i0": s[0][0], "c0_i1": s[1][0], "c1_i0": s[0][1], "c1_i1": s[1][1]} for s in scores_i2t]

    def text_correct(r):
        return r["c0_i0"] > r["c1_i0"] and r["c1_i1"] > r["c0_i1"]

    def image_correct(r):
        return r["c0_i0"] > r["c0_i1"] and r["c1_i1"] > r["c1_i0"]

    text = sum(1 if text_correct(r) else 0 for r in results)
    image = sum(1 if image_correct(r) else 0 for r in results)
    group = sum(1 if image_correct(r) and text_correct(r) else 0 for r in results)
    return {"text": text / len(results), "image": image / len(results), "group": group / len(results)}


def test_retrieval_reads_the_archive_layout(tmp_path: Path) -> None:
    folder = _retrieval(tmp_path)
    cases = get_benchmark("naturalbench-retrieval")(tmp_path).load()  # the folder above, as t2v_metrics
    assert [c.id for c in cases] == ["0", "1", "2", "3"] and {c.subset for c in cases} == {"retrieval"}
    assert cases[1].images[1].path == folder / "images" / "1_1.jpg" and cases[1].images[1].load().size == (40, 32)
    assert cases[0].truth.tolist() == [[True, False], [False, True]]
    assert [c.texts for c in get_benchmark("naturalbench-retrieval")(folder).load()] == [c.texts for c in cases]
    metadata = json.loads((folder / "metadata.json").read_text())
    metadata[2]["index"] = 7
    (folder / "metadata.json").write_text(json.dumps(metadata))
    with pytest.raises(DataError, match="index 7 at position 2") as err:
        get_benchmark("naturalbench-retrieval")(folder).load()
    assert "metadata.json" in str(err.value) and "index" in str(err.value)


def test_retrieval_scores_equal_get_retrieval_acc_with_ties(tmp_path: Path) -> None:
    cases = get_benchmark("naturalbench-retrieval")(_retrieval(tmp_path)).load()
    rng = np.random.default_rng(9)
    scores = rng.integers(0, 3, size=(200, 2, 2)).astype(float)  # [sample, image, caption]; many ties
    chosen = [cases[k % len(cases)] for k in range(len(scores))]
    chosen = [dataclasses.replace(c, id=f"{c.id}-{k}") for k, c in enumerate(chosen)]
    metrics = evaluate(get_protocol("group"), chosen, list(scores), n_boot=0).metrics["all"]
    official = _official_retrieval_acc(scores)
    assert {m: metrics[m] for m in ("text", "image", "group")} == pytest.approx(
        {m: 100 * v for m, v in official.items()}
    )


def test_judged_answers_equal_get_scores_and_are_counted(tmp_path: Path) -> None:
    """A judge's verdicts (a last column: 1 yes, 0 no, NaN unparsed, -1 failed) score as get_scores scores
    the answers it grades right; unparsed and failed verdicts are counted, never right."""
    cases = get_benchmark("naturalbench")(_hub(tmp_path)).load()
    protocol = get_protocol("naturalbench")
    rng = np.random.default_rng(8)
    table, ours, counts = [], [], np.zeros(5, dtype=int)
    for k in range(200):
        case = cases[k % len(cases)]
        said = rng.choice([0.0, 1.0, np.nan], size=(2, 2))
        judged = rng.choice([1.0, 0.0, np.nan, -1.0], size=(2, 2), p=[0.5, 0.3, 0.1, 0.1])
        scores = np.concatenate([np.zeros((2, 2, 2)), said[..., None], judged[..., None]], axis=2)
        gold = np.where(case.truth, 0.0, 1.0)
        # the judge's right answers as get_scores' 1 / 0 codes: a right answer is its gold code, else the other
        right = judged == 1.0
        table.append([int(right[i, q] == (gold[i, q] == 0)) for q, i in ((0, 0), (0, 1), (1, 0), (1, 1))])
        ours.append(protocol.outcomes(case, scores)[0])
        counts += protocol.judge_counts(case, scores)
        compared = np.isin(judged, (0.0, 1.0))
        agreed = compared & ((judged == 1.0) == (said == gold))
        assert protocol.judge_counts(case, scores) == (4, int(np.isnan(judged).sum()), int((judged == -1).sum()),
                                                       int(compared.sum()), int(agreed.sum()))  # fmt: skip
    official = _official_get_scores(table)
    for ours_name, name in (("judge_acc", "Acc"), ("judge_q_acc", "Q_Acc"), ("judge_i_acc", "I_Acc"),
                            ("judge_g_acc", "G_Acc")):  # fmt: skip
        assert np.mean([o[ours_name] for o in ours]) == pytest.approx(official[name])
    assert np.mean([o["judge_unparsed"] for o in ours]) == pytest.approx(counts[1] / 800)
    assert np.mean([o["judge_failed"] for o in ours]) == pytest.approx(counts[2] / 800)
    unjudged = protocol.outcomes(cases[0], np.zeros((2, 2, 3)))[0]
    assert (
        not any(m.startswith("judge_") for m in unjudged)
        and protocol.judge_counts(cases[0], np.zeros((2, 2, 3))) is None
    )
