"""Host-side sampling: per-request greedy / temperature / top-k / top-p as plain runtime values.

The compiled step returns float32 logits; choosing the token here means no sampler setting is ever
baked into a compiled function (keras-hub's samplers are), so a visitor's settings cost no compile.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from inference.protocol import GenerationParams


@dataclass
class Candidates:
    """Per row of a step: the best logits (descending), their ids, the log-normaliser at the row's
    temperature; ``logits`` (all of them) may still be on the device."""

    values: np.ndarray
    ids: np.ndarray
    log_normalizer: np.ndarray
    logits: Any

    def full_row(self, row: int) -> np.ndarray:
        return np.asarray(self.logits[row])

    @classmethod
    def from_logits(cls, logits: np.ndarray, temperatures: np.ndarray) -> Candidates:
        """The best one of each row of host logits ``(batch, vocab)``: :func:`sample_from_candidates`
        then decides exactly as :func:`sample_token` on the full row (fetched when one cannot decide)."""
        ids = np.argmax(logits, axis=-1)[:, None]
        values = np.take_along_axis(logits, ids, axis=-1)
        normalizer = np.zeros(logits.shape[:1])
        if np.any(temperatures > 0):  # greedy rows never read it
            scaled = logits.astype(np.float64) / np.where(temperatures > 0, temperatures, 1.0)[:, None]
            top = scaled.max(axis=-1)
            normalizer = top + np.log(np.exp(scaled - top[:, None]).sum(axis=-1))
        return cls(values, ids, normalizer, logits)


def sample_row(candidates: Candidates, row: int, params: GenerationParams, rng: np.random.Generator) -> int:
    """The token of row ``row`` of a step's candidates (:func:`sample_from_candidates`)."""
    return sample_from_candidates(
        candidates.values[row], candidates.ids[row], float(candidates.log_normalizer[row]), params, rng,
        lambda: candidates.full_row(row),
    )


def sample_token(logits: np.ndarray, params: GenerationParams, rng: np.random.Generator) -> int:
    """One token id from ``logits`` (shape ``(vocab,)``); ``temperature == 0`` is greedy argmax."""
    if params.temperature == 0:
        return int(np.argmax(logits))
    scaled = logits.astype(np.float64) / params.temperature
    candidates = np.arange(scaled.shape[0])
    if 0 < params.top_k < scaled.shape[0]:
        candidates = np.argpartition(-scaled, params.top_k - 1)[: params.top_k]
    values = scaled[candidates]
    order = np.argsort(-values, kind="stable")
    candidates, values = candidates[order], values[order]
    probs = np.exp(values - values[0])
    probs /= probs.sum()
    if params.top_p < 1.0:
        # Keep the smallest prefix whose mass reaches top_p (always at least the best token).
        keep = int(np.searchsorted(np.cumsum(probs), params.top_p) + 1)
        candidates, probs = candidates[:keep], probs[:keep] / probs[:keep].sum()
    return int(candidates[rng.choice(len(candidates), p=probs)])


def sample_from_candidates(
    values: np.ndarray,
    ids: np.ndarray,
    log_normalizer: float,
    params: GenerationParams,
    rng: np.random.Generator,
    full_logits: Callable[[], np.ndarray],
) -> int:
    """The same choice as :func:`sample_token`, from the device's best candidates when that is exact.

    ``values``/``ids``: the K largest logits, best first; ``log_normalizer``: logsumexp of all logits
    divided by the temperature, so ``exp(values / T - log_normalizer)`` are exact probabilities. A
    top-k within K, or a top-p nucleus that the candidates already cover, needs nothing else; otherwise
    (plain temperature sampling, or a flat distribution) ``full_logits()`` fetches the whole row.
    """
    if params.temperature == 0:
        return int(ids[0])
    scaled = values.astype(np.float64) / params.temperature
    if 0 < params.top_k <= len(values):
        scaled, ids = scaled[: params.top_k], ids[: params.top_k]
        probs = np.exp(scaled - scaled[0])
        probs /= probs.sum()
    else:
        probs = np.exp(scaled - log_normalizer)
        if not (params.top_p < 1.0 and probs.sum() >= params.top_p):
            return sample_token(full_logits(), params, rng)
    if params.top_p < 1.0:
        keep = int(np.searchsorted(np.cumsum(probs), params.top_p) + 1)
        ids, probs = ids[:keep], probs[:keep]
    probs = probs / probs.sum()
    return int(ids[rng.choice(len(ids), p=probs)])
