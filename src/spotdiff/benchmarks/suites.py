"""Named suites of benchmarks (``spotdiff eval --suite NAME``, ``spotdiff benchmarks --suites``).

Each suite is the set of benchmarks a paper or a question reports together, so one command evaluates
a model on all of them and prints one table.
"""

from __future__ import annotations

from spotdiff.errors import ConfigError

#: suite name -> (description, benchmark names)
SUITES: dict[str, tuple[str, tuple[str, ...]]] = {
    "compositionality": (
        "every compositionality benchmark: ARO (4), Crepe, SugarCrepe, VALSE, VL-CheckList, Winoground, EqBen, SPEC",
        (
            "aro-vg-relation",
            "aro-vg-attribution",
            "aro-coco-order",
            "aro-flickr-order",
            "crepe",
            "sugarcrepe",
            "valse",
            "vl-checklist",
            "winoground",
            "eqben",
            "spec",
        ),
    ),
    "visla": (
        "VISLA's generic and spatial triplets (image-to-text and text-to-text)",
        ("visla-generic", "visla-spatial"),
    ),
    "visualgptscore": (
        "the image-to-text benchmarks of VisualGPTScore Table 2: ARO (4), Crepe, VL-CheckList, SugarCrepe",
        (
            "aro-vg-relation",
            "aro-vg-attribution",
            "aro-coco-order",
            "aro-flickr-order",
            "crepe",
            "vl-checklist",
            "sugarcrepe",
        ),
    ),
    "equivariance": ("the benchmarks of EqBen's Table 3: Winoground, EqBen, VALSE", ("winoground", "eqben", "valse")),
    "retrieval": ("COCO 5K and Flickr30K 1K image-text retrieval", ("coco-retrieval", "flickr-retrieval")),
    "compositionality-2024": (
        "minimal-pair benchmarks of 2023-2024 (issue 25): What'sUp, MMVP-VLM, SugarCrepe++, ColorSwap, BiVLC, "
        "NaturalBench (its VQA and retrieval tasks), VisMin, MMVP",
        (
            "whatsup",
            "mmvp-vlm",
            "sugarcrepe-pp",
            "colorswap",
            "bivlc",
            "naturalbench",
            "naturalbench-retrieval",
            "vismin",
            "mmvp",
        ),
    ),
}


def suite_benchmarks(name: str) -> tuple[str, ...]:
    """The benchmarks of a suite."""
    if name not in SUITES:
        raise ConfigError(f"unknown suite {name!r}; known: {', '.join(sorted(SUITES))}")
    return SUITES[name][1]
