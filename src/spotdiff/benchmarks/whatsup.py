"""What'sUp (Kamath, Hessel, Chang, EMNLP 2023): spatial prepositions, one image against 4 (controlled) or
2 (COCO-QA, GQA-QA from Visual Genome) captions, the first true.

Reads the six JSON files of github.com/amitakamath/whatsup_vlms as its ``dataset_zoo/aro_datasets.py``
(commit 7c1f255) does. Format and rules: docs/loaders.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from spotdiff.benchmarks._io import field, first_true, images_dir, nonempty_strings, read_json
from spotdiff.benchmarks.base import BENCHMARKS, Benchmark, BenchmarkMetadata, LoadReport
from spotdiff.benchmarks.sources import ManualSource, Part
from spotdiff.cases import SET_TAG, SLOT_TAG, Case, FileImage
from spotdiff.errors import DataError

#: subset -> (annotation file, image folder, what a record is): the official classes' files.
FILES = {
    "controlled-a": ("controlled_images_dataset.json", "controlled_images", "controlled"),
    "controlled-b": ("controlled_clevr_dataset.json", "controlled_clevr", "controlled"),
    "coco-qa-one": ("coco_qa_one_obj.json", "val2017", "coco"),
    "coco-qa-two": ("coco_qa_two_obj.json", "val2017", "coco"),
    "vg-qa-one": ("vg_qa_one_obj.json", "vg_images", "vg"),
    "vg-qa-two": ("vg_qa_two_obj.json", "vg_images", "vg"),
}
SUBSETS = tuple(FILES)
_REPOSITORY = ("amitakamath/whatsup_vlms", "7c1f2550eace32e7b8c77de5a792347c402960d1")
#: A controlled subset's four prepositions as its image file names spell them (``<obj>_<prep>_<obj>.jpeg``).
SET_PREPOSITIONS = {
    "controlled-a": ("on", "under", "left_of", "right_of"),
    "controlled-b": ("in-front_of", "behind", "left_of", "right_of"),
}

CITATION = """\
@inproceedings{kamath2023whatsup,
  title     = {What's ``up'' with vision-language models? Investigating their struggle with spatial reasoning},
  author    = {Kamath, Amita and Hessel, Jack and Chang, Kai-Wei},
  booktitle = {EMNLP},
  year      = {2023}
}
"""


def set_tags(subset: str, file_name: str, path: Path, idx: int) -> dict[str, str]:
    """A controlled image's set and slot, as ``evaluate_scores`` keys its ``eval_dict``: the set is the
    file name's first and last ``_`` parts (the two objects), the slot its second part.

    >>> set_tags("controlled-a", "beer-bottle_left_of_armchair.jpeg", Path("x.json"), 0)
    {'set': 'beer-bottle|armchair', 'set_preposition': 'left'}
    """
    stem = PurePosixPath(file_name).stem
    known = SET_PREPOSITIONS[subset]
    prep = next((p for p in known if f"_{p}_" in stem), None)
    first, _, last = stem.partition(f"_{prep}_") if prep else ("", "", "")
    if prep is None or not first or not last:
        raise DataError(f"image file name {file_name!r} is not <object>_<{'|'.join(known)}>_<object>.<ext>",
                        file=path, record=idx, field="image_path")  # fmt: skip
    return {SET_TAG: f"{first}|{last}", SLOT_TAG: prep.split("_")[0]}


def preposition(subset: str, image_path: str, true_caption: str) -> str:
    """The record's preposition as the official ``evaluate_scores`` groups its accuracy.

    Controlled A/B read it from the image file name; the one-object QA sets take the true caption's
    last word; the two-object sets look for the phrase in the caption.

    >>> preposition("controlled-a", "data/controlled_images/mug_left_of_table.jpeg", "A mug left of a table")
    'left_of'
    >>> preposition("vg-qa-two", "", "A dog in front of a car")
    'front'
    """
    if subset.startswith("controlled"):
        last = ("on", "_on_", "under") if subset == "controlled-a" else ("in-front_of", "_in-front_of_", "behind")
        for name, needle in (("left_of", "left_of"), ("right_of", "right_of"), (last[0], last[1])):
            if needle in image_path:
                return name
        return last[2]
    if subset.endswith("-one"):
        return true_caption.split()[-1]
    phrases = [("left", "left of"), ("right", "right of")]
    phrases += [("above", "above")] if subset == "coco-qa-two" else [("front", "front of"), ("behind", "behind")]
    fallback = "below" if subset == "coco-qa-two" else "top"
    return next((name for name, phrase in phrases if phrase in true_caption), fallback)


@BENCHMARKS.register("whatsup")
class WhatsUp(Benchmark):
    option_names = ("images",)  # the -o options it reads
    metadata = BenchmarkMetadata(
        title="What'sUp (Kamath et al., EMNLP 2023)",
        protocols=("whatsup", "i2t-top1"),
        subsets=SUBSETS,
        layout="""\
DIR/controlled_images_dataset.json, DIR/controlled_clevr_dataset.json (subsets controlled-a, controlled-b):
  [{"image_path": "data/controlled_images/<obj>_<prep>_<obj>.jpeg", "caption_options": [4 captions]}]
  images: DIR/<last folder of image_path>/<file name> (controlled_images/, controlled_clevr/)
DIR/coco_qa_{one,two}_obj.json, DIR/vg_qa_{one,two}_obj.json (coco-qa-*, vg-qa-*):
  [[image_id, true caption, false caption], ...]; images DIR/val2017/<id, 12 digits>.jpg, DIR/vg_images/<id>.jpg
  (option images=PATH replaces DIR as the image root)
case: 1 image x the captions, the first true; id <subset>/<index>
tags: subset, preposition (as the official evaluate_scores groups accuracy); controlled images also set
  (<first object>|<last object> of the file name) and set_preposition (left, right, on, under, in-front,
  behind: the file name's second part), the keys of evaluate_scores' pair and set accuracy
protocol whatsup: accuracy (individual), pair_accuracy (both images of a pair of opposite prepositions
  right; pairs right / (N / 2)) and set_accuracy (all four images of a set right; sets right / (N / 4)),
  as evaluate_scores counts them (the last image of a set's preposition counts, a missing one is wrong)""",
        description="What'sUp: spatial prepositions (left/right/on/under/front/behind) on controlled photos and "
        "COCO / GQA images, I2T top-1 per subset (Kamath et al., What'sUp, EMNLP 2023)",
        paper='Kamath, Hessel, Chang. What\'s "up" with vision-language models? Investigating their struggle '
        "with spatial reasoning. EMNLP 2023",
        reference="https://github.com/amitakamath/whatsup_vlms",
        citation=CITATION,
        main_score=("whatsup", "accuracy"),
        reproduces="What'sUp Table 3 (individual, pair and set accuracy per subset) and Table 1 (macro averages "
        "of Controlled-A and -B, COCO-QA one- and two-object, GQA one- and two-object)",
        license="MIT (code and annotations, amitakamath/whatsup_vlms LICENSE); COCO and Visual Genome images "
        "under their own terms",
        parts=(
            Part(
                "data",
                "annotations",
                ManualSource(
                    "What'sUp annotations and images",
                    "https://drive.google.com/drive/u/3/folders/164q6X9hrvP-QYpi3ioSnfMuyHpG5oRkZ",
                    "The authors distribute the JSON files and image archives on Google Drive only (README, "
                    f"commit {_REPOSITORY[1][:7]}). Download the folder and put the six JSON files and the "
                    "controlled_images/, controlled_clevr/, val2017/ and vg_images/ folders in {target}.",
                    tuple(name for name, _, _ in FILES.values()),
                ),
                license="MIT",
            ),
        ),
        groups=(
            ("controlled", ("controlled-a", "controlled-b")),
            ("coco-qa", ("coco-qa-one", "coco-qa-two")),
            ("gqa", ("vg-qa-one", "vg-qa-two")),
        ),
        groups_source="What'sUp README (commit 7c1f255): Table 1 reports the macro averages of Controlled-A and "
        "Controlled-B, of COCO-QA one- and two-object and of GQA (the VG-QA files) one- and two-object",
        metric_sources=(
            (
                "whatsup",
                ("accuracy",),
                "Table 3's individual accuracy (Table 1 as the groupings' macro averages): "
                "evaluate_scores' np.mean(np.argmax(scores) == 0), dataset_zoo/aro_datasets.py at commit 7c1f255",
            ),
            (
                "whatsup",
                ("pair_accuracy", "set_accuracy"),
                "Table 3's pair and set accuracy of the controlled "
                "sets: evaluate_scores' pair_correct / (N / 2) and set_correct / (N / 4)",
            ),
            ("i2t-top1", ("accuracy",), "the individual accuracy alone, as protocol whatsup's"),
        ),
        ties="argmax, as What'sUp's evaluate_scores (np.argmax(scores) == 0 with the true caption first: a tie "
        "goes to it): --ties argmax; strict by default",
    )

    def data_files(self) -> list[Path]:
        files = [self.root / name for name, _, _ in FILES.values() if (self.root / name).is_file()]
        if not files:
            raise DataError(
                f"no What'sUp annotation file ({', '.join(n for n, _, _ in FILES.values())}) in {self.root}"
            )
        return files

    def cases(self, subset: str | None = None) -> Iterator[Case]:
        self.check_subset(subset)
        self.report = LoadReport()
        present = {p.name for p in self.data_files()}
        chosen = [subset] if subset else [s for s in SUBSETS if FILES[s][0] in present]
        images = images_dir(self.root, self.options, default="")
        for name in chosen:
            file, folder, kind = FILES[name]
            path = self.root / file
            if file not in present:
                raise DataError(f"subset file missing: {file}", file=path)
            data = read_json(path)
            if not isinstance(data, list):
                raise DataError(f"expected a JSON list of records, got {type(data).__name__}", file=path)
            for idx, record in enumerate(data):
                self.report.records += 1
                image, texts = _record(kind, record, path, idx)
                name_of = {"controlled": image, "coco": f"{image.zfill(12)}.jpg", "vg": f"{image}.jpg"}
                image_file = images / folder / name_of[kind]
                tags = {"subset": name, "preposition": preposition(name, image, texts[0])}
                if kind == "controlled":
                    tags.update(set_tags(name, image, path, idx))
                yield Case(f"{name}/{idx}", texts, first_true(len(texts)), (FileImage(image_file),), tags)


def _record(kind: str, record: object, path: Path, idx: int) -> tuple[str, tuple[str, ...]]:
    """``(image, captions)`` of one record: the image's file name (controlled) or id (QA sets)."""
    if kind == "controlled":
        raw = field(record, "image_path", str, file=path, record_id=idx)
        options = field(record, "caption_options", list, file=path, record_id=idx)
        texts = nonempty_strings(options, "caption", file=path, record_id=idx, name="caption_options")
        if len(texts) < 2:
            raise DataError("expected 2 or more caption options", file=path, record=idx, field="caption_options")
        return PurePosixPath(raw).name, tuple(t.strip() for t in texts)
    if not isinstance(record, list) or len(record) != 3:
        raise DataError("expected [image_id, true caption, false caption]", file=path, record=idx)
    image_id, *captions = record
    if isinstance(image_id, bool) or not isinstance(image_id, (int, str)) or not str(image_id).strip():
        raise DataError(f"expected an image id, got {image_id!r:.40}", file=path, record=idx, field="image_id")
    texts = nonempty_strings(captions, "caption", file=path, record_id=idx, name="captions")
    return str(image_id).strip(), tuple(t.strip() for t in texts)
