"""Writers of small datasets in the exact published schemas of benchmarks, for tests.

Each ``write_*`` function writes a tiny deterministic dataset with real image files into ``root``
(created if needed; the same ``seed`` writes the same files) and returns the folder to pass as
``--data``. One module per family of writers (split out of one module, issue 43): :mod:`.pairs` (EqBen,
Winoground, MMVP-VLM, VisMin), :mod:`.negatives` (SugarCrepe, SugarCrepe++, VALSE, ARO, CREPE, What'sUp),
:mod:`.spec` (SPEC's sets), :mod:`.retrieval` (the Karpathy splits), :mod:`.classification` (zero-shot
classification layouts), :mod:`.questions` (MMVP); this package names them all. Which formats: docs/testing.md.
"""

from spotdiff.testing.formats.classification import (
    ZEROSHOT_CLASSES,
    write_zeroshot_cifar,
    write_zeroshot_folder,
    write_zeroshot_wds,
)
from spotdiff.testing.formats.negatives import (
    ARO_FIXTURE_ATTRIBUTES,
    ARO_FIXTURE_RELATIONS,
    CREPE_COMPLEXITIES,
    SUGARCREPE_SUBSETS,
    WHATSUP_CLEVR,
    WHATSUP_COCO_ONE,
    WHATSUP_COCO_TWO,
    WHATSUP_CONTROLLED,
    WHATSUP_VG_ONE,
    WHATSUP_VG_TWO,
    write_aro_vg_attribution,
    write_aro_vg_relation,
    write_crepe,
    write_sugarcrepe,
    write_sugarcrepe_pp,
    write_valse,
    write_whatsup,
)
from spotdiff.testing.formats.pairs import (
    EQBEN_SUBSETS,
    VISMIN_CATEGORIES,
    write_eqben,
    write_eqben_full,
    write_mmvp_vlm,
    write_vismin,
    write_winoground,
)
from spotdiff.testing.formats.questions import MMVP_HEADER, mmvp_rows, write_mmvp
from spotdiff.testing.formats.retrieval import write_karpathy
from spotdiff.testing.formats.spec import SPEC_K, write_spec

__all__ = [
    "ARO_FIXTURE_ATTRIBUTES", "ARO_FIXTURE_RELATIONS", "CREPE_COMPLEXITIES", "EQBEN_SUBSETS", "MMVP_HEADER", "SPEC_K",
    "SUGARCREPE_SUBSETS", "VISMIN_CATEGORIES", "WHATSUP_CLEVR", "WHATSUP_COCO_ONE", "WHATSUP_COCO_TWO",
    "WHATSUP_CONTROLLED", "WHATSUP_VG_ONE", "WHATSUP_VG_TWO", "ZEROSHOT_CLASSES", "mmvp_rows",
    "write_aro_vg_attribution", "write_aro_vg_relation", "write_crepe", "write_eqben", "write_eqben_full",
    "write_karpathy", "write_mmvp", "write_mmvp_vlm", "write_spec", "write_sugarcrepe", "write_sugarcrepe_pp",
    "write_valse", "write_vismin", "write_whatsup", "write_winoground", "write_zeroshot_cifar",
    "write_zeroshot_folder", "write_zeroshot_wds",
]  # fmt: skip
