"""Streaming generation over keras-hub CausalLM internals: compiled prefill + decode step, host sampling."""

from inference.engine.batching import BatchRunner, BatchScheduler
from inference.engine.decoding import IncrementalDecoder
from inference.engine.generate import TokenTrace, generate_stream
from inference.engine.runner import KVRunner, bucket, causal_lm_for
from inference.engine.sampling import sample_token

__all__ = [
    "BatchRunner",
    "BatchScheduler",
    "IncrementalDecoder",
    "KVRunner",
    "TokenTrace",
    "bucket",
    "causal_lm_for",
    "generate_stream",
    "sample_token",
]
