"""VISLA (Dumpala et al., papers/001): triplets of two paraphrases (P1, P2) and a lexically close negative (N).

Reads ``Generic_VISLA.tsv`` and ``Spatial_VISLA.tsv``; P1 is the positive closer to N. Format and
rules: docs/loaders.md.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

from rapidfuzz.distance import Levenshtein

from spotdiff.benchmarks._io import frozen_truth, images_dir, iter_lines
from spotdiff.benchmarks.base import BENCHMARKS, Benchmark, BenchmarkMetadata, LoadReport
from spotdiff.benchmarks.shared import NO_LICENCE, images_part
from spotdiff.benchmarks.sources import Part, github_files
from spotdiff.cases import Case, FileImage
from spotdiff.errors import DataError

_TRUTH = frozen_truth([[True, True, False]])
_ROLES = ("p1", "p2", "n")
SKIP_NO_NEGATIVE = "spatial row without a negative caption"


def order_positives(p1: str, p2: str, negative: str) -> tuple[str, str, bool, int, int]:
    """Reorder two positives so that the first has the smaller Levenshtein distance to the negative.

    Returns ``(p1, p2, swapped, d(p1, n), d(p2, n))`` after reordering; ties keep the given order.

    Args:
        p1: the file's first positive.
        p2: the file's second positive.
        negative: the negative caption.
    """
    d1 = Levenshtein.distance(p1, negative)
    d2 = Levenshtein.distance(p2, negative)
    if d2 < d1:
        return p2, p1, True, d2, d1
    return p1, p2, False, d1, d2


_PAPER = ("Dumpala, Jaiswal, Sastry, Milios, Oore, Sajjad. VISLA Benchmark: Evaluating Embedding Sensitivity "
          "to Semantic and Lexical Alterations. arXiv:2404.16365, 2024")
_REFERENCE = "https://github.com/Sri-Harsha/visla_benchmark"
CITATION = """\
@article{dumpala2024visla,
  title   = {VISLA Benchmark: Evaluating Embedding Sensitivity to Semantic and Lexical Alterations},
  author  = {Dumpala, Sri Harsha and Jaiswal, Aman and Sastry, Chandramouli and Milios, Evangelos and
             Oore, Sageev and Sajjad, Hassan},
  journal = {arXiv preprint arXiv:2404.16365},
  year    = {2024}
}
"""


VISLA_TIES = (
    "strict (VISLA App. B ranks the negative last; a tie is not a ranking); --ties argmax gives a tie to the "
    "text listed first (P1, P2, N)"
)


class _VislaBase(Benchmark):
    """Shared reader of the two VISLA TSV files; subclasses fix the file, header and subset."""
    option_names = ("images",)  # the -o options it reads

    file_name: ClassVar[str] = ""
    header: ClassVar[tuple[str, ...]] = ()
    subset_name: ClassVar[str] = ""
    skip_empty_negative: ClassVar[bool] = False

    def _tsv_path(self) -> Path:
        if self.root.is_file():
            return self.root
        for candidate in (self.root / self.file_name, self.root / "data" / self.file_name):
            if candidate.is_file():
                return candidate
        raise DataError(f"{self.file_name} not found (looked in {self.root} and {self.root / 'data'})")

    def _images(self) -> Path:
        base = self.root.parent if self.root.is_file() else self.root
        return images_dir(base, self.options)

    def data_files(self) -> list[Path]:
        return [self._tsv_path()]

    def cases(self, subset: str | None = None) -> Iterator[Case]:
        self.check_subset(subset)
        self.report = LoadReport()
        path = self._tsv_path()
        images = self._images()
        # Streamed line by line (memory does not grow with the file); newline="" keeps the CRLF for
        # the csv module, which splits on it itself.
        reader = csv.reader(iter_lines(path), delimiter="\t", quoting=csv.QUOTE_NONE)
        try:
            header = next(reader)
        except StopIteration:
            raise DataError("empty file (no header row)", file=path) from None
        if tuple(h.strip() for h in header) != self.header:
            raise DataError(
                f"unexpected header {header!r}; expected the columns {list(self.header)!r}",
                file=path,
                record="line 1",
            )
        n_cols = len(self.header)
        for row_no, row in enumerate(reader, start=1):
            record = f"data row {row_no} (line {row_no + 1})"
            if not row or (len(row) == 1 and not row[0].strip()):
                continue  # a blank line, e.g. a trailing newline
            self.report.records += 1
            if len(row) != n_cols:
                raise DataError(
                    f"expected {n_cols} tab-separated columns, got {len(row)}", file=path, record=record
                )
            cells = [c.strip() for c in row]
            filename, p1, p2, negative = cells[:4]
            for col, value in ((0, filename), (1, p1), (2, p2)):
                if not value:
                    raise DataError("empty cell", file=path, record=record, field=self.header[col])
            if not negative:
                if self.skip_empty_negative:
                    self.report.skip(SKIP_NO_NEGATIVE)
                    continue
                raise DataError("empty negative caption", file=path, record=record, field=self.header[3])
            first, second, swapped, d1, d2 = order_positives(p1, p2, negative)
            yield Case(
                id=f"{self.subset_name}/{row_no}",
                texts=(first, second, negative),
                truth=_TRUTH,
                images=(FileImage(images / filename),),
                tags={
                    "subset": self.subset_name,
                    "swapped": "1" if swapped else "0",
                    "d_p1_n": str(d1),
                    "d_p2_n": str(d2),
                },
                roles=_ROLES,
            )


_LAYOUT = """\
DIR/{file}   (or DIR/data/{file}, or --data pointing at the file itself)
  tab-separated, UTF-8, no quoting, header: {header}
images: <images>/<COCO file name>, <images> = option images=PATH, default DIR/images
case: 1 image x 3 texts (P1, P2, N), truth [[1, 1, 0]], roles p1, p2, n; id {subset}/<data row>
P1 = the positive with the smaller character Levenshtein distance to N (ties keep file order);
  tags: subset={subset}, swapped=1 when the file's 2nd positive became P1, d_p1_n, d_p2_n"""


_VISLA = ("Sri-Harsha/visla_benchmark", "adedd6974a3448ac9881466f801483dda13282e1")


def _declare(subset: str, file_name: str, size: int, sha256: str, images: Part, *, description: str,
             layout: str) -> BenchmarkMetadata:
    """One VISLA set: its TSV file of the official repository (size, digest) and its images."""
    annotations = github_files(*_VISLA, [(f"data/{file_name}", file_name, size, f"sha256:{sha256}")])
    return BenchmarkMetadata(
        title=f"VISLA {subset.title()} (Dumpala et al., 2024)",
        description=description,
        paper=_PAPER,
        reference=_REFERENCE,
        citation=CITATION,
        license=f"{NO_LICENCE}; COCO images under the Flickr terms",
        protocols=("visla-i2t", "visla-t2t"),
        main_score=("visla-i2t", "accuracy"),
        layout=layout,
        parts=(Part("annotations", "annotations", annotations, license=NO_LICENCE), images),
        subsets=(subset,),
        reproduces=f"VISLA Tables 2-3 ({subset})",
        ties=VISLA_TIES,
    )


@BENCHMARKS.register("visla-generic")
class VislaGeneric(_VislaBase):
    file_name = "Generic_VISLA.tsv"
    header = ("filename", "caption", "second positive", "negative_caption")
    subset_name = "generic"
    metadata = _declare(
        subset_name,
        file_name,
        186537,
        "99cad867a688d70af10e08ed2548720c95f88d774fb3e5e41bf6fddcab3fc6a6",
        images_part(("coco-val2017", "")),
        description="VISLA Generic: 973 (P1, P2, N) caption triplets on COCO val2017 images; I2T and T2T "
        "triplet accuracy (Dumpala et al., VISLA Benchmark, 2024)",
        layout=_LAYOUT.format(file=file_name, header=" | ".join(header), subset=subset_name),
    )


@BENCHMARKS.register("visla-spatial")
class VislaSpatial(_VislaBase):
    file_name = "Spatial_VISLA.tsv"
    header = (
        "image",
        "sent1",
        "sent2",
        "Best reference (Semantically close)",
        "Reference-2 (Completely irrelevant)",
    )
    subset_name = "spatial"
    skip_empty_negative = True
    metadata = _declare(
        subset_name,
        file_name,
        104032,
        "f1ec14db70183bf6748cf71324e98062f9f7c395d8202f60dbfabb7a6f1ab891",
        # VISLA paper Sec. 3.2: the Spatial set is built on VSR, a subset of COCO 2017 (train and val).
        images_part(("coco-train2017", ""), ("coco-val2017", "")),
        description="VISLA Spatial: 640 (P1, P2, N) spatial-relation triplets on COCO images; I2T and T2T "
        "triplet accuracy (Dumpala et al., VISLA Benchmark, 2024)",
        layout=_LAYOUT.format(file=file_name, header=" | ".join(header), subset=subset_name)
        + "\nrows with an empty negative are skipped (12 in the published file: 652 rows -> 640 cases);"
        + "\nthe 'Reference-2 (Completely irrelevant)' column is not used",
    )
