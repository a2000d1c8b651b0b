"""Data pickles read without running code: the published files that are pickles (Action Genome's
annotations, CIFAR's batches) hold builtins and NumPy arrays only, so :func:`load_data` admits those and
refuses, naming the file, any pickle that names another class or function (unpickling one can run any
code: Python's docs, "Restricting Globals")."""

from __future__ import annotations

import importlib
import io
import pickle
from pathlib import Path
from typing import Any

from spotdiff.errors import DataError

#: the only callables a data pickle may name: NumPy arrays, dtypes and scalars as numpy 1 and 2 spell them,
#: and the helpers old protocols use for bytes
ALLOWED = frozenset({
    ("numpy", "ndarray"), ("numpy", "dtype"),
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
    ("numpy.core.numeric", "_frombuffer"), ("numpy._core.numeric", "_frombuffer"),
    ("_codecs", "encode"), ("builtins", "bytes"), ("__builtin__", "bytes"),
})  # fmt: skip


class _DataUnpickler(pickle.Unpickler):
    """Builds builtins and NumPy arrays only; any other global is refused."""

    what = "a data pickle"

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in ALLOWED:
            raise pickle.UnpicklingError(
                f"it names {module}.{name}, which {self.what} never holds; not loaded, since unpickling it could "
                "run code"
            )
        if module.startswith("numpy.core"):  # numpy 1's spelling of numpy 2's numpy._core
            module = "numpy._core" + module[len("numpy.core") :]
        return getattr(importlib.import_module("builtins" if module == "__builtin__" else module), name)


def load_data(path: str | Path, what: str = "a data pickle") -> Any:
    """A pickle of builtins and NumPy arrays, read without running code; anything else a DataError.

    Args:
        path: the pickle file.
        what: what the file is, with its article, for the messages ("an Action Genome annotation").

    >>> import tempfile, numpy as np
    >>> path = Path(tempfile.mkdtemp()) / "x.pkl"
    >>> _ = path.write_bytes(pickle.dumps({"a": np.arange(3)}))
    >>> load_data(path)["a"].tolist()
    [0, 1, 2]
    """
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise DataError(f"cannot read the file: {exc}", file=path) from None
    unpickler = _DataUnpickler(io.BytesIO(raw), encoding="latin1")
    unpickler.what = what
    try:
        return unpickler.load()
    except Exception as exc:  # a damaged pickle raises anything
        raise DataError(f"refused as {what} ({type(exc).__name__}: {exc})", file=path) from None
