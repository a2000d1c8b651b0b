"""SugarCrepe (Hsieh et al., NeurIPS 2023 D&B): COCO images, each with its caption and one hard negative.

Reads the seven ``<subset>.json`` files (or t2v_metrics' copies). Format and rules: docs/loaders.md.
"""

from __future__ import annotations

from collections.abc import Iterator

from spotdiff.benchmarks._io import field
from spotdiff.benchmarks.base import BENCHMARKS, BenchmarkMetadata, SubsetFilesBenchmark
from spotdiff.benchmarks.shared import images_part, pinned_annotations
from spotdiff.cases import Case

SUBSETS = ("add_att", "add_obj", "replace_att", "replace_obj", "replace_rel", "swap_att", "swap_obj")
_REPOSITORY = ("RAIVNLab/sugar-crepe", "0047054b243992f0fad63d6f64f7544862daf846")


CITATION = """\
@inproceedings{hsieh2023sugarcrepe,
  title     = {SugarCrepe: Fixing Hackable Benchmarks for Vision-Language Compositionality},
  author    = {Hsieh, Cheng-Yu and Zhang, Jieyu and Ma, Zixian and Kembhavi, Aniruddha and Krishna, Ranjay},
  booktitle = {Advances in Neural Information Processing Systems (NeurIPS), Datasets and Benchmarks Track},
  year      = {2023}
}
"""


@BENCHMARKS.register("sugarcrepe")
class SugarCrepe(SubsetFilesBenchmark):
    metadata = BenchmarkMetadata(
        title="SugarCrepe (Hsieh et al., NeurIPS 2023)",
        protocols=("i2t-top1",),
        subsets=SUBSETS,
        layout="""\
DIR/<subset>.json for the 7 subsets (add_att add_obj replace_att replace_obj replace_rel swap_att
  swap_obj); DIR may also be a sugar-crepe checkout (DIR/data/) or t2v_metrics' datasets/sugar_crepe
  each file: {"<id>": {"filename": COCO val2017 name, "caption": ..., "negative_caption": ...}}
images: <images>/<filename>, <images> = option images=PATH, default DIR/images (COCO val2017)
case: 1 image x 2 texts [caption, negative_caption], truth [[1, 0]]; id <subset>/<id>
tags: subset, operation (add/replace/swap), target (att/obj/rel)""",
        description="SugarCrepe: 7,511 COCO images with a caption and one hard negative in 7 subsets; "
        "I2T top-1 (Hsieh et al., SugarCrepe, NeurIPS 2023)",
        paper=(
            "Hsieh, Zhang, Ma, Kembhavi, Krishna. SugarCrepe: Fixing Hackable Benchmarks for Vision-"
            "Language Compositionality. NeurIPS 2023 Datasets and Benchmarks"
        ),
        reference="https://github.com/RAIVNLab/sugar-crepe",
        citation=CITATION,
        main_score=("i2t-top1", "accuracy"),
        reproduces="SugarCrepe Table 2; VisualGPTScore Table 2",
        license="MIT (annotations); COCO images under the Flickr terms",
        parts=(
            pinned_annotations(_REPOSITORY, "sugarcrepe", "MIT", strip="data/"),
            images_part(("coco-val2017", "")),
        ),
        data_notes="The README names COCO val2017 as the images; CLIP_benchmark downloads the same archive.",
        groups=(
            ("REPLACE", ("replace_att", "replace_obj", "replace_rel")),
            ("SWAP", ("swap_att", "swap_obj")),
            ("ADD", ("add_att", "add_obj")),
        ),
        groups_source="SugarCrepe (NeurIPS 2023) groups its seven subsets by the hard negative's operation, "
        "REPLACE, SWAP and ADD; each group is the unweighted mean of its subsets",
        ties="strict, as SugarCrepe's main_eval.py (pos_score > neg_score); CLIP_benchmark's "
        "image_caption_selection.py counts argmax == 0 with the caption first (a tie goes to the caption): "
        "--ties argmax",
    )

    search_dirs = ("", "data", "sugar_crepe")

    def cases(self, subset: str | None = None) -> Iterator[Case]:
        for name, path, key, record in self._records(subset):
            filename = field(record, "filename", str, file=path, record_id=key).strip()
            caption = field(record, "caption", str, file=path, record_id=key).strip()
            negative = field(record, "negative_caption", str, file=path, record_id=key).strip()
            operation, _, target = name.partition("_")
            yield self._case(name, key, filename, (caption, negative),
                             {"subset": name, "operation": operation, "target": target})
