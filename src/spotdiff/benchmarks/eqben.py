"""EqBen (Wang et al., ICCV 2023, papers/000): image pairs with a visual minimal change, 2 x 2 cases.

Reads the Winoground-style annotation files and the randomized full set (rebuilt into 2 x 2 cases
with EqBen's ground-truth files). Formats and rules: docs/loaders.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from spotdiff.benchmarks._io import field, find_file, read_json
from spotdiff.benchmarks.base import BENCHMARKS, Benchmark, BenchmarkMetadata, LoadReport, pair_case
from spotdiff.benchmarks.metadata import CHOICE_READING
from spotdiff.benchmarks.sources import Part, RemoteFile, Unpack, UrlSource, google_drive
from spotdiff.cases import Case, FileImage, ImageRef, NpyImage
from spotdiff.errors import ConfigError, DataError

SUBSETS = (
    "eqbenag",
    "eqbenyoucook2",
    "eqbengebc",
    "eqbenkubric_cnt",
    "eqbenkubric_loc",
    "eqbenkubric_attr",
    "eqbensd",
)
#: Paper Sec. 3: natural (video) vs synthetic (graphics engine / diffusion) sub-datasets.
_KIND = {
    "eqbenag": "natural",
    "eqbenyoucook2": "natural",
    "eqbengebc": "natural",
    "eqbenkubric_cnt": "synthetic",
    "eqbenkubric_loc": "synthetic",
    "eqbenkubric_attr": "synthetic",
    "eqbensd": "synthetic",
}
#: t2v_metrics groups the three Kubric splits as one family ("eqbenk").
_FAMILY = {s: ("eqbenkubric" if s.startswith("eqbenkubric") else s) for s in SUBSETS}

PAIRED_FILES = ("all_select.json", "eqben_subset_10percent_final.json", "private_info_global.json")
FULL_FILE = "ann_json_finegrained_random.json"
ANNOTATION_FILES = (
    *PAIRED_FILES,
    FULL_FILE,
    *(f"eqben_vllm/{n}" for n in PAIRED_FILES[:1]),
)
PRIVATE_IDX = "private_random_idx.json"
PRIVATE_INFO = "private_info.json"
_SLOTS = ("c0i0", "c0i1", "c1i0", "c1i1")

def _image_ref(base: Path, rel: str) -> ImageRef:
    path = base / rel
    if path.suffix.lower() == ".npy":
        return NpyImage(path, bgr=True)
    return FileImage(path)


def _image_pair(base: Path, image0: str, image1: str) -> tuple[ImageRef, ImageRef]:
    return _image_ref(base, image0), _image_ref(base, image1)


def _caption(record: Any, name: str, *, file: Path, record_id: object) -> str:
    value = field(record, name, (str, list), file=file, record_id=record_id)
    if isinstance(value, list):
        if not value or not all(isinstance(v, str) and v.strip() for v in value):
            raise DataError(
                "a caption list must hold non-empty strings", file=file, record=record_id, field=name
            )
        value = value[0]
    return value


def _subset_of(path: str, *, file: Path, record_id: object, name: str) -> str:
    subset = path.split("/")[0]
    if subset not in SUBSETS:
        raise DataError(f"unknown EqBen sub-dataset {subset!r} (first path component); known: {', '.join(SUBSETS)}",
                        file=file, record=record_id, field=name)
    return subset


def _tags(subset: str, fmt: str) -> dict[str, str]:
    return {"subset": subset, "kind": _KIND[subset], "family": _FAMILY[subset], "format": fmt}


#: The paper and repository, shared with the clip reading of the same pairs (``eqben-clips``).
PAPER = (
    "Wang, Lin, Li, Lin, Yang, Zhang, Liu, Wang. Equivariant Similarity for Vision-Language Foundation Models. "
    "ICCV 2023"
)
REFERENCE = "https://github.com/Wangt-CN/EqBen"
CITATION = """\
@inproceedings{wang2023equivariant,
  title     = {Equivariant Similarity for Vision-Language Foundation Models},
  author    = {Wang, Tan and Lin, Kevin and Li, Linjie and Lin, Chung-Ching and Yang, Zhengyuan and
               Zhang, Hanwang and Liu, Zicheng and Wang, Lijuan},
  booktitle = {IEEE/CVF International Conference on Computer Vision (ICCV)},
  year      = {2023}
}
"""


_PARTS = (
    Part(
        "annotations",
        "annotations",
        UrlSource(
            (RemoteFile(google_drive("18BSRf1SnBtGiEc42mzRLirXaBLzYE5Tt"), "eqben_subset_10percent_final.json"),),
            origin="Google Drive link of the EqBen README (10% subset, Winoground style)",
        ),
        note="the open-label 10% subset (~25K pairs); no checksum could be checked offline",
    ),
    Part(
        "images",
        "images",
        UrlSource(
            (RemoteFile(google_drive("13Iuirsvx34-9F_1Mjhs4Dqn59yokyUjy"), "eqben_subset_images.tar.gz",
                        None, None, Unpack("images")),),
            origin="Google Drive link of the EqBen README (subset images, ~10 GB)",
        ),
    ),
    Part(
        "full",
        "both",
        UrlSource(
            (
                RemoteFile(google_drive("1gNR4K2Cv4rbnjVRdHuBV6PuoJ5MlRXnZ"), "full/private_info_global.json"),
                RemoteFile(google_drive("1e608uhd36ak_v7SnlMVaYcekBc4gBqzn"), "eqben_full_images.tar.gz",
                           None, None, Unpack("full/images")),
            ),
            origin="Google Drive links of the EqBen README (full test set: original annotation and images, ~100 GB)",
        ),
        optional=True,
        note="evaluate with --data $(spotdiff data path eqben)/full",
    ),
    Part(
        "vllm",
        "both",
        UrlSource(
            (RemoteFile(google_drive("11YUTf06uzRHtFV8rYi96z4vTPi8_GNEM"), "eqben_vllm.zip", None, None,
                        Unpack("vllm", ("all_select.json", "images"))),),
            origin="Google Drive file that t2v_metrics' EqBen_Mini downloads",
        ),
        optional=True,
        note="t2v_metrics' EqBen_Mini set; evaluate with --data $(spotdiff data path eqben)/vllm",
    ),
)


@BENCHMARKS.register("eqben")
class EqBen(Benchmark):
    option_names = ("file", "images", "private")  # the -o options it reads
    metadata = BenchmarkMetadata(
        title="EqBen (Wang et al., ICCV 2023)",
        protocols=("group", "choice", "choice-text"),
        subsets=SUBSETS,
        layout="""\
DIR/all_select.json (t2v_metrics eqben_vllm), DIR/eqben_subset_10percent_final.json (10% subset) or
  DIR/private_info_global.json; or DIR may be the annotation file itself (option file=NAME picks one)
  Winoground style: [{"image0": "<subset>/...", "image1": ..., "caption0": str, "caption1": str}]
  <subset> = image0.split('/')[0]: eqbenag eqbenyoucook2 eqbengebc eqbenkubric_cnt eqbenkubric_loc
  eqbenkubric_attr eqbensd (anything else is a DataError)
DIR/ann_json_finegrained_random.json (randomized full set, [{"image", "caption"}]) needs the EqBen
  repository's ground truth src_file/private_random_idx.json + src_file/private_info.json beside it
  (or option private=DIR) to rebuild its 2 x 2 samples; without them it has no ground truth
images: option images=PATH, else <annotation dir>/images if present, else <annotation dir>;
  .npy = BGR array (YouCook2)
case: 2 images x 2 texts [caption0, caption1], diagonal truth; id = record index (sample_cnt for
  the full set)
tags: subset, kind (natural/synthetic), family (eqbenkubric for the 3 Kubric splits), format""",
        description="EqBen: image pairs with visual-minimal changes from video and synthetic engines, 2 x 2 "
        "Winoground-style cases (Wang et al., Equivariant Similarity for VL Foundation Models, ICCV 2023)",
        paper=PAPER,
        reference=REFERENCE,
        citation=CITATION,
        main_score=("group", "group"),
        reproduces="EqBen Table 2 and Fig. 6",
        license="Apache-2.0 (repository); data terms not stated",
        parts=_PARTS,
        readings=(CHOICE_READING,),
        ties="strict, as EqBen's evaluation code (eval_batch_my.py: c0_i0 > c1_i0 ...); MTEB-style argmax "
        "(each image's argmax text, each text's argmax image, first listed wins a tie): --ties argmax",
    )

    # ----------------------------------------------------------------------------- files
    def _annotation(self) -> Path:
        name = self.options.get("file")
        if name:
            path = Path(str(name))
            if not path.is_absolute() and not path.is_file():
                path = self.root / path
            if not path.is_file():
                raise DataError(f"annotation file not found: {path}")
            return path
        return find_file(self.root, ANNOTATION_FILES, what="EqBen annotation file")

    def _images(self, ann: Path) -> Path:
        value = self.options.get("images")
        if value:
            return Path(str(value)).expanduser()
        base = ann.parent
        return base / "images" if (base / "images").is_dir() else base

    def _private_files(self, ann: Path) -> tuple[Path, Path] | None:
        value = self.options.get("private")
        dirs = [Path(str(value)).expanduser()] if value else [ann.parent, ann.parent / "src_file"]
        for d in dirs:
            if (d / PRIVATE_IDX).is_file() and (d / PRIVATE_INFO).is_file():
                return d / PRIVATE_IDX, d / PRIVATE_INFO
        if value:
            raise ConfigError(f"option private={value}: no {PRIVATE_IDX} + {PRIVATE_INFO} there")
        return None

    def data_files(self) -> list[Path]:
        ann = self._annotation()
        files = [ann]
        private = self._private_files(ann)
        if private is not None and self._is_full(read_json(ann)):
            files.extend(private)
        return files

    @staticmethod
    def _is_full(data: Any) -> bool:
        return isinstance(data, list) and bool(data) and isinstance(data[0], dict) and "image0" not in data[0]

    # ----------------------------------------------------------------------------- cases
    def cases(self, subset: str | None = None) -> Iterator[Case]:
        self.check_subset(subset)
        self.report = LoadReport()
        ann = self._annotation()
        data = read_json(ann)
        if not isinstance(data, list):
            raise DataError(f"expected a JSON list of records, got {type(data).__name__}", file=ann)
        if self._is_full(data):
            yield from self._full_cases(ann, data, subset)
        else:
            yield from self._paired_cases(ann, data, subset)

    def _paired_cases(self, ann: Path, data: list, subset: str | None) -> Iterator[Case]:
        base = self._images(ann)
        for i, record in enumerate(data):
            self.report.records += 1
            image0 = field(record, "image0", str, file=ann, record_id=i)
            image1 = field(record, "image1", str, file=ann, record_id=i)
            caption0 = _caption(record, "caption0", file=ann, record_id=i)
            caption1 = _caption(record, "caption1", file=ann, record_id=i)
            name = _subset_of(image0, file=ann, record_id=i, name="image0")
            other = _subset_of(image1, file=ann, record_id=i, name="image1")
            if other != name:
                raise DataError(f"image1 is in sub-dataset {other!r} but image0 in {name!r}",
                                file=ann, record=i, field="image1")
            if subset is not None and name != subset:
                continue
            yield pair_case(str(i), (caption0, caption1), _image_pair(base, image0, image1), _tags(name, "paired"))

    def _full_cases(self, ann: Path, data: list, subset: str | None) -> Iterator[Case]:
        private = self._private_files(ann)
        if private is None:
            raise DataError(
                "this is EqBen's randomized full set: its (image, caption) entries are the four "
                "combinations of each sample, shuffled, with no ground truth. Put the EqBen repository's "
                f"src_file/{PRIVATE_IDX} and src_file/{PRIVATE_INFO} beside it (or pass option "
                "private=DIR), or use a Winoground-style file (all_select.json, "
                "eqben_subset_10percent_final.json, private_info_global.json)",
                file=ann,
            )
        idx_file, info_file = private
        perm = read_json(idx_file)
        info = read_json(info_file)
        n = len(data)
        if not isinstance(perm, list) or len(perm) != n:
            raise DataError(f"expected a list of {n} indices (one per annotation entry)", file=idx_file)
        if not isinstance(info, list) or len(info) != n:
            raise DataError(f"expected a list of {n} records (one per annotation entry)", file=info_file)
        if any(isinstance(p, bool) or not isinstance(p, int) for p in perm) or sorted(perm) != list(range(n)):
            raise DataError(f"expected a permutation of 0..{n - 1}", file=idx_file)

        base = self._images(ann)
        samples: dict[int, dict[str, tuple[str, str, int]]] = {}
        sample_subset: dict[int, str] = {}
        for i, record in enumerate(data):
            self.report.records += 1
            image = field(record, "image", str, file=ann, record_id=i)
            caption = _caption(record, "caption", file=ann, record_id=i)
            j = perm[i]
            meta = info[j]
            dataset = field(meta, "dataset", str, file=info_file, record_id=j)
            slot = field(meta, "name", str, file=info_file, record_id=j)
            cnt = field(meta, "sample_cnt", int, file=info_file, record_id=j)
            if dataset not in SUBSETS:
                raise DataError(
                    f"unknown EqBen sub-dataset {dataset!r}", file=info_file, record=j, field="dataset"
                )
            if slot not in _SLOTS:
                raise DataError(
                    f"expected one of {', '.join(_SLOTS)}", file=info_file, record=j, field="name"
                )
            name = _subset_of(image, file=ann, record_id=i, name="image")
            if name != dataset:
                raise DataError(f"image is in sub-dataset {name!r} but the ground truth says {dataset!r}",
                                file=ann, record=i, field="image")
            slots = samples.setdefault(cnt, {})
            if slot in slots:
                raise DataError(
                    f"sample {cnt} has two {slot} entries", file=info_file, record=j, field="name"
                )
            if sample_subset.setdefault(cnt, dataset) != dataset:
                raise DataError(
                    f"sample {cnt} mixes sub-datasets {sample_subset[cnt]!r} and {dataset!r}",
                    file=info_file,
                    record=j,
                    field="dataset",
                )
            slots[slot] = (image, caption, i)

        for cnt in sorted(samples):
            slots = samples[cnt]
            missing = [s for s in _SLOTS if s not in slots]
            if missing:
                raise DataError(
                    f"sample {cnt} lacks {', '.join(missing)}", file=info_file, record=cnt, field="name"
                )
            image0, caption0 = slots["c0i0"][0], slots["c0i0"][1]
            image1, caption1 = slots["c1i1"][0], slots["c1i1"][1]
            checks = (
                ("c1i0", 0, image0, "image"),
                ("c0i1", 0, image1, "image"),
                ("c0i1", 1, caption0, "caption"),
                ("c1i0", 1, caption1, "caption"),
            )
            for slot, k, expected, what in checks:
                if slots[slot][k] != expected:
                    raise DataError(
                        f"sample {cnt}: the {slot} entry's {what} {slots[slot][k]!r:.60} differs from "
                        f"{expected!r:.60} of the matching entry",
                        file=ann,
                        record=slots[slot][2],
                        field=what,
                    )
            name = sample_subset[cnt]
            if subset is not None and name != subset:
                continue
            yield pair_case(str(cnt), (caption0, caption1), _image_pair(base, image0, image1), _tags(name, "full"))
