"""VALSE (Parcalabescu et al., ACL 2022): a true caption and a foil per image, one linguistic phenomenon each.

Only samples that pass VALSE's validity rule are kept by default (``all_records=true`` keeps all).
Format and rules: docs/loaders.md.
"""

from __future__ import annotations

from collections.abc import Iterator

from spotdiff.benchmarks._io import field, option_bool
from spotdiff.benchmarks.base import BENCHMARKS, BenchmarkMetadata, SubsetFilesBenchmark
from spotdiff.benchmarks.shared import images_part, pinned_annotations
from spotdiff.cases import Case
from spotdiff.errors import DataError

SUBSETS = (
    "actant-swap",
    "action-replacement",
    "coreference-hard",
    "coreference-standard",
    "counting-adversarial",
    "counting-hard",
    "counting-small-quant",
    "existence",
    "foil-it",
    "plurals",
    "relations",
)
_REPOSITORY = ("Heidelberg-NLP/VALSE", "2152d90d4aecd11f7f74cf03420abcb63efff9c5")
VALID_MIN_CAPTION_VOTES = 2
SKIP_INVALID = "mturk caption < 2 (VALSE validity rule)"


CITATION = """\
@inproceedings{parcalabescu2022valse,
  title     = {{VALSE}: A Task-Independent Benchmark for Vision and Language Models Centered on Linguistic Phenomena},
  author    = {Parcalabescu, Letitia and Cafagna, Michele and Muradjan, Lilitta and Frank, Anette and
               Calixto, Iacer and Gatt, Albert},
  booktitle = {Proceedings of the 60th Annual Meeting of the Association for Computational Linguistics (ACL)},
  year      = {2022}
}
"""


@BENCHMARKS.register("valse")
class Valse(SubsetFilesBenchmark):
    option_names = ("all_records",)  # the -o options it reads
    record_key = "sample id"
    case_roles = ("caption", "foil")
    metadata = BenchmarkMetadata(
        title="VALSE (Parcalabescu et al., ACL 2022)",
        protocols=("valse-pairwise", "valse-prob"),
        subsets=SUBSETS,
        layout="""\
DIR/<subset>.json for the 11 subsets (actant-swap action-replacement coreference-hard
  coreference-standard counting-adversarial counting-hard counting-small-quant existence foil-it
  plurals relations); DIR may also be a VALSE checkout (DIR/data/)
  each file: {"<sample id>": {"image_file", "caption", "foil", "dataset", "linguistic_phenomena",
  "mturk": {"caption": votes, ...}, ...}}
images: <images>/<image_file>, <images> = option images=PATH, default DIR/images (one folder
  holding the SWiG, VisDial, Visual7W and COCO images under their published file names)
case: 1 image x 2 texts [caption, foil], truth [[1, 0]]; id <subset>/<sample id>
keeps samples with mturk.caption >= 2 (VALSE rule); option all_records=true keeps all (tag valid)
tags: subset, linguistic_phenomena, dataset""",
        description="VALSE: 11 foiling tests of linguistic phenomena, 7,702 valid of 8,782 samples; pairwise "
        "accuracy and acc/p_c/p_f/min (Parcalabescu et al., VALSE, ACL 2022; metrics as in EqBen)",
        paper=(
            "Parcalabescu, Cafagna, Muradjan, Frank, Calixto, Gatt. VALSE: A Task-Independent Benchmark "
            "for Vision and Language Models Centered on Linguistic Phenomena. ACL 2022"
        ),
        reference="https://github.com/Heidelberg-NLP/VALSE",
        citation=CITATION,
        main_score=("valse-pairwise", "acc_r"),
        reproduces="VALSE Table 2; EqBen Table 3",
        license="MIT (annotations); images under their datasets' terms",
        parts=(
            pinned_annotations(_REPOSITORY, "valse", "MIT", strip="data/"),
            # The `dataset` / `original_split` fields: SWiG test, VisDial v1.0 val (val2018 images) and
            # train (COCO train2014), Visual7W, FOIL (COCO val2014), COCO 2017 val.
            images_part(
                ("swig-images-512", ""),
                ("visdial-val2018", ""),
                ("coco-train2014", ""),
                ("coco-val2014", ""),
                ("coco-val2017", ""),
                ("visual7w", ""),
            ),
        ),
        data_notes="VALSE's README asks for each source dataset's own download; these are those datasets' archives.",
        groups=(
            ("existence", ("existence",)),
            ("plurality", ("plurals",)),
            ("counting", ("counting-hard", "counting-small-quant", "counting-adversarial")),
            ("spatial relations", ("relations",)),
            ("actions", ("action-replacement", "actant-swap")),
            ("coreference", ("coreference-standard", "coreference-hard")),
            ("foil-it", ("foil-it",)),
        ),
        groups_source="VALSE (ACL 2022) Table 2 groups its instruments into pieces (existence, plurality, "
        "counting, spatial relations, actions, coreference, foil-it!); a piece is the unweighted mean of its "
        "instruments, 'subset_mean' the mean over all instruments",
        ties="valse-prob: strict by default (a foil detected when p < 0.5, as EqBen's eval_batch_my.py); VALSE's "
        "lxmert_valse_eval.py counts p <= 0.5 (argmax over [no match, match]): --ties argmax. acc_r: strict "
        "in both peers' code (VALSE on the ITM match logit, EqBen on the probability)",
    )

    def cases(self, subset: str | None = None) -> Iterator[Case]:
        keep_all = option_bool(self.options, "all_records", False)
        for name, path, key, record in self._records(subset):
            image_file = field(record, "image_file", str, file=path, record_id=key).strip()
            caption = field(record, "caption", str, file=path, record_id=key).strip()
            foil = field(record, "foil", str, file=path, record_id=key).strip()
            dataset = field(record, "dataset", str, file=path, record_id=key).strip()
            phenomenon = field(record, "linguistic_phenomena", str, file=path, record_id=key).strip()
            mturk = field(record, "mturk", dict, file=path, record_id=key)
            votes = mturk.get("caption")
            if isinstance(votes, bool) or not isinstance(votes, int):
                problem = "missing" if votes is None else f"expected an int, got {votes!r:.40}"
                raise DataError(problem, file=path, record=key, field="mturk.caption")
            valid = votes >= VALID_MIN_CAPTION_VOTES
            if not valid and not keep_all:
                self.report.skip(SKIP_INVALID)
                continue
            tags = {"subset": name, "linguistic_phenomena": phenomenon, "dataset": dataset}
            if keep_all:
                tags["valid"] = "1" if valid else "0"
            yield self._case(name, key, image_file, (caption, foil), tags)
