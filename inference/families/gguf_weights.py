"""Copying dequantized GGUF tensors into keras variables, with the shape checked first.

A wrong layout is the commonest porting bug and keras' own error on ``assign`` names neither the
tensor nor the layer; :func:`assign` does, so a new family's mistakes show up at load time.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from inference.formats.gguf_reader import GGUFError, GGUFFile

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


def file_metadata(
    gguf: GGUFFile, *, config: dict[str, Any], backbone: Any, tokenizer: Any, dtype: str
) -> dict[str, Any]:
    """What a loader reports about the file (``LoadedModel.metadata``; ``inference list``, the file's
    chat template for ``template = "file"``), with the config's scalar values."""
    return {
        "architecture": gguf.architecture,
        "name": gguf.get("general.name", gguf.path.stem),
        "path": str(gguf.path),
        "dtype": dtype,
        "parameters": int(backbone.count_params()),
        "file_type": gguf.get("general.file_type", None),
        "add_bos": tokenizer.add_bos,
        "chat_template": gguf.get("tokenizer.chat_template", None),
        "pre_tokenizer": getattr(tokenizer, "pre_tokenizer_name", None),
        **{key: value for key, value in config.items() if isinstance(value, int | float | bool)},
    }
