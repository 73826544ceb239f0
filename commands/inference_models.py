"""What every ``python -m inference`` command needs: the settings, the catalogue, one built model.

Shared by :mod:`commands.inference` and :mod:`commands.inference_bench`. Bad input raises
:class:`UsageError`, which the command line prints as one line and exit status 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from inference.catalogue import CatalogueEntry
from inference.protocol import GenerationParams
from inference.split_weights import Progress

if TYPE_CHECKING:
    from inference.families.base import LoadedModel
    from inference.protocol import ChatModel
    from settings import Settings


class UsageError(Exception):
    """Bad input from the command line; printed as one line, exit status 2."""


def load_settings() -> Settings:
    """The settings without secrets (a command that needs a key reads it through :mod:`wiring`)."""
    from settings import SettingsProblem
    from settings import get_settings_without_secrets as get_settings

    try:
        return get_settings()
    except SettingsProblem as exc:
        raise UsageError(str(exc)) from exc


def entries() -> list[CatalogueEntry]:
    """The catalogue ``ARENA_CATALOGUE_PATH`` names."""
    from inference.catalogue import CatalogueError, load_catalogue

    try:
        return load_catalogue(load_settings().catalogue_path)
    except CatalogueError as exc:
        raise UsageError(str(exc)) from exc


def find_entry(slug: str) -> CatalogueEntry:
    from inference.catalogue import find

    try:
        return find(entries(), slug)
    except KeyError as exc:
        raise UsageError(exc.args[0]) from exc


def cache_dir() -> Path:
    """The models folder."""
    from wiring import models_dir

    return models_dir(load_settings())


def weights_problem(entry: CatalogueEntry, *, assemble: bool = True) -> str | None:
    """Why this entry's weights are not available here (a one-line fix), or None."""
    from inference.builder import weights_problem as problem

    return problem(entry, cache_dir=cache_dir(), assemble=assemble)


def stderr_progress(slug: str) -> Progress:
    """A ``progress(stage, fraction)`` that writes the start-up screen's stages to stderr, one line each
    (``assemble`` redraws one line with its percentage on a terminal, prints 25% steps elsewhere)."""
    from inference.pool import stage_text

    shown: set[str] = set()
    terminal = sys.stderr.isatty()

    def progress(stage: str, fraction: float) -> None:
        text = f"{slug}: {stage_text(stage, fraction)}"
        if terminal and 0.0 < fraction < 1.0:
            print(f"\r{text}", end="", file=sys.stderr, flush=True)
            return
        step = f"{stage}:{int(fraction * 4)}"
        if step in shown:
            return
        shown.add(step)
        print(("\r" if terminal else "") + text, file=sys.stderr, flush=True)

    return progress


def sampling_params(entry: CatalogueEntry, args: argparse.Namespace) -> GenerationParams:
    """The entry's sampling settings with the sampling flags given on the command line."""
    overrides = {
        name: getattr(args, name)
        for name in ("max_new_tokens", "temperature", "top_p", "top_k", "seed")
        if getattr(args, name) is not None
    }
    try:
        return dataclasses.replace(entry.sampling, **overrides)
    except ValueError as exc:
        raise UsageError(f"{exc}; fix the flag") from exc


def setup_compilation_cache() -> None:
    """The persistent compilation cache, as ``chat``/``generate`` use it (a bench measures the same)."""
    from wiring import enable_compilation_cache

    enable_compilation_cache(load_settings())


def build(entry: CatalogueEntry) -> ChatModel:
    """The entry's model as ``chat`` and ``generate`` serve it, its loading stages shown on stderr."""
    problem = weights_problem(entry)
    if problem:
        raise UsageError(problem)
    settings = load_settings()
    setup_compilation_cache()
    from inference.builder import build_chat_model
    from wiring import api_keys

    progress = stderr_progress(entry.slug)
    model = build_chat_model(
        entry, cache_dir=cache_dir(), api_key=api_keys(settings).get(entry.slug), warm_up=False,
        distribution=distribution(entry, settings.mesh), keep_keras_weights=False, progress=progress,
    )
    if entry.source_kind != "remote":
        progress("compile", 0.0)  # the first request compiles its buckets
    return model


def distribution(entry: CatalogueEntry, mesh_setting: str) -> Any | None:
    """The keras distribution ``ARENA_MESH`` asks for (None: one device), as the pool would use."""
    from inference.sharding import ShardingError, family_distribution, mesh_from_setting

    if entry.source_kind == "remote":
        return None
    try:
        mesh = mesh_from_setting(mesh_setting)
    except ShardingError as exc:
        raise UsageError(f"ARENA_MESH: {exc}") from exc
    return None if mesh is None else family_distribution(entry.family, mesh)


def load_for_shardings(slug: str) -> LoadedModel:
    """The weights ``python -m inference shardings`` lays out; a bad slug raises LookupError."""
    from inference.builder import load_weights

    try:
        entry = find_entry(slug)
        problem = weights_problem(entry)
    except UsageError as exc:
        raise LookupError(str(exc)) from exc
    if problem:
        raise LookupError(problem)
    if entry.source_kind == "remote":
        raise LookupError(f"model {slug!r} is remote: nothing to shard here")
    return load_weights(entry, cache_dir=cache_dir())
