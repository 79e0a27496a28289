"""numpy when it is importable, plain lists otherwise (RAAS_BRIDGE_NO_NUMPY=1 forces lists)."""
from __future__ import annotations

import os
from typing import Any, List, Sequence

np: Any
try:  # numpy is optional: the bridge never requires it
    if os.environ.get("RAAS_BRIDGE_NO_NUMPY") == "1":
        raise ImportError("disabled by RAAS_BRIDGE_NO_NUMPY")
    import numpy as np  # type: ignore[no-redef]
except ImportError:  # pragma: no cover - depends on the environment
    np = None


def have_numpy() -> bool:
    """True when adapters return numpy arrays."""
    return np is not None


def matrix(rows: List[List[Any]], dtype: str) -> Any:
    """A 2-D array (int64 / float32) from equal-length rows, or the rows themselves."""
    if np is None:
        return rows
    if not rows:
        return np.zeros((0, 0), dtype=dtype)
    return np.asarray(rows, dtype=dtype)


def vector(values: Sequence[Any], dtype: str) -> Any:
    """A 1-D array; dtype "object" keeps strings as Python objects (veRL's non-tensor batch)."""
    if np is None:
        return list(values)
    if dtype == "object":
        out = np.empty(len(values), dtype=object)
        out[:] = list(values)
        return out
    return np.asarray(list(values), dtype=dtype)
