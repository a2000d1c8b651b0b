"""ARO (Yuksekgonul et al., ICLR 2023): VG-Relation, VG-Attribution, COCO-Order and Flickr30k-Order.

Four image-to-text benchmarks (``aro-vg-relation``, ``aro-vg-attribution``, ``aro-coco-order``,
``aro-flickr-order``), scored as I2T R@1; the order sets' perturbations are drawn at load time
(POS tagger and tokenizer in :mod:`spotdiff.benchmarks.word_order`). Formats, options and the tie
rule: docs/loaders.md.
"""

from __future__ import annotations

import logging
from abc import abstractmethod
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from spotdiff.benchmarks._io import (
    field,
    find_file,
    first_true,
    frozen_truth,
    option_bool,
    option_choice,
    option_int,
    read_json,
)
from spotdiff.benchmarks._parquet import find_parquet, iter_rows
from spotdiff.benchmarks.base import BENCHMARKS, Benchmark, BenchmarkMetadata, LoadReport
from spotdiff.benchmarks.retrieval import KARPATHY_FILES, SPLITS, _KarpathyBenchmark, pre_caption, read_karpathy
from spotdiff.benchmarks.shared import hub_test_images, images_part, karpathy_parts, mieb_part
from spotdiff.benchmarks.sources import Part, RemoteFile, UrlSource, google_drive
from spotdiff.benchmarks.word_order import POS_TAGGERS, TOKENIZERS, TextShuffler
from spotdiff.cases import Case, FileImage, ImageRef, ParquetImage
from spotdiff.errors import ConfigError, DataError

log = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------------
# VG-Relation / VG-Attribution
# --------------------------------------------------------------------------------------------------

_VG_TRUTH = frozen_truth([[False, True]])
_VG_TIES = (
    "ARO's code counts argmax over [false_caption, true_caption] == 1, so a tie goes to the false caption: "
    "strict and argmax give ARO's number alike"
)
_ORDER_TIES = (
    "ARO's code counts argmax == 0 over [true caption, 4 perturbations], so a tie goes to the true caption: "
    "--ties argmax reproduces it (and keeps perturbations identical to the caption, as ARO does); strict "
    "drops those perturbations and counts any other tie as a failure"
)
_VG_ROLES = ("false_caption", "true_caption")


def _vg_case(case_id: str, true_caption: str, false_caption: str, image: ImageRef, tags: dict[str, str]) -> Case:
    """1 image x 2 texts in ARO's order ``[false_caption, true_caption]``, the true caption marked."""
    return Case(id=case_id, texts=(false_caption, true_caption), truth=_VG_TRUTH, images=(image,), tags=tags,
                roles=_VG_ROLES)


def _number(record: object, name: str, *, file: Path, record_id: object) -> float:
    value = field(record, name, (int, float), file=file, record_id=record_id)
    if not np.isfinite(value):
        raise DataError(f"expected a finite number, got {value!r}", file=file, record=record_id, field=name)
    return float(value)


_PAPER = (
    "Yuksekgonul, Bianchi, Kalluri, Jurafsky, Zou. When and Why Vision-Language Models Behave like Bags-Of-Words, "
    "and What to Do About It? ICLR 2023"
)
_REFERENCE = "https://github.com/mertyg/vision-language-models-are-bows"
CITATION = """\
@inproceedings{yuksekgonul2023when,
  title     = {When and Why Vision-Language Models Behave like Bags-Of-Words, and What to Do About It?},
  author    = {Yuksekgonul, Mert and Bianchi, Federico and Kalluri, Pratyusha and Jurafsky, Dan and Zou, James},
  booktitle = {International Conference on Learning Representations (ICLR)},
  year      = {2023}
}
"""

#: Where ``spotdiff data fetch NAME --part mieb`` puts MTEB's parquet mirror, and other places to look.
MIEB_PARQUET = ("mieb/data/test-*.parquet", "data/test-*.parquet", "*.parquet")
MIEB_SOURCES = ("auto", "official", "mieb")


class _Mirrored(Benchmark):
    """An ARO set that MTEB mirrors: read from the mirror when :meth:`_mieb` selects it, else from the
    official annotation file (``_annotation()``, which a subclass or a sibling base provides)."""

    @abstractmethod
    def _mieb(self) -> list[Path] | None:
        """MTEB's parquet files when the options select them, else None."""

    @abstractmethod
    def _mieb_cases(self, files: list[Path]) -> Iterator[Case]:
        """The cases of MTEB's mirror."""

    @abstractmethod
    def _official_cases(self) -> Iterator[Case]:
        """The cases of the official files."""

    def data_files(self) -> list[Path]:
        return self._mieb() or [self._annotation()]  # type: ignore[attr-defined]

    def cases(self, subset: str | None = None) -> Iterator[Case]:
        self.check_subset(subset)
        self.report = LoadReport()
        files = self._mieb()
        yield from self._official_cases() if files is None else self._mieb_cases(files)


class _VisualGenome(_Mirrored):
    option_names = ("source", "images", "crop")  # the -o options it reads
    annotation = ""
    kind = ""

    def _annotation(self) -> Path:
        return find_file(self.root, (self.annotation,), what=f"ARO {self.annotation}")

    def _mieb(self) -> list[Path] | None:
        """MTEB's parquet files when option ``source`` (default auto) selects them, else None."""
        source = option_choice(self.options, "source", MIEB_SOURCES, "auto")
        if source == "official":
            return None
        if source == "auto":
            try:
                self._annotation()
                return None
            except DataError:
                pass
        return find_parquet(self.root, MIEB_PARQUET, what=f"MTEB {self.name} (no {self.annotation} either)")

    def _images(self, ann: Path) -> Path:
        value = self.options.get("images")
        return Path(str(value)).expanduser() if value else ann.parent / "images"

    @abstractmethod
    def _grouping(self, record: object, *, file: Path, record_id: int) -> dict[str, str]:
        """Implemented by each subclass."""

    def _official_cases(self) -> Iterator[Case]:
        ann = self._annotation()
        data = read_json(ann)
        if not isinstance(data, list):
            raise DataError(f"expected a JSON list of records, got {type(data).__name__}", file=ann)
        images = self._images(ann)
        refs: dict[tuple, FileImage] = {}
        for i, record in enumerate(data):
            self.report.records += 1
            image_path = field(record, "image_path", str, file=ann, record_id=i)
            x = _number(record, "bbox_x", file=ann, record_id=i)
            y = _number(record, "bbox_y", file=ann, record_id=i)
            w = _number(record, "bbox_w", file=ann, record_id=i)
            h = _number(record, "bbox_h", file=ann, record_id=i)
            for name, value in (("bbox_w", w), ("bbox_h", h)):
                if value <= 0:
                    raise DataError(f"box size must be positive, got {value}", file=ann, record=i, field=name)
            true_caption = field(record, "true_caption", str, file=ann, record_id=i)
            false_caption = field(record, "false_caption", str, file=ann, record_id=i)
            tags = {"subset": self.kind, **self._grouping(record, file=ann, record_id=i)}
            key = (image_path, x, y, w, h)
            image = refs.get(key)
            if image is None:
                image = refs[key] = FileImage(images / image_path, bbox=(x, y, w, h))
            yield _vg_case(str(i), true_caption, false_caption, image, tags)

    def _mieb_cases(self, files: list[Path]) -> Iterator[Case]:
        crop = option_bool(self.options, "crop", True)
        columns = ("true_caption", "false_caption", "?bbox", "?relation_name", "?attributes")
        for n, (path, row, record) in enumerate(iter_rows(files, columns, ("image",))):
            self.report.records += 1
            where = f"row {row}"
            true_caption = field(record, "true_caption", str, file=path, record_id=where)
            false_caption = field(record, "false_caption", str, file=path, record_id=where)
            image: ParquetImage = record["image"]
            if crop:
                box = field(record, "bbox", dict, file=path, record_id=where)
                bbox = tuple(_number(box, k, file=path, record_id=where) for k in ("x", "y", "w", "h"))
                if bbox[2] <= 0 or bbox[3] <= 0:
                    raise DataError(f"box size must be positive, got {bbox}", file=path, record=where, field="bbox")
                image = ParquetImage(image.path, image.row, image.column, image.sha256, bbox)  # type: ignore[arg-type]
            tags = {"subset": self.kind, "source": "mieb", **self._grouping(record, file=path, record_id=n)}
            yield _vg_case(str(n), true_caption, false_caption, image, tags)


_VG_LAYOUT = """\
DIR/{file} (or DIR = the file): [{{"image_path": str, "bbox_x", "bbox_y", "bbox_w", "bbox_h": numbers,
  "true_caption": str, "false_caption": str, {extra}}}]
images: <images>/<image_path> cropped to (x, y, x + w, y + h); <images> = option images=PATH,
  default DIR/images (ARO's vgr_vga_images.zip)
case: 1 image x 2 texts [false_caption, true_caption] (ARO's order), truth on true_caption; id = index
tags: subset {kind}, {tags} (the aro-macro protocol's grouping)
MTEB's mirror (spotdiff data fetch NAME --part mieb): DIR/mieb/data/test-*.parquet, columns image, bbox
  {{x, y, w, h}}, true_caption, false_caption, {extra}; read with option source=mieb (source=auto, the
  default, reads it when the JSON is absent); crop=false keeps the whole image as MTEB does"""


def _vg_declaration(label: str, kind: str, annotation: str, drive_id: str, mieb: Part, what: str, extra: str,
                    tags: str) -> BenchmarkMetadata:
    """VG-Relation or VG-Attribution: its JSON file (a Google Drive file of ARO's code), the images, MTEB's mirror.

    Args:
        label: the name ARO's paper gives it.
        kind: its one subset.
        annotation: the JSON file's name.
        drive_id: the Google Drive id of that file.
        mieb: MTEB's mirror (:func:`~spotdiff.benchmarks.shared.mieb_part`).
        what: the cases and the main score, for the description.
        extra: the record's grouping field, for the layout.
        tags: the grouping tag, for the layout.
    """
    annotations = UrlSource(
        (RemoteFile(google_drive(drive_id), annotation),),
        origin="Google Drive file of ARO's dataset_zoo/aro_datasets.py",
    )
    return BenchmarkMetadata(
        title=f"ARO {label} (Yuksekgonul et al., ICLR 2023)",
        description=f"ARO {label}: {what} (Yuksekgonul et al., ARO, ICLR 2023)",
        layout=_VG_LAYOUT.format(file=annotation, extra=extra, kind=kind, tags=tags),
        reproduces=f"ARO Table 1 ({label}); VisualGPTScore Table 2b",
        paper=_PAPER,
        reference=_REFERENCE,
        citation=CITATION,
        license="MIT (repository); Visual Genome images CC BY 4.0",
        protocols=("aro-macro", "i2t-top1"),
        main_score=("aro-macro", "macro_accuracy"),
        parts=(
            Part("annotations", "annotations", annotations, license="MIT",
                 note="no checksum could be checked offline"),
            images_part(("aro-vg-images", "")),
            mieb,
        ),
        subsets=(kind,),
        ties=_VG_TIES,
    )


@BENCHMARKS.register("aro-vg-relation")
class AroVGRelation(_VisualGenome):
    annotation = "visual_genome_relation.json"
    kind = "vg-relation"
    metadata = _vg_declaration(
        "VG-Relation", kind, annotation, "1kX2iCHEv0CADL8dSO1nMdW-V0NqIAiP3",
        mieb_part("mteb/ARO-Visual-Relation", "53c1115ab5871ab33b09d5bb8856236d46bdaf2d", 765255644),
        "23,937 Visual Genome crops with a true and a subject/object-swapped caption; macro accuracy over relations",
        '"relation_name": str', "relation (relation_name)",
    )

    def _grouping(self, record: object, *, file: Path, record_id: int) -> dict[str, str]:
        relation = field(record, "relation_name", str, file=file, record_id=record_id)
        return {"relation": relation}


@BENCHMARKS.register("aro-vg-attribution")
class AroVGAttribution(_VisualGenome):
    annotation = "visual_genome_attribution.json"
    kind = "vg-attribution"
    metadata = _vg_declaration(
        "VG-Attribution", kind, annotation, "13tWvOrNOLHxl3Rm9cR3geAdHx2qR3-Tw",
        mieb_part("mteb/ARO-Visual-Attribution", "25fe9b460426ff67cdb0608a737c94f8f49a901e", None),
        "28,748 Visual Genome crops with a true and an attribute-swapped caption; macro accuracy over attribute pairs",
        '"attributes": [2 strings]', 'attributes ("<a0>_<a1>")',
    )

    def _grouping(self, record: object, *, file: Path, record_id: int) -> dict[str, str]:
        attributes = field(record, "attributes", list, file=file, record_id=record_id)
        if len(attributes) < 2 or not all(isinstance(a, str) and a.strip() for a in attributes[:2]):
            raise DataError(
                f"expected 2 attribute strings, got {attributes!r:.60}",
                file=file,
                record=record_id,
                field="attributes",
            )
        return {"attributes": f"{attributes[0]}_{attributes[1]}"}


# --------------------------------------------------------------------------------------------------
# COCO-Order / Flickr30k-Order
# --------------------------------------------------------------------------------------------------

SKIP_IDENTICAL = "order: perturbation identical to the true caption (ARO's argmax scores it for the true one)"
SKIP_NO_NEGATIVE = "order: every perturbation identical to the true caption"
_ORDER_ROLES = ("true", *TextShuffler.PERTURBATIONS)
MIEB_HARD_TEXTS = ("hard_text_1", "hard_text_2", "hard_text_3", "hard_text_4")


class _Order(_Mirrored, _KarpathyBenchmark):
    option_names = ("pos_tagger", "tokenizer", "perturbations", "seed", "max_words")  # the -o options it reads
    def shuffler(self) -> TextShuffler:
        shuffler = TextShuffler(
            option_choice(self.options, "pos_tagger", POS_TAGGERS, "auto"),
            option_choice(self.options, "tokenizer", TOKENIZERS, "auto"),
        )
        if not shuffler.is_aro:
            log.warning(
                "%s: perturbations use POS tagger %s and tokenizer %s, not ARO's spaCy en_core_web_sm + "
                "nltk.word_tokenize; results approximate ARO's %s",
                self.name,
                shuffler.pos_tagger,
                shuffler.tokenizer,
                self.name,
            )
        return shuffler

    def _mieb(self) -> list[Path] | None:
        """MTEB's parquet files with option ``perturbations=mieb``; None for ARO's perturbations."""
        if option_choice(self.options, "perturbations", ("aro", "mieb"), "aro") == "aro":
            return None
        if self._split() != "test":
            raise ConfigError(f"{self.name}: MTEB's mirror (perturbations=mieb) holds the test split only")
        return find_parquet(self.root, MIEB_PARQUET, what=f"MTEB {self.name} (fetch it with --part mieb)")

    def _case(self, case_id: str, true: str, perturbations: Iterable[tuple[str, str]], image: ImageRef,
              tags: dict[str, str], keep_identical: bool = False) -> Case | None:
        """1 image x [true caption, perturbations], the true one first; a perturbation equal to it is dropped
        (counted) unless ``keep_identical``; None (counted) when no perturbation is left.

        Args:
            case_id: the case's id.
            true: the true caption.
            perturbations: ``(role, text)`` of each perturbation, read as they are consumed.
            image: the image.
            tags: the case's tags (each case gets its own copy).
            keep_identical: keep perturbations equal to the true caption (``--ties argmax``, as ARO).
        """
        texts, roles = [true], ["true"]
        for role, text in perturbations:
            if text == true and not keep_identical:
                self.report.skip(SKIP_IDENTICAL)
                continue
            texts.append(text)
            roles.append(role)
        if len(texts) == 1:
            self.report.skip(SKIP_NO_NEGATIVE)
            return None
        return Case(id=case_id, texts=tuple(texts), truth=first_true(len(texts)), images=(image,), tags=dict(tags),
                    roles=tuple(roles))

    def _mieb_cases(self, files: list[Path]) -> Iterator[Case]:
        tags = {"subset": "test", "dataset": self.dataset, "perturbations": "mieb"}
        columns = ("correct_caption", *MIEB_HARD_TEXTS)
        for n, (path, row, record) in enumerate(iter_rows(files, columns, ("images",))):
            self.report.records += 1
            where = f"row {row}"
            true = field(record, "correct_caption", str, file=path, record_id=where)
            hard = ((c, field(record, c, str, file=path, record_id=where)) for c in MIEB_HARD_TEXTS)
            case = self._case(f"mieb/{n}", true, hard, record["images"], tags)
            if case is not None:
                yield case

    def _official_cases(self) -> Iterator[Case]:
        split = self._split()
        ann = self._annotation()
        records = read_karpathy(ann)
        base = self._image_root(ann)
        seed = option_int(self.options, "seed", 0)
        max_words = option_int(self.options, "max_words", 30)
        shuffler = self.shuffler()
        keep_identical = self.ties == "argmax"  # ARO's argmax credits the tie to the true caption, listed first
        tags = {
            "subset": split,
            "dataset": self.dataset,
            "pos_tagger": shuffler.pos_tagger,
            "tokenizer": shuffler.tokenizer,
            "seed": str(seed),
        }
        for i, (image, captions) in enumerate(records):
            ref = FileImage(base / image)
            for j, caption in enumerate(captions):
                self.report.records += 1
                rng = np.random.default_rng([seed, i, j])
                true = pre_caption(caption, max_words)
                if not true.strip():
                    raise DataError(f"caption {j} is empty after pre_caption: {caption!r:.60}",
                                    file=ann, record=i, field="caption")
                perturbed = zip(TextShuffler.PERTURBATIONS, shuffler.perturb(caption, rng), strict=True)
                shuffled = ((role, pre_caption(text, max_words)) for role, text in perturbed)
                case = self._case(f"{image}#{j}", true, shuffled, ref, tags, keep_identical)
                if case is not None:
                    yield case


_ORDER_LAYOUT = """\
DIR/{file} (BLIP/ARO Karpathy split; option split=val reads the _val file; DIR may be the file)
  [{{"image": "<path relative to DIR>", "caption": [5 captions], ...}}]
images: DIR/<image>, or option images=PATH as the image root
case: one per (image, caption): 1 image x 5 texts [true, shuffle_nouns_and_adj,
  shuffle_allbut_nouns_and_adj, shuffle_within_trigrams, shuffle_trigrams] (roles), all through BLIP
  pre_caption(max_words=30); a perturbation equal to the true caption is dropped (report.skipped),
  or kept with --ties argmax (ARO's argmax == 0 credits the tie to the true caption);
  id <image>#<caption index>
options: seed (default 0; rng = default_rng([seed, image index, caption index])),
  pos_tagger auto|spacy|heuristic, tokenizer auto|nltk|regex (ARO = spacy + nltk; the others are
  labelled approximations, recorded in tags pos_tagger / tokenizer)
tags: subset = the split, dataset, pos_tagger, tokenizer, seed
option perturbations=mieb: MTEB's fixed perturbations from DIR/mieb/data/test-*.parquet (spotdiff data
  fetch NAME --part mieb), columns images, correct_caption, hard_text_1..4; id mieb/<row>"""


def _order_declaration(dataset: str, label: str, images: str, *extra: Part) -> BenchmarkMetadata:
    """COCO-Order or Flickr30k-Order: the Karpathy test split of ``dataset``, MTEB's mirror, ``extra`` parts."""
    return BenchmarkMetadata(
        title=f"ARO {label} (Yuksekgonul et al., ICLR 2023)",
        description=f"ARO {label}: {images} test captions against 4 word-order perturbations, I2T top-1 "
        "(Yuksekgonul et al., ARO, ICLR 2023)",
        paper=_PAPER,
        reference=_REFERENCE,
        citation=CITATION,
        license=f"MIT (ARO); {_ORDER_IMAGES_TERMS[dataset]}",
        protocols=("i2t-top1",),
        main_score=("i2t-top1", "accuracy"),
        layout=_ORDER_LAYOUT.format(file=KARPATHY_FILES[dataset].format(split="test")),
        parts=(*karpathy_parts(dataset), *extra),
        subsets=SPLITS,
        reproduces=f"ARO Table 1 ({label}); VisualGPTScore Table 2b",
        ties=_ORDER_TIES,
    )


_ORDER_IMAGES_TERMS = {"coco": "COCO images under the Flickr terms", "flickr": "Flickr30K images by request form"}


@BENCHMARKS.register("aro-coco-order")
class AroCocoOrder(_Order):
    dataset = "coco"
    metadata = _order_declaration(
        dataset,
        "COCO-Order",
        "COCO Karpathy",
        mieb_part("mteb/ARO-COCO-order", "53c20afc02a87fed8c0245dde2e00f054da4b861", 2517223830),
    )


@BENCHMARKS.register("aro-flickr-order")
class AroFlickrOrder(_Order):
    dataset = "flickr"
    metadata = _order_declaration(
        dataset,
        "Flickr30k-Order",
        "Flickr30K",
        mieb_part("mteb/ARO-Flickr-Order", "e5d7f3502345b2c398a6645b4d09b44e650287bf", None),
        hub_test_images(dataset),
    )
