"""Streaming generation engines.

The fast engine (``weights`` -> ``decoder`` -> ``slots`` -> ``scheduler``) runs its own JAX forward pass
over the converted weights with continuous batching; ``runner``/``generate`` stream through keras-hub's
own cached forward pass, the fallback for backbones the fast decoder does not know and the reference
the fast one is tested against.
"""

from inference.engine.buckets import bucket
from inference.engine.decoding import IncrementalDecoder
from inference.engine.generate import generate_stream
from inference.engine.reply import Reply, TokenTrace
from inference.engine.runner import KVRunner, causal_lm_for
from inference.engine.sampling import sample_token
from inference.engine.scheduler import SlotScheduler
from inference.engine.slots import SlotEngine

__all__ = [
    "IncrementalDecoder",
    "KVRunner",
    "Reply",
    "SlotEngine",
    "SlotScheduler",
    "TokenTrace",
    "bucket",
    "causal_lm_for",
    "generate_stream",
    "sample_token",
]
