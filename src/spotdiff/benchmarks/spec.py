"""SPEC (Peng et al., CVPR 2024, papers/002): K-way candidate sets differing in size, position, existence or count.

The released files list I2T and T2I queries; the loader regroups them into K x K cases (partial
groups stay one case per query) and reads the ``cls`` task when asked for. Format and grouping
rules: docs/loaders.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from dataclasses import field as dc_field
from pathlib import Path

import numpy as np

from spotdiff.benchmarks._io import field, read_json
from spotdiff.benchmarks.base import BENCHMARKS, Benchmark, BenchmarkMetadata, LoadReport
from spotdiff.benchmarks.sources import HubSource, Part, Unpack
from spotdiff.cases import Case, FileImage
from spotdiff.errors import DataError

SUBSETS = ("absolute_size", "relative_size", "absolute_spatial", "relative_spatial", "existence", "count")
#: Candidate-set size K per subset (paper Sec. 3.3 / Table 1: size 3, relative position 4, absolute
#: position and count 9, existence 2); chance level of I2T / T2I is 1 / K.
SPEC_K = {
    "absolute_size": 3,
    "relative_size": 3,
    "absolute_spatial": 9,
    "relative_spatial": 4,
    "existence": 2,
    "count": 9,
}
_DIMENSION = {
    "absolute_size": "size",
    "relative_size": "size",
    "absolute_spatial": "position",
    "relative_spatial": "position",
    "existence": "existence",
    "count": "count",
    "cls": "object",
}
#: folders read only when asked for (subset ``cls`` or DIR = the folder): see docs/loaders.md
EXTRA_SUBSETS = ("cls",)
_FOLDERS = SUBSETS + EXTRA_SUBSETS
I2T_FILE = "image2text.json"
T2I_FILE = "text2image.json"


@dataclass
class _Record:
    index: int
    query: str
    keys: list[str]
    label: int


def _answers(records: list[_Record], path: Path, what: Callable[[str], str],
             check: Callable[[_Record], None]) -> dict[str, str]:
    """Query -> the candidate its label picks, over one candidate set's records of one file.

    Args:
        records: the records, in file order.
        path: their file, named in errors.
        what: how an error names a query.
        check: called on each record first; raises a DataError for an inconsistent one.
    """
    out: dict[str, str] = {}
    for rec in records:
        check(rec)
        if rec.query in out:
            raise DataError(f"{what(rec.query)} is queried twice in one candidate set", file=path, record=rec.index,
                            field="query")
        out[rec.query] = rec.keys[rec.label]
    return out


@dataclass
class _Group:
    images: list[str]  # the first text2image record's key order
    t2i: list[_Record] = dc_field(default_factory=list)
    i2t: list[_Record] = dc_field(default_factory=list)


def _records(path: Path) -> list[_Record]:
    data = read_json(path)
    if not isinstance(data, list):
        raise DataError(f"expected a JSON list of records, got {type(data).__name__}", file=path)
    out = []
    for i, record in enumerate(data):
        query = field(record, "query", str, file=path, record_id=i)
        keys = field(record, "keys", list, file=path, record_id=i)
        label = field(record, "label", int, file=path, record_id=i)
        if len(keys) < 2:
            raise DataError(
                f"expected at least 2 candidates, got {len(keys)}", file=path, record=i, field="keys"
            )
        for k, key in enumerate(keys):
            if not isinstance(key, str) or not key.strip():
                raise DataError(
                    f"candidate {k} is not a non-empty string: {key!r:.60}", file=path, record=i, field="keys"
                )
        if len(set(keys)) != len(keys):
            raise DataError("the same candidate appears twice", file=path, record=i, field="keys")
        if not 0 <= label < len(keys):
            raise DataError(
                f"label {label} is out of range for {len(keys)} candidates",
                file=path,
                record=i,
                field="label",
            )
        out.append(_Record(i, query, keys, label))
    return out


CITATION = """\
@inproceedings{peng2024synthesize,
  title     = {Synthesize, Diagnose, and Optimize: Towards Fine-Grained Vision-Language Understanding},
  author    = {Peng, Wujian and Xie, Sicheng and You, Zuyao and Lan, Shiyi and Wu, Zuxuan},
  booktitle = {IEEE/CVF Conference on Computer Vision and Pattern Recognition (CVPR)},
  year      = {2024}
}
"""


@BENCHMARKS.register("spec")
class Spec(Benchmark):
    metadata = BenchmarkMetadata(
        title="SPEC (Peng et al., CVPR 2024)",
        protocols=("spec",),
        subsets=_FOLDERS,
        layout="""\
DIR/<subset>/{image2text.json,text2image.json} for absolute_size relative_size absolute_spatial
  relative_spatial existence count (DIR may also hold them under data/, or be one subset folder);
  a subset folder may be absent; one with neither file is a DataError
DIR/cls/image2text.json: object classification (SPEC Table 2 "cls", keys "a photo of a {class}."),
  read only with --subset cls or DIR = the cls folder; "all" is the six subsets
  image2text.json: [{"query": image path, "keys": [K captions], "label": caption index}]
  text2image.json: [{"query": caption, "keys": [K image paths], "label": image index}]
images: paths relative to the subset folder
case: the text2image image sets group the records; a set whose K images are all image2text queries
  and whose K captions are all text2image queries, with agreeing labels, is one K x K case with
  diagonal truth (id <subset>/set<n>); other records are one case each, 1 x K (image2text, id
  <subset>/i2t/<index>) or K x 1 (text2image, id <subset>/t2i/<index>)
tags: subset, dimension (size/position/existence/count), k, form (set/i2t/t2i)""",
        description="SPEC: K-way synthetic image and caption candidate sets for size, position, existence and count; "
        "I2T and T2I accuracy (Peng et al., Synthesize, Diagnose, and Optimize, CVPR 2024)",
        paper=(
            "Peng, Xie, You, Lan, Wu. Synthesize, Diagnose, and Optimize: Towards Fine-Grained Vision-"
            "Language Understanding. CVPR 2024"
        ),
        reference="https://github.com/wjpoom/SPEC",
        citation=CITATION,
        main_score=("spec", "i2t"),
        reproduces="SPEC Tables 2-4",
        license="Apache-2.0 (the hub dataset card); no licence file in the GitHub repository",
        parts=(
            Part(
                "data",
                "both",
                HubSource("wjpoom/SPEC", "694dfdc74fe72acdc932fd5fc919b6b0268f7a07", ("data.zip",),
                          unpack=(("data.zip", Unpack("")),)),
                note="data.zip (about 1.56 GB, as the SPEC README downloads it), unpacked into the six subset "
                "folders",
            ),
        ),
        groups=(),
        groups_source="SPEC Table 3 reports the unweighted mean over the six subsets (spec/eval.py: the sum of "
        "the subset accuracies / their number): metrics.json 'subset_mean'",
        ties="SPEC's code takes argmax (spec/models/*_wrapper.py: scores.argmax(dim=-1) == label; a tie goes to "
        "the candidate listed first): --ties argmax reproduces it; strict by default",
    )

    # ----------------------------------------------------------------------------- files
    def _base(self) -> Path:
        for candidate in (self.root, self.root / "data"):
            if any((candidate / s).is_dir() for s in _FOLDERS):
                return candidate
        if self.root.name in _FOLDERS and any((self.root / f).is_file() for f in (I2T_FILE, T2I_FILE)):
            return self.root.parent
        raise DataError(f"no SPEC subset folder ({', '.join(SUBSETS)}) in {self.root}")

    def _folders(self, subset: str | None) -> list[tuple[str, Path]]:
        base = self._base()
        one_folder = self.root.name in _FOLDERS and base == self.root.parent
        if subset:
            names: tuple[str, ...] = (subset,)
        elif one_folder:
            names = (self.root.name,)
        else:
            names = SUBSETS  # the cls folder only when asked for
        out = []
        for name in names:
            folder = base / name
            if not folder.is_dir():
                if subset:
                    raise DataError(f"subset folder missing: {folder}")
                continue
            if one_folder and name != self.root.name:
                continue  # DIR is one subset folder: read only that one
            if not (folder / I2T_FILE).is_file() and not (folder / T2I_FILE).is_file():
                raise DataError(f"subset folder has neither {I2T_FILE} nor {T2I_FILE}: {folder}")
            out.append((name, folder))
        return out

    def data_files(self) -> list[Path]:
        folders = [folder for _, folder in self._folders(None)]
        base = self._base()
        if not (self.root.name in _FOLDERS and base == self.root.parent):
            folders += [base / name for name in EXTRA_SUBSETS if (base / name).is_dir()]
        return [folder / f for folder in folders for f in (I2T_FILE, T2I_FILE) if (folder / f).is_file()]

    # ----------------------------------------------------------------------------- cases
    def cases(self, subset: str | None = None) -> Iterator[Case]:
        self.check_subset(subset)
        self.report = LoadReport()
        for name, folder in self._folders(subset):
            yield from self._subset_cases(name, folder)

    def _subset_cases(self, name: str, folder: Path) -> Iterator[Case]:
        i2t_path, t2i_path = folder / I2T_FILE, folder / T2I_FILE
        i2t = _records(i2t_path) if i2t_path.is_file() else []
        t2i = _records(t2i_path) if t2i_path.is_file() else []
        self.report.records += len(i2t) + len(t2i)
        refs: dict[str, FileImage] = {}

        def ref(rel: str) -> FileImage:
            image = refs.get(rel)
            if image is None:
                image = refs[rel] = FileImage(folder / rel)
            return image

        def tags(form: str, k: int) -> dict[str, str]:
            return {"subset": name, "dimension": _DIMENSION[name], "k": str(k), "form": form}

        # 1. text2image records grouped by their image set
        groups: dict[frozenset[str], _Group] = {}
        group_of_image: dict[str, frozenset[str]] = {}
        for rec in t2i:
            key = frozenset(rec.keys)
            group = groups.get(key)
            if group is None:
                group = groups[key] = _Group(images=list(rec.keys))
                for image in rec.keys:
                    if image in group_of_image:
                        raise DataError(
                            f"image {image!r} belongs to two different candidate image sets",
                            file=t2i_path,
                            record=rec.index,
                            field="keys",
                        )
                    group_of_image[image] = key
            group.t2i.append(rec)

        # 2. image2text records join the group holding their query image
        loose_i2t: list[_Record] = []
        for rec in i2t:
            key = group_of_image.get(rec.query)
            if key is None:
                loose_i2t.append(rec)
            else:
                groups[key].i2t.append(rec)

        # 3. complete groups become K x K cases; 4. everything else is one case per record
        partial_t2i: list[_Record] = []
        for n, group in enumerate(groups.values()):
            case = self._set_case(group, i2t_path, t2i_path)
            if case is None:
                loose_i2t.extend(group.i2t)
                partial_t2i.extend(group.t2i)
                continue
            images, texts, truth = case
            yield Case(
                id=f"{name}/set{n}",
                texts=tuple(texts),
                truth=truth,
                images=tuple(ref(p) for p in images),
                tags=tags("set", len(images)),
            )
        for rec in sorted(loose_i2t, key=lambda r: r.index):
            truth = np.zeros((1, len(rec.keys)), dtype=bool)
            truth[0, rec.label] = True
            yield Case(
                id=f"{name}/i2t/{rec.index}",
                texts=tuple(rec.keys),
                truth=truth,
                images=(ref(rec.query),),
                tags=tags("i2t", len(rec.keys)),
            )
        for rec in sorted(partial_t2i, key=lambda r: r.index):
            truth = np.zeros((len(rec.keys), 1), dtype=bool)
            truth[rec.label, 0] = True
            yield Case(
                id=f"{name}/t2i/{rec.index}",
                texts=(rec.query,),
                truth=truth,
                images=tuple(ref(p) for p in rec.keys),
                tags=tags("t2i", len(rec.keys)),
            )

    @staticmethod
    def _set_case(
        group: _Group, i2t_path: Path, t2i_path: Path
    ) -> tuple[list[str], list[str], np.ndarray] | None:
        """The K x K case of a complete group, None for a partial one; DataError if inconsistent."""
        captions = list(group.i2t[0].keys) if group.i2t else None
        caption_set = frozenset(captions) if captions is not None else None

        def same_captions(rec: _Record) -> None:
            if frozenset(rec.keys) != caption_set:
                raise DataError("image2text records of one candidate image set list different caption sets",
                                file=i2t_path, record=rec.index, field="keys")

        def among_captions(rec: _Record) -> None:
            if caption_set is not None and rec.query not in caption_set:
                raise DataError(f"caption {rec.query!r:.60} is not among the image2text candidates of its image set",
                                file=t2i_path, record=rec.index, field="query")

        image_to_caption = _answers(group.i2t, i2t_path, lambda q: f"image {q!r}", same_captions)
        caption_to_image = _answers(group.t2i, t2i_path, lambda q: f"caption {q!r:.60}", among_captions)
        if captions is None:
            return None
        images = group.images
        complete = (
            len(images) == len(captions)
            and set(image_to_caption) == set(images)
            and set(caption_to_image) == set(captions)
        )
        if not complete:
            return None
        for caption, image in caption_to_image.items():
            if image_to_caption[image] != caption:
                rec = next(r for r in group.t2i if r.query == caption)
                raise DataError(
                    f"labels disagree: text2image matches caption {caption!r:.60} with image {image!r}, "
                    f"but image2text matches that image with {image_to_caption[image]!r:.60}",
                    file=t2i_path,
                    record=rec.index,
                    field="label",
                )
        texts = [image_to_caption[image] for image in images]
        truth = np.eye(len(images), dtype=bool)
        return images, texts, truth
