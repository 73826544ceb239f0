"""The page that waits for the models: each one's loading state until enough are ready to play."""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from webapp import context as run
from webapp.context import Context, ModelRow

POOL_POLL_S = 2.0
FIRST_START = (
    "First start on this machine: each model's weights are converted once and stored for later starts. "
    "On 2 cores that takes from about 15 s (SmolLM2) to 2 minutes (Qwen2.5-Coder-1.5B) a model; a fresh "
    "clone's Arena opened 3 min 37 s after `make run`, setup included (docs/BENCHMARKS.md). Later starts "
    "read the stored weights in seconds."
)


def show_pool_progress(ctx: Context, *, needed: int, pairable: bool = False) -> bool:
    """True once ``needed`` models are usable (``pairable``: usable and drawn for anonymous battles, the
    Arena's pair); until then the page shows each model's loading state.

    The progress is a fragment that the browser reruns every ``POOL_POLL_S`` seconds (``run_every``);
    once enough models are ready it reruns the whole page, which then gets True here. No script run
    sleeps or chains ``st.rerun()``: a chain ends for good as soon as one run decides not to go on.
    """
    if len(_counted(run.pool_snapshot(ctx), pairable)) >= needed:
        return True
    _pool_progress(ctx, needed=needed, pairable=pairable)
    return False


def _counted(snapshot: run.PoolSnapshot, pairable: bool) -> Sequence[str]:
    return snapshot.pairable if pairable else snapshot.usable


@st.fragment(run_every=POOL_POLL_S)
def _pool_progress(ctx: Context, *, needed: int, pairable: bool) -> None:
    snapshot = run.pool_snapshot(ctx)  # one read: the counts and the states below agree
    if len(_counted(snapshot, pairable)) >= needed:
        st.rerun(scope="app")  # the page now opens (also when a model finished since the check above)
    st.info(f"Models are loading and compiling; the page opens as soon as {needed} are ready.")
    st.caption(f"Serving on {run.serving_devices()}.")
    total = len(snapshot.rows)
    st.progress(snapshot.ready / max(1, total), text=f"{snapshot.ready} of {total} models ready")
    if any(row.converting for row in snapshot.rows):
        st.caption(FIRST_START)
    for row in snapshot.rows:
        st.text(row_text(row))
    if snapshot.settled:
        # Still polled: an admin may enable a contestant whose model is ready.
        st.error("Not enough models could be loaded; see the messages above.")


def row_text(row: ModelRow) -> str:
    """One model's line: ``Qwen: loading - convert (37 s so far)``, ``Qwen: ready (loaded in 12 s)``."""
    text = f"{row.name}: {row.state}{' - ' + row.message if row.message else ''}"
    if row.seconds is None:
        return text
    if row.state == "ready":
        return f"{text} (loaded in {row.seconds:.0f} s)"
    if row.state in ("loading", "compiling"):
        return f"{text} ({row.seconds:.0f} s so far)"
    return text
