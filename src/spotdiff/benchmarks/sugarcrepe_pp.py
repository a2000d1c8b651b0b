"""SugarCrepe++ (Dumpala et al., NeurIPS 2024 D&B): SugarCrepe's replace and swap images, each with two
positive captions (P1, P2) and the hard negative (N).

Reads the five ``data/<subset>.json`` files of github.com/Sri-Harsha/scpp (commit c083bbf), scored
by the VISLA protocols as the authors' ``VLMs/test_*.py`` do. Format and rules: docs/loaders.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from spotdiff.benchmarks._io import field, frozen_truth, images_dir, read_json
from spotdiff.benchmarks.base import BENCHMARKS, Benchmark, BenchmarkMetadata, LoadReport
from spotdiff.benchmarks.shared import images_part, pinned_annotations
from spotdiff.cases import Case, FileImage
from spotdiff.errors import DataError

SUBSETS = ("replace_att", "replace_obj", "replace_rel", "swap_att", "swap_obj")
_REPOSITORY = ("Sri-Harsha/scpp", "c083bbf039a5ca215acaf25e7ee736d2ea6f3864")
_TRUTH = frozen_truth([[True, True, False]])
_ROLES = ("p1", "p2", "n")
_FIELDS = ("caption", "caption2", "negative_caption")

CITATION = """\
@misc{dumpala2024sugarcrepe,
  title         = {SUGARCREPE++ Dataset: Vision-Language Model Sensitivity to Semantic and Lexical Alterations},
  author        = {Dumpala, Sri Harsha and Jaiswal, Aman and Sastry, Chandramouli and Milios, Evangelos and
                   Oore, Sageev and Sajjad, Hassan},
  year          = {2024},
  eprint        = {2406.11171},
  archivePrefix = {arXiv}
}
"""


@BENCHMARKS.register("sugarcrepe-pp")
class SugarCrepePP(Benchmark):
    option_names = ("images",)  # the -o options it reads
    metadata = BenchmarkMetadata(
        title="SugarCrepe++ (Dumpala et al., NeurIPS 2024)",
        protocols=("visla-i2t", "visla-t2t"),
        subsets=SUBSETS,
        layout="""\
DIR/<subset>.json (or DIR/data/<subset>.json) for replace_att replace_obj replace_rel swap_att swap_obj:
  [{"id": int, "filename": COCO val2017 name, "caption": P1, "caption2": P2, "negative_caption": N}, ...]
images: <images>/<filename>, <images> = option images=PATH, default DIR/images (COCO val2017)
case: 1 image x 3 texts (P1, P2, N), truth [[1, 1, 0]], roles p1, p2, n; id <subset>/<id>
ITT = protocol visla-i2t (P1 > N and P2 > N for the image), TOT = visla-t2t (cos(P1, P2) above both
  cos(P1, N) and cos(P2, N)), as the authors' VLMs/test_*.py
tags: subset, operation (replace/swap), target (att/obj/rel)""",
        description="SugarCrepe++: SugarCrepe's replace/swap images with two positive captions and a hard "
        "negative; image-to-text (ITT) and text-only (TOT) accuracy (Dumpala et al., NeurIPS 2024)",
        paper="Dumpala, Jaiswal, Sastry, Milios, Oore, Sajjad. SUGARCREPE++ Dataset: Vision-Language Model "
        "Sensitivity to Semantic and Lexical Alterations. NeurIPS 2024 Datasets and Benchmarks (arXiv:2406.11171)",
        reference="https://github.com/Sri-Harsha/scpp",
        citation=CITATION,
        main_score=("visla-i2t", "accuracy"),
        reproduces="SugarCrepe++ Table 2 (ITT and TOT per subset)",
        license="MIT (github.com/Sri-Harsha/scpp LICENSE); COCO images under the Flickr terms",
        parts=(
            pinned_annotations(_REPOSITORY, "sugarcrepe-pp", "MIT", strip="data/"),
            images_part(("coco-val2017", "")),
        ),
        data_notes="Also on the hub as Aman-J/SugarCrepe_pp; the GitHub files are the ones pinned here.",
        metric_sources=(
            (
                "visla-i2t",
                ("accuracy",),
                "Table 2's ITT: VLMs/test_*.py's cos_p1 > cos_neg and cos_p2 > cos_neg (commit c083bbf)",
            ),
            ("visla-i2t", ("p1_n", "p2_n"), "the paper's Image-P1-Neg and Image-P2-Neg: each comparison alone"),
            ("visla-t2t", ("accuracy",), "Table 2's TOT: cos_p1p2 > cos_p1_neg and cos_p1p2 > cos_p2_neg"),
            (
                "visla-t2t",
                ("p1_n", "p2_n"),
                "TOT's two comparisons alone (P2 above N for the query P1; P1 above N for the query P2)",
            ),
        ),
        ties="strict, as the authors' VLMs/test_*.py (cos_p1 > cos_neg and cos_p2 > cos_neg; "
        "cos_p1p2 > cos_p1_neg and cos_p1p2 > cos_p2_neg)",
    )

    def _folder(self) -> Path:
        for folder in (self.root, self.root / "data"):
            if any((folder / f"{s}.json").is_file() for s in SUBSETS):
                return folder
        raise DataError(f"no SugarCrepe++ subset files (<subset>.json: {', '.join(SUBSETS)}) in {self.root}")

    def data_files(self) -> list[Path]:
        folder = self._folder()
        return [folder / f"{s}.json" for s in SUBSETS if (folder / f"{s}.json").is_file()]

    def cases(self, subset: str | None = None) -> Iterator[Case]:
        self.check_subset(subset)
        self.report = LoadReport()
        folder = self._folder()
        images = images_dir(self.root, self.options)
        refs: dict[str, FileImage] = {}
        for name in (subset,) if subset else SUBSETS:
            path = folder / f"{name}.json"
            if not path.is_file():
                if subset:
                    raise DataError(f"subset file missing: {path.name}", file=path)
                continue
            data = read_json(path)
            if not isinstance(data, list):
                raise DataError(f"expected a JSON list of records, got {type(data).__name__}", file=path)
            operation, _, target = name.partition("_")
            for idx, record in enumerate(data):
                self.report.records += 1
                rid = field(record, "id", int, file=path, record_id=idx)
                filename = field(record, "filename", str, file=path, record_id=idx).strip()
                texts = tuple(field(record, f, str, file=path, record_id=idx).strip() for f in _FIELDS)
                image = refs.get(filename) or refs.setdefault(filename, FileImage(images / filename))
                tags = {"subset": name, "operation": operation, "target": target}
                yield Case(f"{name}/{rid}", texts, _TRUTH, (image,), tags, roles=_ROLES)
