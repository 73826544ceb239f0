"""Shard keras-hub backbones over a device mesh: layout maps that never ask for an impossible split.

keras-hub's own layout maps shard fixed dimensions (the head count, the vocabulary) and crash with an
``IndivisibleError`` when the mesh axis does not divide them: SmolLM2 has 9 query / 3 key-value heads,
Gemma 3 270M has 4 / 1; Gemma 3 and Mistral have no map at all. Here each family declares, next to its
loader (``families/<family>/layout.py``, its record's ``weight_rules``), its large weights as
:class:`~inference.families.base.WeightRule` rows: the variable-path pattern, the shape computed from the
backbone config, and the dimensions it may be split on in order of preference. :func:`plan_layout` picks,
per weight, the first dimension the ``model`` axis divides, or replicates the weight and logs why.
Norm scales and other small vectors are always replicated.

Usage (the pool does this on the thread that owns the model, because keras' distribution state is
thread-local and a model built outside its scope recompiles on the second call)::

    mesh = make_mesh()                                   # all devices on the "model" axis
    distribution = model_parallel(layout_map_for("llama", config, mesh))
    with distribution.scope():
        backbone = build_the_backbone(config)            # and compile / jit here too

:func:`shard_backbone` re-creates an already built backbone inside the scope; :func:`describe_shardings`
lists every weight with its shape and actual sharding (``python -m inference shardings``).
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

# Defined with the family contract (a family's layout builds WeightRule rows); ShardingError is this module's
# error all the same: callers catch inference.sharding.ShardingError.
from inference.families.base import ShardingError, WeightRule

logger = logging.getLogger(__name__)

BATCH_AXIS = "batch"
MODEL_AXIS = "model"


@dataclass(frozen=True, slots=True)
class LayoutDecision:
    """Where one kind of weight goes: ``axes`` is the layout tuple (``None`` or ``"model"`` per dim)."""

    rule: WeightRule
    axes: tuple[str | None, ...]
    reason: str

    @property
    def split_dim(self) -> int | None:
        return next((i for i, axis in enumerate(self.axes) if axis is not None), None)


@dataclass(frozen=True, slots=True)
class ShardingRow:
    """One weight as it actually lies on the devices (from ``variable.value.sharding``)."""

    path: str
    shape: tuple[int, ...]
    dtype: str
    spec: tuple[str | None, ...]  # mesh axis per dimension, None = not split
    shard_shape: tuple[int, ...]  # the piece each device holds

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "shape": list(self.shape), "dtype": self.dtype,
                "spec": list(self.spec), "shard_shape": list(self.shard_shape)}


def shardable_families() -> tuple[str, ...]:
    """Catalogue family names that declare layout rules (:mod:`inference.families`)."""
    from inference.families import families

    return tuple(sorted(n for f in families().values() if f.weight_rules is not None
                        for n in (f.name, *f.aliases)))


def weight_rules(family: str, config: Mapping[str, Any]) -> list[WeightRule]:
    """The large-weight rules of ``family`` for this backbone ``config`` (``backbone.get_config()``)."""
    from inference.families import find_family

    record = find_family(family)
    rules_of = record.weight_rules if record is not None else None
    if rules_of is None:
        raise ShardingError(f"no layout map for family {family!r}; known: {', '.join(shardable_families())}")
    try:
        rules: list[WeightRule] = rules_of(config)
    except KeyError as exc:
        raise ShardingError(f"{family} backbone config lacks {exc.args[0]!r}") from exc
    return rules


def plan_layout(rules: Sequence[WeightRule], *, model_axis_size: int) -> list[LayoutDecision]:
    """Split each weight on its first preferred dimension that ``model_axis_size`` divides, else replicate.

    Pure (no keras): the decision is a function of shapes only, so it is tested on the real models'
    configs without loading them.
    """
    if model_axis_size < 1:
        raise ShardingError(f"model axis size must be >= 1, got {model_axis_size}")
    decisions = []
    for rule in rules:
        replicated = (None,) * len(rule.shape)
        if model_axis_size == 1:
            decisions.append(LayoutDecision(rule, replicated, "model axis has one device"))
            continue
        dim = next((d for d in rule.split_dims if rule.shape[d] % model_axis_size == 0), None)
        if dim is None:
            sizes = ", ".join(f"{n}={s}" for n, s in zip(rule.dim_names, rule.shape, strict=True))
            reason = f"replicated: no dimension ({sizes}) is divisible by the model axis ({model_axis_size})"
            decisions.append(LayoutDecision(rule, replicated, reason))
            continue
        axes = tuple(MODEL_AXIS if d == dim else None for d in range(len(rule.shape)))
        reason = f"split {rule.dim_names[dim]}={rule.shape[dim]} over {model_axis_size} devices"
        preferred = rule.split_dims[0]
        if dim != preferred:
            reason += (f" ({rule.dim_names[preferred]}={rule.shape[preferred]} is not divisible by"
                       f" {model_axis_size})")
        decisions.append(LayoutDecision(rule, axes, reason))
    return decisions


def make_mesh(devices: Sequence[Any] | None = None, *, model_axis: int | None = None) -> Any:
    """A ``("batch", "model")`` mesh; by default every device is on the model axis (batch axis 1).

    ``model_axis`` must divide the device count; the rest of the devices form the batch axis.
    """
    import keras

    devs = list(devices) if devices is not None else list(keras.distribution.list_devices())
    if not devs:
        raise ShardingError("no devices to build a mesh on")
    size = len(devs) if model_axis is None else model_axis
    if size < 1 or len(devs) % size:
        raise ShardingError(f"model axis {size} does not divide the {len(devs)} devices")
    return keras.distribution.DeviceMesh(
        shape=(len(devs) // size, size), axis_names=(BATCH_AXIS, MODEL_AXIS), devices=devs
    )


def mesh_from_setting(value: str, devices: Sequence[Any] | None = None) -> Any | None:
    """The device mesh an entry point serves on, from ``ARENA_MESH``: ``auto`` (every device on the model
    axis when there is more than one, else none), ``off`` (none: every model on one device), or a shape
    ``BxM`` (``B`` on the batch axis times ``M`` on the model axis, ``B*M`` = the device count)."""
    import keras

    text = value.strip().lower()
    devs = list(devices) if devices is not None else list(keras.distribution.list_devices())
    if text in ("off", "none", "1"):
        return None
    if text == "auto":
        return make_mesh(devs) if len(devs) > 1 else None
    batch, sep, model = text.partition("x")
    if not sep or not batch.isdigit() or not model.isdigit() or int(batch) < 1 or int(model) < 1:
        raise ShardingError(f"mesh {value!r}: use auto, off or a shape BxM such as 1x8")
    if int(batch) * int(model) != len(devs):
        need = int(batch) * int(model)
        raise ShardingError(f"mesh {value!r} needs {need} devices; this host has {len(devs)}")
    return make_mesh(devs, model_axis=int(model))


def describe_mesh(mesh: Any | None) -> str:
    """One line for the start-up screen and the About page: where the models are served."""
    if mesh is None:
        import jax

        return f"one device ({jax.devices()[0].platform})"
    axes = " x ".join(f"{size} {name}" for name, size in zip(mesh.axis_names, mesh.shape, strict=True))
    platform = str(mesh.devices.flat[0]).split(":")[0].upper()  # keras names devices "cpu:0", "gpu:1"...
    return f"{mesh.devices.size} {platform} devices as a mesh of {axes}"


def model_axis_size(mesh: Any) -> int:
    if MODEL_AXIS not in mesh.axis_names:
        raise ShardingError(f"mesh has no {MODEL_AXIS!r} axis: {mesh.axis_names}")
    return int(mesh.shape[list(mesh.axis_names).index(MODEL_AXIS)])


def layout_map_for(family: str, backbone_config: Mapping[str, Any], mesh: Any) -> Any:
    """A ``keras.distribution.LayoutMap`` for ``family`` on ``mesh``; logs every replicated weight."""
    import keras

    decisions = plan_layout(weight_rules(family, backbone_config), model_axis_size=model_axis_size(mesh))
    layout_map = keras.distribution.LayoutMap(mesh)
    for decision in decisions:
        layout_map[decision.rule.pattern] = decision.axes
        level = logging.INFO if decision.split_dim is not None else logging.WARNING
        logger.log(level, "%s %s %s: %s", family, decision.rule.name, decision.rule.shape, decision.reason)
    return layout_map


def model_parallel(layout_map: Any) -> Any:
    """The ``ModelParallel`` distribution for ``layout_map`` (inputs split on the batch axis)."""
    import keras

    return keras.distribution.ModelParallel(layout_map=layout_map, batch_dim_name=BATCH_AXIS)


# Patterns and preference orders do not depend on sizes: rules built from this probe config serve to
# decide from each variable's own shape (``family_distribution``).
_PROBE_CONFIG: dict[str, Any] = {"vocabulary_size": 1, "hidden_dim": 1, "num_query_heads": 1,
                                 "num_key_value_heads": 1, "intermediate_dim": 2, "head_dim": 1,
                                 "tie_word_embeddings": False}


def family_distribution(family: str, mesh: Any) -> Any:
    """A ``ModelParallel`` that lays out each variable of ``family`` from its own shape, as it is created.

    Same decisions as ``model_parallel(layout_map_for(family, config, mesh))`` but needs no config up
    front: the pool can enter it before a loader has read the model file. Decisions are logged once per
    kind of weight and shape.
    """
    import keras

    rules = weight_rules(family, _PROBE_CONFIG)
    axis = model_axis_size(mesh)
    logged: set[tuple[str, tuple[int, ...]]] = set()

    class _ShapeAwareModelParallel(keras.distribution.ModelParallel):
        def get_variable_layout(self, variable: Any) -> Any:
            if getattr(variable, "_layout", None) is not None:
                return variable._layout
            shape = tuple(int(d) for d in variable.shape)
            axes: tuple[str | None, ...] = (None,) * len(shape)
            rule = next((r for r in rules if re.fullmatch(r.pattern, variable.path)), None)
            if rule is not None and len(rule.shape) == len(shape):
                sized = WeightRule(rule.name, rule.pattern, shape, rule.dim_names, rule.split_dims)
                (decision,) = plan_layout([sized], model_axis_size=axis)
                axes = decision.axes
                if (rule.name, shape) not in logged:
                    logged.add((rule.name, shape))
                    level = logging.INFO if decision.split_dim is not None else logging.WARNING
                    logger.log(level, "%s %s %s: %s", family, rule.name, shape, decision.reason)
            return keras.distribution.TensorLayout(axes, self.device_mesh)

    return _ShapeAwareModelParallel(layout_map=keras.distribution.LayoutMap(mesh), batch_dim_name=BATCH_AXIS)


def backbone_config(backbone: Any) -> dict[str, Any]:
    """``backbone.get_config()`` plus what it forgets: Llama's ``tie_word_embeddings``."""
    config = dict(backbone.get_config())
    if hasattr(backbone, "tie_word_embeddings"):
        config["tie_word_embeddings"] = bool(backbone.tie_word_embeddings)
    return config


def shard_backbone(backbone: Any, *, family: str, mesh: Any) -> tuple[Any, Any]:
    """Re-create ``backbone`` sharded on ``mesh``; returns ``(sharded_backbone, distribution)``.

    For models that were built before a mesh was known (a debugging CLI, tests). It holds both copies
    for a moment; the pool builds straight inside the scope instead.
    """
    config = backbone_config(backbone)
    distribution = model_parallel(layout_map_for(family, config, mesh))
    with distribution.scope():
        sharded = type(backbone).from_config(config)
        sharded.set_weights(backbone.get_weights())
    return sharded, distribution


def describe_shardings(backbone: Any) -> list[ShardingRow]:
    """Every weight of ``backbone`` with its shape and how it actually lies on the devices."""
    rows = []
    for variable in backbone.weights:
        value = variable.value
        shape = tuple(int(d) for d in value.shape)
        sharding = getattr(value, "sharding", None)
        spec: tuple[str | None, ...] = (None,) * len(shape)
        raw_spec = getattr(sharding, "spec", None)
        if raw_spec is not None:
            axes = [_axis_name(a) for a in tuple(raw_spec)]
            spec = tuple(axes + [None] * (len(shape) - len(axes)))
        shard_shape = tuple(int(d) for d in sharding.shard_shape(shape)) if sharding is not None else shape
        rows.append(ShardingRow(variable.path, shape, str(value.dtype), spec, shard_shape))
    return rows


def format_rows(rows: Sequence[ShardingRow]) -> str:
    """A fixed-width table: path, shape, dtype, spec, per-device shape."""
    width = max((len(r.path) for r in rows), default=4)
    lines = [f"{'weight':<{width}}  {'shape':<18}  {'dtype':<8}  {'sharding':<28}  per-device"]
    for r in rows:
        spec = "replicated" if all(a is None for a in r.spec) else "(" + ", ".join(map(str, r.spec)) + ")"
        lines.append(f"{r.path:<{width}}  {str(r.shape):<18}  {r.dtype:<8}  {spec:<28}  {r.shard_shape}")
    return "\n".join(lines)


def _axis_name(axis: Any) -> str | None:
    if axis is None:
        return None
    if isinstance(axis, tuple):
        return "+".join(str(a) for a in axis)
    return str(axis)


# --- python -m inference shardings ------------------------------------------------------------------------

def tiny_configs() -> dict[str, dict[str, Any]]:
    """Per family: a tiny random config with the real model's awkward head ratios (SmolLM2: 3 kv heads
    per 9 query heads; Gemma 3 270M: 4 query / 1 key-value head), so ``--tiny`` shows the same fallbacks
    in seconds. From each family record's ``tiny.shardings``."""
    from inference.families import families

    return {name: dict(f.tiny.shardings) for name, f in families().items()
            if f.tiny is not None and f.tiny.shardings is not None}


def build_backbone(family: str, config: Mapping[str, Any]) -> Any:
    """A keras-hub backbone of ``family`` with random weights (built in whatever scope is active)."""
    import keras_hub

    from inference.families import family as family_record

    try:
        backbones = family_record(family).backbones
    except KeyError as exc:
        raise ShardingError(exc.args[0]) from exc
    if not backbones:
        raise ShardingError(f"family {family!r} names no keras-hub backbone")
    return getattr(keras_hub.models, backbones[0][0])(**config)


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _UsageError(message)


def _parser() -> _Parser:
    parser = _Parser(prog="python -m inference shardings",
                     description="Print every weight with its shape and sharding on a device mesh.")
    parser.add_argument("--model", help="catalogue slug of the model to shard")
    parser.add_argument("--family", choices=sorted(tiny_configs()), help="with --tiny: a tiny random model")
    parser.add_argument("--tiny", action="store_true", help="shard a tiny random model of --family")
    parser.add_argument("--model-axis", type=int, default=None,
                        help="devices on the model axis (default: all; the rest form the batch axis)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    return parser


def cli_shardings(argv: Sequence[str], *, load: Callable[[str], Any] | None = None) -> int:
    """``python -m inference shardings``: exit 0 after printing, 2 with a one-line reason on bad input.

    ``load(slug)`` returns a :class:`inference.families.base.LoadedModel`; the CLI entry point passes
    the catalogue's loader. Without it only ``--family F --tiny`` works.
    """
    try:
        args = _parser().parse_args(list(argv))
        if bool(args.model) == bool(args.tiny):
            raise _UsageError("give either --model SLUG or --family FAMILY --tiny")
        if args.tiny and not args.family:
            raise _UsageError("--tiny needs --family (" + "|".join(sorted(tiny_configs())) + ")")
        if args.model and load is None:
            raise _UsageError("no model catalogue is wired in here; use --family FAMILY --tiny")
        mesh = make_mesh(model_axis=args.model_axis)
        if args.tiny:
            family = args.family
            config = tiny_configs()[family]
            with model_parallel(layout_map_for(family, config, mesh)).scope():
                backbone = build_backbone(family, config)
        else:
            assert load is not None
            loaded = load(args.model)
            family = loaded.family
            backbone, _ = shard_backbone(loaded.backbone, family=family, mesh=mesh)
    except (_UsageError, ShardingError, LookupError, ValueError, OSError) as exc:
        reason = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"error: {reason}", file=sys.stderr)
        return 2
    rows = describe_shardings(backbone)
    summary = _summary(rows, mesh=mesh, family=family)
    if args.json:
        print(json.dumps({**summary, "weights": [r.as_dict() for r in rows]}, indent=1))
    else:
        print(format_rows(rows))
        print(f"{summary['family']} on mesh {summary['mesh']}: {summary['split']} weights split, "
              f"{summary['replicated']} replicated; {summary['device_mb']:.1f} MB per device "
              f"of {summary['total_mb']:.1f} MB")
    return 0


def _summary(rows: Sequence[ShardingRow], *, mesh: Any, family: str) -> dict[str, Any]:
    import numpy as np

    def nbytes(shape: tuple[int, ...], dtype: str) -> int:
        return int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize

    split = sum(1 for r in rows if any(a is not None for a in r.spec))
    return {
        "family": family,
        "mesh": dict(zip(mesh.axis_names, (int(s) for s in mesh.shape), strict=True)),
        "split": split,
        "replicated": len(rows) - split,
        "total_mb": sum(nbytes(r.shape, r.dtype) for r in rows) / 2**20,
        "device_mb": sum(nbytes(r.shard_shape, r.dtype) for r in rows) / 2**20,
    }
