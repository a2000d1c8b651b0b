"""VL-CheckList (Zhao et al., arXiv:2207.00221): positive and negative phrases about objects, attributes, relations.

Reads the yaml corpus and its annotation files, one case per record (``pairs=first``, the official
ITC evaluation) or per pair. Format and rules: docs/loaders.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

from spotdiff.benchmarks._io import (
    first_true,
    images_dir,
    option_bool,
    option_choice,
    option_int,
    read_json,
    read_text,
)
from spotdiff.benchmarks.base import BENCHMARKS, Benchmark, BenchmarkMetadata, LoadReport
from spotdiff.benchmarks.shared import NO_LICENCE, images_part, pinned_annotations
from spotdiff.benchmarks.sources import ManualSource, Part
from spotdiff.cases import Case, FileImage
from spotdiff.errors import ConfigError, DataError

_ROLES = ("pos", "neg")

SUBSETS = (
    "Attribute/action",
    "Attribute/color",
    "Attribute/material",
    "Attribute/size",
    "Attribute/state",
    "Object/Location",
    "Object/Size",
    "Relation/action",
    "Relation/spatial",
)
SKIP_MISSING = "annotation file missing"
SKIP_NO_IMAGE = "image missing"
SKIP_PAST_MAX = "past max_per_corpus"
#: The official sample configuration's cap: ``configs/sample.yaml`` sets ``MAX_NUM: 2000`` and
#: ``vl_checklist/evaluate.py`` (commit 6f8d6a3) keeps ``d.data[name][:int(max_number/2)]`` for task itc.
OFFICIAL_MAX_PER_CORPUS = 1000


@dataclass(frozen=True)
class CorpusEntry:
    """One corpus yaml file: where its annotations and images are and how it is grouped."""

    yaml_path: Path
    folder: str  # the yaml's folder below corpus/v1, e.g. "Object/Location/center"
    corpus: str  # e.g. "Object_Location_center_vg_obj" (the name corpus.json uses)
    category: str  # Object / Attribute / Relation
    subset: str  # e.g. "Object/Location"
    variant: str  # center/mid/margin or large/medium/small for Object, else ""
    source: str  # vg / vaw / swig / hake
    anno_path: Path
    img_root: str

    def tags(self) -> dict[str, str]:
        tags = {
            "subset": self.subset,
            "category": self.category,
            "source": self.source,
            "corpus": self.corpus,
        }
        if self.variant:
            tags["variant"] = self.variant
        return tags


CITATION = """\
@article{zhao2022vlchecklist,
  title   = {{VL-CheckList}: Evaluating Pre-trained Vision-Language Models with Objects, Attributes and Relations},
  author  = {Zhao, Tiancheng and Zhang, Tianqi and Zhu, Mingwei and Shen, Haozhan and Lee, Kyusong and
             Lu, Xiaopeng and Yin, Jianwei},
  journal = {arXiv preprint arXiv:2207.00221},
  year    = {2022}
}
"""


_REPOSITORY = ("om-ai-lab/VL-CheckList", "6f8d6a3281c401b89e4e154f46c6974ec2df3a82")


_HAKE = Part(
    "images-hake",
    "images",
    ManualSource(
        "HAKE images",
        "https://github.com/DirtyHarryLYL/HAKE/tree/master/Images#download-images-for-hake",
        "HAKE's images come from HICO-DET, V-COCO, OpenImages, HCVRD, PIC and HAKE's own crawl, each "
        "with its own download (some by request). Follow "
        "https://github.com/DirtyHarryLYL/HAKE/tree/master/Images#download-images-for-hake and put "
        "them under {target}/images/hake/ as hake_images_20190730/, hake_images_20200614/, hcvrd/, "
        "hico_20160224_det/images/{{train2015,test2015}}/, openimages/, pic/ and vcoco/{{train2014,"
        "val2014}}/ (VL-CheckList DATASETS.md).",
        ("images/hake/hake_images_20190730", "images/hake/hcvrd", "images/hake/hico_20160224_det",
         "images/hake/openimages", "images/hake/pic", "images/hake/vcoco"),
    ),
    license="HAKE and its source datasets' terms",
    note="needed by the HAKE corpora only; the VG, VAW and SWiG corpora evaluate without it",
)


@BENCHMARKS.register("vl-checklist")
class VLCheckList(Benchmark):
    option_names = ("pairs", "strict", "images", "missing_images", "max_per_corpus")  # the -o options it reads
    metadata = BenchmarkMetadata(
        title="VL-CheckList (Zhao et al., arXiv:2207.00221)",
        protocols=("i2t-top1",),
        subsets=SUBSETS,
        layout="""\
DIR/corpus/v1/<Category>/<...>/<source>.yaml  {ANNO_PATH: data/...json (relative to DIR),
  IMG_ROOT: vg/|swig/|hake/, TYPE: TUPLE_JSON}; DIR/data/**.json: [[image_path, {"POS": [...],
  "NEG": [...]}], ...]; DIR/corpus.json (optional) groups corpus names under short keys
images: <images>/<IMG_ROOT>/<image_path>, <images> = option images=PATH, default DIR/images
case: 1 image x 2 texts [POS[0], NEG[0]] per record, truth [[1, 0]] (official ITC evaluation);
  option pairs=all: one case per pair i, [POS[i], NEG[i]]; id <corpus>/<record index>/<i>
subsets: Attribute/{action,color,material,size,state} Object/{Location,Size} Relation/{action,spatial};
  a filter may also name a category, a yaml folder, a corpus name or a corpus.json key
a yaml whose annotation file is missing is skipped and reported (option strict=true: error)
a record whose image file is absent is skipped and counted, as the official data_loader.py does
  (option missing_images=keep: kept, and fails when scored); HAKE is a manual part
option max_per_corpus=N: the first N records with an image per yaml file (1000: the official
  configs/sample.yaml, MAX_NUM 2000 halved by evaluate.py for itc); default 0, every record
tags: subset, category, source (vg/vaw/swig/hake), corpus (yaml name), variant (Object only)""",
        description="VL-CheckList: objects, attributes and relations on VG/VAW/SWiG/HAKE images, positive vs "
        "paired negative phrase; I2T top-1 (Zhao et al., VL-CheckList, arXiv:2207.00221)",
        paper=(
            "Zhao, Zhang, Xu, Zhong, Zhao, Li, Yang, Chen, Shen. VL-CheckList: Evaluating Pre-trained "
            "Vision-Language Models with Objects, Attributes and Relations. arXiv:2207.00221, 2022"
        ),
        reference="https://github.com/om-ai-lab/VL-CheckList",
        citation=CITATION,
        main_score=("i2t-top1", "accuracy"),
        reproduces="VL-CheckList Table 2; VisualGPTScore Table 2",
        license=f"{NO_LICENCE}; images under their datasets' terms",
        parts=(
            pinned_annotations(_REPOSITORY, "vl-checklist", NO_LICENCE),
            images_part(("visual-genome", ""), link="images/vg", name="images-vg"),
            images_part(("swig-images-512", ""), link="images/swig", name="images-swig"),
            _HAKE,
        ),
        groups=(
            ("Object", ("Object/Location", "Object/Size")),
            ("Attribute", tuple(s for s in SUBSETS if s.startswith("Attribute/"))),
            ("Relation", ("Relation/action", "Relation/spatial")),
        ),
        groups_source="VL-CheckList's three categories; VisualGPTScore Sec. 4 reports Relation 'by averaging the "
        "performance of action and spatial': each category is the unweighted mean of its subsets",
        ties="strict, as VL-CheckList's evaluate.py (task itc: pos > neg)",
    )

    def __init__(self, root: str | Path, **options: object) -> None:
        super().__init__(root, **options)
        self.missing: list[Path] = []

    # -- the corpus index -------------------------------------------------------------------

    def _corpus_dir(self) -> Path:
        path = self.root / "corpus" / "v1"
        if not path.is_dir():
            raise DataError(f"corpus/v1 folder of yaml files not found in {self.root}")
        return path

    def entries(self) -> list[CorpusEntry]:
        """Every corpus yaml file, parsed and validated, in a stable order."""
        base = self._corpus_dir()
        out = []
        for yaml_path in sorted(base.rglob("*.yaml")):
            out.append(self._entry(base, yaml_path))
        if not out:
            raise DataError(f"no corpus yaml files under {base}")
        return out

    def _entry(self, base: Path, yaml_path: Path) -> CorpusEntry:
        rel = yaml_path.relative_to(base)
        folder_parts = rel.parts[:-1]
        if not folder_parts:
            raise DataError("yaml file outside a <Category>/<...> folder", file=yaml_path)
        category = folder_parts[0]
        depth = 3 if category == "Object" else 2
        subset = "/".join(folder_parts[:2])
        if len(folder_parts) != depth or subset not in SUBSETS:
            raise DataError(
                f"unknown subset folder {'/'.join(folder_parts)!r}; known: {', '.join(SUBSETS)} "
                "(Object folders have a third level, e.g. Object/Location/center)",
                file=yaml_path,
            )
        try:
            config = yaml.safe_load(read_text(yaml_path))
        except yaml.YAMLError as exc:
            raise DataError(f"invalid YAML: {exc}", file=yaml_path) from exc
        if not isinstance(config, dict):
            raise DataError(f"expected a mapping, got {type(config).__name__}", file=yaml_path)
        values = {}
        for key in ("ANNO_PATH", "IMG_ROOT"):
            value = config.get(key)
            if not isinstance(value, str) or not value.strip():
                raise DataError("missing or empty", file=yaml_path, field=key)
            values[key] = value.strip()
        kind = config.get("TYPE", "TUPLE_JSON")
        if kind != "TUPLE_JSON":
            raise DataError(
                f"unsupported annotation TYPE {kind!r} (only TUPLE_JSON)", file=yaml_path, field="TYPE"
            )
        anno = Path(values["ANNO_PATH"])
        return CorpusEntry(
            yaml_path=yaml_path,
            folder="/".join(folder_parts),
            corpus="_".join((*folder_parts, yaml_path.stem)),
            category=category,
            subset=subset,
            variant=folder_parts[2] if depth == 3 else "",
            source=yaml_path.stem.split("_")[0],
            anno_path=anno if anno.is_absolute() else self.root / anno,
            img_root=values["IMG_ROOT"].strip("/"),
        )

    def corpus_groups(self, entries: list[CorpusEntry]) -> dict[str, set[str]]:
        """corpus.json as {key: corpus names}; {} when the file is absent. Unknown names are errors."""
        path = self.root / "corpus.json"
        if not path.is_file():
            return {}
        data = read_json(path)
        if not isinstance(data, dict):
            raise DataError(f"expected an object, got {type(data).__name__}", file=path)
        known = {e.corpus for e in entries}
        groups: dict[str, set[str]] = {}
        for key, by_source in data.items():
            if not isinstance(by_source, dict):
                raise DataError("expected an object {source: [corpus names]}", file=path, record=key)
            names = groups.setdefault(key, set())
            for source, corpora in by_source.items():
                if not isinstance(corpora, list) or not all(isinstance(c, str) for c in corpora):
                    raise DataError("expected a list of corpus names", file=path, record=key, field=source)
                for corpus in corpora:
                    if corpus not in known:
                        raise DataError(f"unknown subset {corpus!r}: no corpus/v1 yaml file of that name",
                                        file=path, record=key, field=source)
                    names.add(corpus)
        return groups

    def _select(self, subset: str | None) -> list[CorpusEntry]:
        entries = self.entries()
        groups = self.corpus_groups(entries)
        if subset is None:
            return entries
        chosen = [
            e
            for e in entries
            if subset in (e.subset, e.category, e.folder, e.corpus) or e.corpus in groups.get(subset, ())
        ]
        if not chosen:
            raise ConfigError(
                f"benchmark {self.name!r} has no subset {subset!r}; known: {', '.join(SUBSETS)} "
                "(or a category, yaml folder, corpus name or corpus.json key)"
            )
        return chosen

    def check_subset(self, subset: str | None) -> None:
        self._select(subset)

    def data_files(self) -> list[Path]:
        entries = self.entries()
        files = [e.yaml_path for e in entries]
        files += sorted({e.anno_path for e in entries if e.anno_path.is_file()})
        if (self.root / "corpus.json").is_file():
            files.append(self.root / "corpus.json")
        return files

    # -- cases ------------------------------------------------------------------------------

    def cases(self, subset: str | None = None) -> Iterator[Case]:
        self.report = LoadReport()
        self.missing = []
        all_pairs = option_choice(self.options, "pairs", ("first", "all"), "first") == "all"
        strict = option_bool(self.options, "strict", False)
        keep_missing = option_choice(self.options, "missing_images", ("skip", "keep"), "skip") == "keep"
        cap = option_int(self.options, "max_per_corpus", 0)
        if cap < 0:
            raise ConfigError(f"option 'max_per_corpus' must be 0 (every record) or positive, got {cap}")
        entries = self._select(subset)
        present = [e for e in entries if e.anno_path.is_file()]
        self.missing = [e.anno_path for e in entries if not e.anno_path.is_file()]
        if self.missing and (strict or not present):
            names = ", ".join(str(p) for p in self.missing)
            why = "strict=true" if strict else f"no annotation file of subset {subset!r} is present"
            raise DataError(f"annotation file(s) missing ({why}): {names}", file=self.missing[0])
        if self.missing:
            self.report.skip(SKIP_MISSING, len(self.missing))
        images = images_dir(self.root, self.options)
        # One FileImage per distinct image file, shared by its cases (VG images recur across files).
        refs: dict[str, FileImage | None] = {}
        for entry in present:
            yield from self._file_cases(entry, images / entry.img_root, all_pairs, refs, keep_missing, cap)

    def _file_cases(
        self,
        entry: CorpusEntry,
        image_root: Path,
        all_pairs: bool,
        refs: dict[str, FileImage | None],
        keep_missing: bool,
        cap: int,
    ) -> Iterator[Case]:
        """One annotation file's cases. As the official ``DataLoader.load_itc_samples`` (data_loader.py,
        commit 6f8d6a3), a record is kept only if its image exists; ``cap`` > 0 keeps the first ``cap``
        records so kept (``evaluate.py``'s ``d.data[name][:int(max_number/2)]``); both counted."""
        path = entry.anno_path
        data = read_json(path)
        if not isinstance(data, list):
            raise DataError(
                f"expected a JSON list of [image_path, texts] records, got {type(data).__name__}", file=path
            )
        tags = entry.tags()
        prefix = entry.corpus
        report = self.report
        kept = 0
        for idx, record in enumerate(data):
            report.records += 1
            image_path, pos, neg = _parse_record(record, path, idx)
            if cap and kept == cap:
                report.skip(SKIP_PAST_MAX)
                continue
            key = f"{entry.img_root}/{image_path}"
            if key not in refs:
                file = image_root / image_path
                refs[key] = FileImage(file) if keep_missing or file.is_file() else None
            image = refs[key]
            if image is None:
                report.skip(SKIP_NO_IMAGE)
                continue
            kept += 1
            for i in range(len(pos) if all_pairs else 1):
                yield Case(
                    id=f"{prefix}/{idx}/{i}",
                    texts=(pos[i], neg[i]),
                    truth=first_true(2),
                    images=(image,),
                    tags=tags,
                    roles=_ROLES,
                )


def _parse_record(record: object, path: Path, idx: int) -> tuple[str, list[str], list[str]]:
    """Validate one ``[image_path, {"POS": [...], "NEG": [...]}]`` record; texts come back stripped."""
    rid = f"#{idx}"
    if type(record) is not list or len(record) != 2:
        raise DataError("expected a 2-element list [image_path, {POS, NEG}]", file=path, record=rid)
    image_path, texts = record
    if type(image_path) is not str or not image_path.strip():
        raise DataError(
            f"expected a non-empty image path, got {image_path!r:.60}",
            file=path,
            record=rid,
            field="image_path",
        )
    if image_path.startswith(("/", "\\")):
        raise DataError(
            f"image path must be relative, got {image_path!r}", file=path, record=rid, field="image_path"
        )
    if type(texts) is not dict:
        raise DataError(
            f"expected an object with POS and NEG, got {type(texts).__name__}", file=path, record=rid
        )
    out = []
    for key in ("POS", "NEG"):
        values = texts.get(key)
        if values is None:
            raise DataError("missing field", file=path, record=rid, field=key)
        if type(values) is not list or not values:
            raise DataError(
                f"expected a non-empty list of texts, got {values!r:.60}", file=path, record=rid, field=key
            )
        stripped = []
        for j, text in enumerate(values):
            if type(text) is not str or not text.strip():
                raise DataError(
                    f"empty or not a string: {text!r:.60}", file=path, record=rid, field=f"{key}[{j}]"
                )
            stripped.append(text.strip())
        out.append(stripped)
    pos, neg = out
    if len(pos) != len(neg):
        raise DataError(
            f"{len(pos)} POS texts but {len(neg)} NEG texts; they are paired",
            file=path,
            record=rid,
            field="NEG",
        )
    return image_path.strip(), pos, neg
