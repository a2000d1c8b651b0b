"""MMVP-VLM (Tong et al., "Eyes Wide Shut?", CVPR 2024): 9 visual patterns x 15 pairs of images, each
image with a statement; a CLIP-style model must match both statements to their images.

Reads ``Questions.csv`` and ``MLLM_VLM Images/<Type>/<id>.jpg`` as the authors' ``scripts/evaluate_vlm.py``
(github.com/tsb0601/MMVP, commit 7635005) does. Format and rules: docs/loaders.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from spotdiff.benchmarks._io import find_file, frozen_truth, option_bool, read_csv_rows
from spotdiff.benchmarks.base import BENCHMARKS, Benchmark, BenchmarkMetadata, LoadReport
from spotdiff.benchmarks.mmvp import CITATION  # one paper: MMVP and MMVP-VLM (Tong et al., CVPR 2024)
from spotdiff.benchmarks.sources import HubSource, Part
from spotdiff.cases import Case, FileImage
from spotdiff.errors import DataError

#: The nine patterns in evaluate_vlm.py's order; pair ``n`` (in file order) is pattern ``n // 15``.
PATTERNS = (
    "Orientation and Direction", "Presence of Specific Features", "State and Condition", "Quantity and Count",
    "Positional and Relational Context", "Color and Appearance", "Structural Characteristics", "Texts",
    "Viewpoint and Perspective",
)  # fmt: skip
PAIRS_PER_PATTERN = 15
SUBSETS = tuple(p.lower().replace(" and ", "-").replace(" ", "-") for p in PATTERNS)
#: The prompt evaluate_vlm.py puts before each statement.
PREFIX = "a photo of "
#: The image folder: evaluate_vlm.py reads "MLLM_VLM Images", the README's tree shows "MMVP_VLM_Images".
IMAGE_FOLDERS = ("MLLM_VLM Images", "MMVP_VLM_Images")
#: Images listed [even id, odd id]: protocol group's argmax rule then gives a tie to the even image, as
#: evaluate_vlm.py's ``"img1" if img1_score > 0.5 else "img2"`` does (img1 = the odd id).
_TRUTH = frozen_truth([[False, True], [True, False]])



@BENCHMARKS.register("mmvp-vlm")
class MMVPVLM(Benchmark):
    option_names = ("prefix",)  # the -o options it reads
    metadata = BenchmarkMetadata(
        title="MMVP-VLM (Tong et al., CVPR 2024)",
        protocols=("group",),
        subsets=SUBSETS,
        layout=f"""\
DIR/Questions.csv: a header, then rows <id>,<Type>,<statement>; rows 2k+1 and 2k+2 are pair k (ids odd, even)
images: DIR/MLLM_VLM Images/<Type of the pair's first row>/<id>.jpg (evaluate_vlm.py; the README's tree
  names the folder MMVP_VLM_Images, also read); Type is a folder name (Orientation, Presence, ...)
case: 2 images [even id, odd id] x 2 texts ["{PREFIX}" + statement of the odd id, of the even id]; the
  statement of id i describes image i; id <subset>/<odd id>; subset: the pattern of pair k (k // 15,
  evaluate_vlm.py's order); option prefix=false drops "{PREFIX}"
pair accuracy = the group protocol's image score (each statement picks its image)
tags: subset, type (the CSV's Type)""",
        description="MMVP-VLM: 135 CLIP-blind image pairs in 9 visual patterns, each statement must pick its "
        "image; pair accuracy per pattern (Tong et al., Eyes Wide Shut?, CVPR 2024)",
        paper="Tong, Liu, Zhai, Ma, LeCun, Xie. Eyes Wide Shut? Exploring the Visual Shortcomings of "
        "Multimodal LLMs. CVPR 2024",
        reference="https://github.com/tsb0601/MMVP",
        citation=CITATION,
        main_score=("group", "image"),
        reproduces="MMVP Table 4 (MMVP-VLM, per pattern and average)",
        license="MIT (the README of github.com/tsb0601/MMVP; its tree has no LICENSE file at commit 7635005)",
        parts=(
            Part(
                "data",
                "both",
                HubSource("MMVP/MMVP_VLM", None, ("Questions.csv", "MLLM_VLM Images/*")),
                license="MIT (README)",
                note="Questions.csv and its image folder, as evaluate_vlm.py reads them; no commit could be read "
                "when this was declared: the fetch records the commit it downloads",
            ),
        ),
        metric_sources=(
            (
                "group",
                ("image",),
                "Table 4's accuracy per pattern: evaluate_vlm.py's pairs whose two statements "
                "each pick their image (scripts/evaluate_vlm.py, commit 7635005)",
            ),
            (
                "group",
                ("text", "group"),
                "spotdiff's Winoground scores of a pair (each image picks its statement; both ways): not in the paper",
            ),
        ),
        groups=(("average", SUBSETS),),
        groups_source="MMVP Table 4 reports each pattern and their unweighted average",
        ties="evaluate_vlm.py: a statement picks img1 (the odd id) only if its softmax probability is > 0.5, "
        "so a tie goes to the even id's image; with the images listed [even, odd], --ties argmax is that rule",
    )

    def data_files(self) -> list[Path]:
        return [find_file(self.root, ("Questions.csv",), what="MMVP-VLM Questions.csv")]

    def _image_root(self) -> Path:
        """The image folder under DIR: the script's name, else the README's (the script's when neither is there)."""
        return next((self.root / f for f in IMAGE_FOLDERS if (self.root / f).is_dir()), self.root / IMAGE_FOLDERS[0])

    def cases(self, subset: str | None = None) -> Iterator[Case]:
        self.check_subset(subset)
        self.report = LoadReport()
        (path,) = self.data_files()
        prefix = PREFIX if option_bool(self.options, "prefix", True) else ""
        rows = [(line, list(row.values())) for line, row in read_csv_rows(path)]
        if len(rows) % 2:
            raise DataError(f"{len(rows)} rows: statements come in pairs", file=path)
        for k in range(0, len(rows), 2):
            self.report.records += 2
            (line1, first), (line2, second) = rows[k], rows[k + 1]
            qid1, qtype, s1 = _row(first, path, line1)
            qid2, _, s2 = _row(second, path, line2)
            if qid1 % 2 != 1 or qid2 != qid1 + 1:
                raise DataError(f"pair ids {qid1}, {qid2}: expected an odd id and the next", file=path,
                                record=f"line {line1}", field="id")  # fmt: skip
            if k // 2 >= len(PATTERNS) * PAIRS_PER_PATTERN:
                raise DataError(f"more than {len(PATTERNS) * PAIRS_PER_PATTERN} pairs", file=path,
                                record=f"line {line1}")  # fmt: skip
            name = SUBSETS[k // 2 // PAIRS_PER_PATTERN]
            if subset is not None and name != subset:
                continue
            folder = self._image_root() / qtype
            images = (FileImage(folder / f"{qid2}.jpg"), FileImage(folder / f"{qid1}.jpg"))
            yield Case(f"{name}/{qid1}", (prefix + s1, prefix + s2), _TRUTH, images, {"subset": name, "type": qtype})


def _row(cells: list[str], path: Path, line: int) -> tuple[int, str, str]:
    """``(id, type, statement)`` of one CSV row, checked."""
    if len(cells) != 3:
        raise DataError(f"expected 3 columns (id, type, statement), got {len(cells)}", file=path, record=f"line {line}")
    qid, qtype, statement = (c.strip() for c in cells)
    if not qid.isdigit():
        raise DataError(f"expected an integer id, got {qid!r:.20}", file=path, record=f"line {line}", field="id")
    for value, what in ((qtype, "type"), (statement, "statement")):
        if not value:
            raise DataError("empty", file=path, record=f"line {line}", field=what)
    return int(qid), qtype, statement
