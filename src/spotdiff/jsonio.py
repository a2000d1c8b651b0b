"""The one way spotdiff writes JSON: NaN as null, numpy values as Python numbers, sorted keys, files
replaced atomically; and the one rounding of metric values for display.

>>> import numpy as np
>>> dumps({"b": np.float32(0.5), "a": [float("nan"), np.int64(2)]})
'{"a": [null, 2], "b": 0.5}'
>>> round_values({"accuracy": 58.8900001, "accuracy_ci95": [55.81234, float("nan")]})
{'accuracy': 58.89, 'accuracy_ci95': [55.81, None]}
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any


def to_jsonable(value: Any) -> Any:
    """A JSON-safe copy: NaN and infinities become None, numpy values Python numbers, keys strings."""
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if hasattr(value, "tolist"):
        return to_jsonable(value.tolist())
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def dumps(value: Any, *, indent: int | None = None) -> str:
    """``value`` as JSON text (see :func:`to_jsonable`), keys sorted; anything else as ``str``."""
    return json.dumps(to_jsonable(value), sort_keys=True, allow_nan=False, default=str, indent=indent)


def write_json(path: str | Path, value: Any, *, indent: int | None = 2) -> Path:
    """Write ``value`` to ``path`` through a temporary file and an atomic rename."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(dumps(value, indent=indent) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def round_values(value: Any, digits: int = 2) -> Any:
    """Floats rounded to ``digits`` (NaN as None), through dicts and lists; for display only."""
    if isinstance(value, dict):
        return {k: round_values(v, digits) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [round_values(v, digits) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    try:
        x = float(value)
    except (TypeError, ValueError):
        return value
    return None if math.isnan(x) else round(x, digits)
