"""CREPE (Ma et al., CVPR 2023): Visual Genome crops with hard negative captions (productivity, systematicity).

A case is the crop against its caption and its negatives, caption first. CSV format, subsets and
rules: docs/loaders.md.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Iterator
from pathlib import Path

from spotdiff.benchmarks._io import first_true, images_dir, nonempty_strings, option_bool, option_choice, read_csv_rows
from spotdiff.benchmarks.base import BENCHMARKS, Benchmark, BenchmarkMetadata, LoadReport
from spotdiff.benchmarks.shared import NO_LICENCE, images_part
from spotdiff.benchmarks.sources import GIT_TREE, Checksum, Part, RemoteFile, Unpack, UrlSource, github_raw
from spotdiff.cases import Case, FileImage
from spotdiff.errors import ConfigError, DataError

PROD_TYPES = ("atom", "swap", "negate")
COMPLEXITIES = tuple(range(4, 13))
SYST_TYPES = ("atom", "comp")
#: CREPE's third systematicity type, atom + comp negatives in one list (column ``valid_hard_negs_combined``,
#: ``crepe_compo_eval_open_clip.py``'s ``gather_params``): read with option ``combined=true`` or a
#: ``syst/combined`` subset filter, so that the default does not count atom and comp negatives twice.
SYST_COMBINED = "combined"
SYST_SPLITS = ("seen", "unseen")
SYST_DATA = ("cc12m", "yfcc", "laion")

SUBSETS = (
    *(f"prod/{t}/complexity_{c}" for t in PROD_TYPES for c in COMPLEXITIES),
    *(f"prod/{t}/all" for t in PROD_TYPES),
    *(f"syst/{t}/{s}_compounds_in_{d}" for t in (*SYST_TYPES, SYST_COMBINED) for s in SYST_SPLITS for d in SYST_DATA),
)

_PROD_RE = re.compile(r"prod_vg_hard_negs_(atom|swap|negate)_complexity_(\d+)\.csv")
_PROD_ALL_RE = re.compile(r"prod_vg_hard_negs_(atom|swap|negate)_all\.csv")
_SYST_RE = re.compile(r"syst_vg_hard_negs_(seen|unseen)_compounds_in_(\w+)\.csv")
_BOX = ("x", "y", "width", "height")
SKIP_EMPTY = "row with an empty negative list"


def _variants(path: Path, combined: bool = False) -> list[tuple[str, str, dict[str, str]]]:
    """``(subset, negatives column, tags)`` for each case set a CREPE CSV holds; [] if not CREPE.

    Args:
        path: the CSV file; its name says which set it holds.
        combined: also the systematicity ``combined`` negatives.
    """
    name = path.name
    if m := _PROD_RE.fullmatch(name):
        t, c = m.group(1), int(m.group(2))
        tags = {"split": "productivity", "neg_type": t, "complexity": str(c)}
        return [(f"prod/{t}/complexity_{c}", "hard_negs", tags)]
    if m := _PROD_ALL_RE.fullmatch(name):
        t = m.group(1)
        return [(f"prod/{t}/all", "hard_negs", {"split": "productivity", "neg_type": t, "complexity": "all"})]
    if m := _SYST_RE.fullmatch(name):
        seen, data = m.group(1), m.group(2)
        return [
            (
                f"syst/{t}/{seen}_compounds_in_{data}",
                f"valid_hard_negs_{t}",
                {"split": "systematicity", "neg_type": t, "compounds": seen, "train_data": data},
            )
            for t in (*SYST_TYPES, SYST_COMBINED)
            if combined or t != SYST_COMBINED
        ]
    return []


def _matches(subset: str, wanted: str | None) -> bool:
    return wanted is None or subset == wanted or subset.startswith(wanted.rstrip("/") + "/")


CITATION = """\
@inproceedings{ma2023crepe,
  title     = {{CREPE}: Can Vision-Language Foundation Models Reason Compositionally?},
  author    = {Ma, Zixian and Hong, Jerry and Gul, Mustafa Omer and Gandhi, Mona and Gao, Irena and Krishna, Ranjay},
  booktitle = {IEEE/CVF Conference on Computer Vision and Pattern Recognition (CVPR)},
  year      = {2023}
}
"""


_REPOSITORY = ("RAIVNLab/CREPE", "1fa81c425f442396fe304f170c8eb6dc0747c814")
_ANNOTATIONS = UrlSource(
    tuple(
        RemoteFile(github_raw(*_REPOSITORY, f"data/{name}.zip"), f"{name}.zip", Checksum.parse(f"git:{blob}", GIT_TREE),
                   None, Unpack(name))
        for name, blob in (
            ("prod_hard_negatives", "e73068643923319ab8bd38a43404a34221d41b41"),
            ("syst_hard_negatives", "54eebe3a52eaacd978a08f2a5c1aaa7e53b82b4b"),
        )
    ),
    origin="github.com/RAIVNLab/CREPE",
    revision=_REPOSITORY[1],
)


@BENCHMARKS.register("crepe")
class Crepe(Benchmark):
    option_names = ("images", "combined", "empty_negatives")  # the -o options it reads
    metadata = BenchmarkMetadata(
        title="CREPE (Ma et al., CVPR 2023)",
        protocols=("i2t-top1",),
        subsets=SUBSETS,
        layout="""\
DIR/prod_hard_negatives/{atom,swap,negate}/prod_vg_hard_negs_<type>_complexity_<4..12>.csv
  -> subset prod/<type>/complexity_<n> (prod_hard_negatives/prod_vg_hard_negs_<type>_all.csv ->
  prod/<type>/all, only when that type has no per-complexity files)
DIR/syst_hard_negatives/syst_vg_hard_negs_<seen|unseen>_compounds_in_<cc12m|yfcc|laion>.csv
  -> subsets syst/atom/... (column valid_hard_negs_atom) and syst/comp/... (valid_hard_negs_comp)
  (DIR may hold them under data/ or crepe/, or be one CSV file; --subset accepts a prefix: prod/atom)
columns: image_id, x, y, width, height, caption, and the negatives as a Python-literal list
images: <images>/<image_id>.jpg (or <images>/VG_100K[_2]/<image_id>.jpg), cropped to the box;
  <images> = option images=PATH, default DIR/images
  option combined=true (or a syst/combined subset) adds syst/combined/... (valid_hard_negs_combined)
case: 1 image x (1 + negatives) texts [caption, *negatives], truth on the caption; id <subset>/<row>;
  a row with no negatives is the caption alone, a success (CREPE's code ranks it 0);
  option empty_negatives=skip skips such rows instead (counted)
tags: subset, split, neg_type, complexity (productivity), compounds + train_data (systematicity)""",
        description="CREPE: Visual Genome crops with compositional hard negatives (productivity: atom/swap/negate at "
        "complexity 4-12; systematicity), I2T top-1 (Ma et al., CREPE, CVPR 2023)",
        paper=(
            "Ma, Hong, Gul, Gandhi, Gu, Krishna. CREPE: Can Vision-Language Foundation Models Reason "
            "Compositionally? CVPR 2023"
        ),
        reference="https://github.com/RAIVNLab/CREPE",
        citation=CITATION,
        main_score=("i2t-top1", "accuracy"),
        reproduces="CREPE Figs. 3-5; VisualGPTScore Table 2",
        license=f"{NO_LICENCE}; Visual Genome images CC BY 4.0",
        parts=(
            Part("annotations", "annotations", _ANNOTATIONS, license=NO_LICENCE),
            images_part(("visual-genome", "")),
        ),
        ties="strict by default; --ties argmax gives a tie to the candidate listed first (the true caption); "
        "CREPE's get_one2many_rank (crepe_eval_utils.py, commit 1fa81c4) ranks by torch.argsort(descending=True), "
        "whose order among equal scores torch does not define",
    )

    def check_subset(self, subset: str | None) -> None:
        if subset is not None and not any(_matches(s, subset) for s in SUBSETS):
            raise ConfigError(f"benchmark 'crepe' has no subset {subset!r} (nor subsets under it)")

    # ----------------------------------------------------------------------------- files
    def _files(self) -> list[Path]:
        if self.root.is_file():
            if not _variants(self.root):
                raise DataError(
                    "not a CREPE file name (prod_vg_hard_negs_<type>_complexity_<n>.csv, ...)", file=self.root
                )
            return [self.root]
        for base in (self.root, self.root / "data", self.root / "crepe"):
            prod, syst = base / "prod_hard_negatives", base / "syst_hard_negatives"
            if prod.is_dir() or syst.is_dir():
                break
        else:
            raise DataError(f"no prod_hard_negatives/ or syst_hard_negatives/ folder in {self.root}")
        files: list[Path] = []
        if prod.is_dir():
            per_complexity = sorted(
                (p for p in prod.glob("*/*.csv") if _PROD_RE.fullmatch(p.name)),
                key=lambda p: (p.parent.name, int(_PROD_RE.fullmatch(p.name).group(2))),  # type: ignore[union-attr]
            )
            files += per_complexity
            have = {_PROD_RE.fullmatch(p.name).group(1) for p in per_complexity}  # type: ignore[union-attr]
            files += sorted(
                p
                for p in prod.glob("*.csv")
                if (m := _PROD_ALL_RE.fullmatch(p.name)) and m.group(1) not in have
            )
        if syst.is_dir():
            files += sorted(p for p in syst.glob("*.csv") if _SYST_RE.fullmatch(p.name))
        if not files:
            raise DataError(f"no CREPE CSV files under {prod.parent}")
        return files

    def data_files(self) -> list[Path]:
        return self._files()

    def _image_base(self) -> Path:
        return images_dir(self.root if self.root.is_dir() else self.root.parent, self.options)

    # ----------------------------------------------------------------------------- cases
    def cases(self, subset: str | None = None) -> Iterator[Case]:
        self.check_subset(subset)
        self.report = LoadReport()
        combined = option_bool(self.options, "combined", False) or (subset or "").startswith(f"syst/{SYST_COMBINED}")
        skip_empty = option_choice(self.options, "empty_negatives", ("score", "skip"), "score") == "skip"
        images = self._image_base()
        refs: dict[tuple, FileImage] = {}
        paths: dict[str, Path] = {}

        def image_path(image_id: str) -> Path:
            path = paths.get(image_id)
            if path is None:
                candidates = [
                    images / f"{image_id}.jpg",
                    *(images / d / f"{image_id}.jpg" for d in ("VG_100K", "VG_100K_2")),
                ]
                path = next((p for p in candidates if p.is_file()), candidates[0])
                paths[image_id] = path
            return path

        for path in self._files():
            variants = [v for v in _variants(path, combined) if _matches(v[0], subset)]
            if not variants:
                continue
            rows = read_csv_rows(path, required=("image_id", *_BOX, "caption", *(v[1] for v in variants)))
            for name, column, extra in variants:
                for n, (lineno, row) in enumerate(rows):
                    self.report.records += 1
                    where = f"line {lineno}"
                    image_id = row["image_id"].strip()
                    if not image_id:
                        raise DataError("empty image id", file=path, record=where, field="image_id")
                    box = []
                    for col in _BOX:
                        try:
                            value = float(row[col])
                        except ValueError:
                            raise DataError(
                                f"expected a number, got {row[col]!r:.40}", file=path, record=where, field=col
                            ) from None
                        if not math.isfinite(value):
                            raise DataError(
                                f"expected a finite number, got {value}", file=path, record=where, field=col
                            )
                        box.append(value)
                    if box[2] <= 0 or box[3] <= 0:
                        raise DataError(
                            f"box size must be positive, got {box[2]} x {box[3]}",
                            file=path,
                            record=where,
                            field="width" if box[2] <= 0 else "height",
                        )
                    caption = row["caption"].strip()
                    if not caption:
                        raise DataError("empty caption", file=path, record=where, field="caption")
                    negatives = self._negatives(row[column], path=path, where=where, column=column)
                    if not negatives and skip_empty:
                        self.report.skip(SKIP_EMPTY)
                        continue
                    key = (image_id, *box)
                    image = refs.get(key)
                    if image is None:
                        image = refs[key] = FileImage(image_path(image_id), bbox=tuple(box))  # type: ignore[arg-type]
                    yield Case(
                        id=f"{name}/{n}",
                        texts=(caption, *negatives),
                        truth=first_true(1 + len(negatives)),
                        images=(image,),
                        tags={"subset": name, **extra},
                    )

    @staticmethod
    def _negatives(cell: str, *, path: Path, where: str, column: str) -> list[str]:
        text = cell.strip()
        if not text:
            return []
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError) as exc:
            raise DataError(
                f"not a Python literal list: {text!r:.60} ({type(exc).__name__})",
                file=path,
                record=where,
                field=column,
            ) from None
        if not isinstance(value, (list, tuple)):
            raise DataError(
                f"expected a list of captions, got {type(value).__name__}",
                file=path,
                record=where,
                field=column,
            )
        return [s.strip() for s in nonempty_strings(value, "negative", file=path, record_id=where, name=column)]
