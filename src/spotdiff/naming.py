"""Names made from free text: HTML anchors and file names.

>>> slugify("SugarCrepe: swap_att (group)")
'sugarcrepe-swap-att-group'
>>> safe_name("openclip:ViT-B-32/laion2b")
'openclip_ViT-B-32_laion2b'
>>> slugify("::"), safe_name("/", "model")
('x', 'model')
"""

from __future__ import annotations

import re


def slugify(text: str) -> str:
    """Lowercase letters and digits, each run of anything else one ``-``; ``"x"`` when nothing is left."""
    return re.sub(r"[^a-zA-Z0-9]+", "-", text).strip("-").lower() or "x"


def safe_name(text: str, default: str = "x") -> str:
    """``text`` as a file name: each run of characters other than letters, digits, ``.``, ``_`` and ``-``
    one ``_``, no ``_`` at either end; ``default`` when nothing is left."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or default
