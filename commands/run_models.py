"""What every command that runs catalogue models shares: the input error that exits 2, picking the
catalogue entries, the sampling with its command-line overrides, waiting for the pool to load a model,
and the progress bar on stderr (the automatic arena, the fixing suites, replay, ``inference serve``)."""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Sequence
from typing import Any

LOAD_TIMEOUT_S = 3600.0


class RunInputError(ValueError):
    """A problem with what the command was asked to do (unknown model, bad catalogue): exit 2."""


def select_entries(entries: Sequence[Any], slugs: Sequence[str]) -> list[Any]:
    """``['all']``: the enabled entries; else the named ones in the order given (disabled ones too:
    naming a model is asking for it)."""
    if list(slugs) == ["all"]:
        chosen = [e for e in entries if e.enabled]
        if not chosen:
            raise RunInputError("the catalogue has no enabled models")
        return chosen
    by_slug = {e.slug: e for e in entries}
    unknown = [s for s in slugs if s not in by_slug]
    if unknown:
        raise RunInputError(f"unknown model(s) {', '.join(unknown)}; catalogue: {', '.join(by_slug)}")
    return [dataclasses.replace(by_slug[s], enabled=True) for s in dict.fromkeys(slugs)]


def sampling_params(sampling: Any, overrides: dict[str, Any]) -> Any:
    """The catalogue entry's sampling with the command line's overrides; seed 0 when none is set."""
    params = dataclasses.replace(sampling, **overrides)
    return params if params.seed is not None else dataclasses.replace(params, seed=0)


def wait_ready(pool: Any, slug: str) -> str | None:
    """Block until ``slug`` is ready (None) or failed/refused (the reason)."""
    deadline = time.monotonic() + LOAD_TIMEOUT_S
    while time.monotonic() < deadline:
        status = pool.status()[slug]
        if status.state == "ready":
            return None
        if status.state in ("failed", "refused"):
            return status.message or status.state
        time.sleep(0.2)
    return f"not ready after {LOAD_TIMEOUT_S:.0f} s"


def progress_bar(*, total: int, enabled: bool) -> Any:
    """A run counter on stderr (tqdm), off with ``enabled=False``."""
    from tqdm import tqdm

    return tqdm(total=total, file=sys.stderr, unit="run", disable=not enabled, dynamic_ncols=True)
