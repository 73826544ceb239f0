"""Streaming generation engines.

Files: ``weights`` converts a keras-hub backbone into plain matrices, ``forward`` is the fast engine's
JAX forward pass over them, ``fast_engine`` its compiled prefill/step programs, ``batcher`` the
continuous batcher that drives an engine row by row, ``reply`` one request's bookkeeping (stop tokens,
budget, streamed text, timings), ``detokenize`` the UTF-8-safe incremental detokeniser, ``sampling`` the
host-side sampler, ``buckets`` the compiled shapes. ``keras_engine`` puts keras-hub's own cached forward
pass behind the same prefill/step interface (one row): the fallback for backbones the fast decoder does
not know and the reference the fast one is tested against. One batcher drives both. ``weight_policy``
chooses the weight format.
"""

from inference.engine.batcher import SlotScheduler
from inference.engine.buckets import bucket
from inference.engine.detokenize import IncrementalDecoder
from inference.engine.fast_engine import SlotEngine
from inference.engine.keras_engine import KerasEngine, KVRunner, causal_lm_for, generate_stream
from inference.engine.reply import Reply, TokenTrace
from inference.engine.sampling import sample_token

__all__ = [
    "IncrementalDecoder",
    "KVRunner",
    "KerasEngine",
    "Reply",
    "SlotEngine",
    "SlotScheduler",
    "TokenTrace",
    "bucket",
    "causal_lm_for",
    "generate_stream",
    "sample_token",
]
