"""The fast engine's converted weights on disk: written once after a model's first load, read back on
every later start instead of dequantizing the file into keras-hub and converting it again.

A store is one folder: ``weights.bin`` (every array of the params pytree, raw, 64-byte aligned) and
``manifest.json`` (the :class:`~inference.families.base.DecoderSpec`, the pytree's shape with each
array's dtype, shape and offset, and what the caller wants back beside them). The manifest names only
the block containers this module knows (:data:`CONTAINERS`); nothing in it is ever executed. A folder
is written under a temporary name and renamed into place, so a store is either whole or absent; one
whose manifest or data does not add up is ignored (and the model converted again).

Reading is a copy per array from the file into the device's memory: Qwen2.5-Coder-1.5B's 1.2 GB in a
few seconds, against the minute and a half its read and conversion take (docs/BENCHMARKS.md).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from inference.families.base import DecoderSpec, LayerSpec
from inference.formats import matrices

STORE_VERSION = 1  # bump when the folder's layout changes
MANIFEST = "manifest.json"
DATA = "weights.bin"
ALIGN = 64
CONTAINERS: dict[str, type[tuple[Any, ...]]] = {
    cls.__name__: cls for cls in (matrices.Q8Blocks, matrices.Q4Blocks, matrices.Q6Blocks,
                                  matrices.QuantizedMatrix, matrices.StackedBlocks)
}
log = logging.getLogger(__name__)


class StoredWeights(NamedTuple):
    """What a store gives back: the spec, the params pytree on the default device, and ``extra``."""

    spec: DecoderSpec
    params: dict[str, Any]
    extra: dict[str, Any]


class StoreError(ValueError):
    """A folder that is not a whole store of this version."""


def save(directory: Path, spec: DecoderSpec, params: dict[str, Any], *, extra: dict[str, Any]) -> int:
    """Write ``params`` (and ``spec``, and the JSON-able ``extra``) as the store ``directory``, replacing
    any there; returns the bytes of array data written. The folder appears whole or not at all."""
    partial = directory.with_name(f"{directory.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        arrays: list[dict[str, Any]] = []
        with open(partial / DATA, "wb") as data:
            tree = _encode(params, arrays, data)
            data.flush()
            os.fsync(data.fileno())
            size = data.tell()
        manifest = {"version": STORE_VERSION, "spec": _spec_to_json(spec), "tree": tree, "arrays": arrays,
                    "data_bytes": size, "extra": extra}
        (partial / MANIFEST).write_text(json.dumps(manifest))
        shutil.rmtree(directory, ignore_errors=True)
        os.replace(partial, directory)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return size


def load(directory: Path) -> StoredWeights | None:
    """The store in ``directory``; None when there is none. A folder that is not a whole store of this
    version is logged and ignored (None), so the caller converts the model again."""
    if not (directory / MANIFEST).is_file():
        return None
    try:
        return read(directory)
    except (StoreError, OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("ignoring the stored weights in %s: %s", directory, exc)
        return None


def sizes(directory: Path) -> tuple[int, int] | None:
    """``(bytes of all arrays, bytes of the largest)`` of the store in ``directory`` from its manifest
    alone (what reading it back costs in memory), or None when there is no readable store there."""
    try:
        lengths = [int(np.prod(a["shape"], dtype=np.int64)) * np.dtype(_dtype(a["dtype"])).itemsize
                   for a in _manifest(directory)["arrays"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return sum(lengths), max(lengths, default=0)


def read(directory: Path) -> StoredWeights:
    """:func:`load`, raising :class:`StoreError` (or OSError) for a folder that is not a whole store."""
    manifest = _manifest(directory)
    data_path = directory / DATA
    if data_path.stat().st_size != manifest["data_bytes"]:
        raise StoreError(f"{DATA} holds {data_path.stat().st_size} bytes, the manifest says "
                         f"{manifest['data_bytes']}")
    arrays = manifest["arrays"]
    with open(data_path, "rb") as data:
        params = _decode(manifest["tree"], arrays, data)
    if not isinstance(params, dict):
        raise StoreError("the stored pytree is not a params dict")
    return StoredWeights(_spec_from_json(manifest["spec"]), params, dict(manifest["extra"]))


def _manifest(directory: Path) -> dict[str, Any]:
    """The store's manifest, StoreError (a ValueError) unless it is one of this version."""
    manifest = json.loads((directory / MANIFEST).read_text())
    if not isinstance(manifest, dict) or manifest.get("version") != STORE_VERSION:
        raise StoreError(f"store version {manifest.get('version') if isinstance(manifest, dict) else '?'}, "
                         f"not {STORE_VERSION}")
    return manifest


# ---- the pytree ---------------------------------------------------------------------------------------


def _encode(value: Any, arrays: list[dict[str, Any]], data: Any) -> Any:
    """The JSON shape of ``value``; each array is appended to ``data`` and described in ``arrays``."""
    if isinstance(value, dict):
        return {"dict": {str(k): _encode(v, arrays, data) for k, v in value.items()}}
    if isinstance(value, tuple) and type(value).__name__ in CONTAINERS:
        return {"container": type(value).__name__, "items": [_encode(v, arrays, data) for v in value]}
    if isinstance(value, list):
        return {"list": [_encode(v, arrays, data) for v in value]}
    if isinstance(value, tuple):
        return {"tuple": [_encode(v, arrays, data) for v in value]}
    host = np.asarray(value)
    if host.dtype == object:
        raise TypeError(f"cannot store a {type(value).__name__}")
    padding = -data.tell() % ALIGN
    data.write(b"\0" * padding)
    arrays.append({"dtype": host.dtype.name, "shape": list(host.shape), "offset": data.tell()})
    data.write(np.ascontiguousarray(host).tobytes())
    return {"array": len(arrays) - 1}


def _decode(node: Any, arrays: list[dict[str, Any]], data: Any) -> Any:
    if not isinstance(node, dict) or len(node) not in (1, 2):
        raise StoreError(f"unexpected node {str(node)[:80]}")
    if "dict" in node:
        return {k: _decode(v, arrays, data) for k, v in node["dict"].items()}
    if "list" in node:
        return [_decode(v, arrays, data) for v in node["list"]]
    if "tuple" in node:
        return tuple(_decode(v, arrays, data) for v in node["tuple"])
    if "container" in node:
        container = CONTAINERS.get(node["container"])
        if container is None:
            raise StoreError(f"unknown container {node['container']!r}")
        return container(*(_decode(v, arrays, data) for v in node["items"]))
    if "array" in node:
        return _read_array(arrays[int(node["array"])], data)
    raise StoreError(f"unexpected node {str(node)[:80]}")


def _read_array(record: dict[str, Any], data: Any) -> Any:
    import jax.numpy as jnp

    dtype = _dtype(record["dtype"])
    shape = tuple(int(n) for n in record["shape"])
    count = int(np.prod(shape, dtype=np.int64))
    data.seek(int(record["offset"]))
    host = np.fromfile(data, dtype=dtype, count=count)
    if host.size != count:
        raise StoreError(f"an array of {count} values ends past the data")
    return jnp.asarray(host.reshape(shape))


def _dtype(name: str) -> Any:
    import jax.numpy as jnp

    return jnp.dtype(name)  # numpy's names, and ml_dtypes' bfloat16


# ---- the spec -----------------------------------------------------------------------------------------


def _spec_to_json(spec: DecoderSpec) -> dict[str, Any]:
    return dataclasses.asdict(spec)


def _spec_from_json(raw: dict[str, Any]) -> DecoderSpec:
    fields = {f.name for f in dataclasses.fields(DecoderSpec)}
    if set(raw) != fields:
        raise StoreError(f"the stored spec's fields differ from this code's: {sorted(set(raw) ^ fields)}")
    layers = tuple(LayerSpec(**layer) for layer in raw["layers"])
    return DecoderSpec(**{**raw, "layers": layers})
