"""Keep BLAS single-threaded inside ranking's computations.

Every matrix here is small (at most models × models, times a block of bootstrap rounds), where
OpenBLAS's own threads only add synchronisation, and on a busy machine they are ruinous: a 100 × 100
solve measured 54 ms with two contended BLAS threads against 0.13 ms with one. Ranking parallelises
over bootstrap blocks itself. The limit is scoped to the call (threadpoolctl restores the previous
setting on exit), not flipped at import time.

Caveat: OpenBLAS's thread count is one process-wide setting. Two leaderboards computed at once on
different threads (two page views) save and restore it in interleaved order, so the process may keep
one BLAS thread afterwards. That only affects speed (numpy linear algebra elsewhere in the process runs
single-threaded; JAX does not use OpenBLAS), never results.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from threadpoolctl import threadpool_limits


@contextmanager
def single_threaded_blas() -> Iterator[None]:
    """Run the block with one BLAS thread."""
    with threadpool_limits(limits=1, user_api="blas"):
        yield
