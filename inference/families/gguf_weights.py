"""Copying dequantized GGUF tensors into keras variables, with the shape checked first.

A wrong layout is the commonest porting bug and keras' own error on ``assign`` names neither the
tensor nor the layer; :func:`assign` does, so a new family's mistakes show up at load time.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from inference.gguf_reader import GGUFError

ALLOWED_DTYPES = ("float32", "bfloat16", "float16")


class WeightLayoutError(GGUFError):
    """A GGUF tensor does not fit the keras-hub variable it is meant for."""


def check_dtype(dtype: str) -> str:
    if dtype not in ALLOWED_DTYPES:
        raise ValueError(f"dtype {dtype!r} is not supported; use one of {', '.join(ALLOWED_DTYPES)}")
    return dtype


def assign(variable: Any, value: np.ndarray, *, tensor: str) -> None:
    """``variable.assign(value)`` after checking the shape; ``tensor`` names the source for errors."""
    expected = tuple(int(d) for d in variable.shape)
    if tuple(value.shape) != expected:
        raise WeightLayoutError(
            f"tensor {tensor!r} has shape {tuple(value.shape)} after conversion, but {variable.path} "
            f"expects {expected}"
        )
    variable.assign(value)


def heads_first(weight: np.ndarray, *, heads: int) -> np.ndarray:
    """``(heads * head_dim, in)`` -> ``(heads, head_dim, in)``: split a projection's rows per head."""
    rows, cols = weight.shape
    if rows % heads:
        raise WeightLayoutError(f"{rows} rows do not split into {heads} heads")
    return weight.reshape(heads, rows // heads, cols)
