"""``python -m inference bench --fidelity``: how far each low-precision weight format moves a model's
next-token distributions from float32, teacher-forced on the bench prompt and a float32 reply."""

from __future__ import annotations

import dataclasses
import gc
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.inference import BENCH_MESSAGES, local_model, serve_ids
from inference.catalogue import CatalogueEntry
from inference.engine import TokenTrace
from inference.protocol import GenerationParams
from inference.split_weights import Progress

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Logits = npt.NDArray[np.float64]  # (positions, vocabulary)


FIDELITY_FORMATS = ("bfloat16", "int8", "q8", "q4", "q8a8", "q4a8")


def run_fidelity_bench(
    entry: CatalogueEntry, *, cache_dir: Path, new_tokens: int = 256, progress: Progress | None = None,
    formats: tuple[str, ...] = FIDELITY_FORMATS,
) -> dict[str, Any]:
    """How far each low-precision weight format (``formats``: all of :data:`FIDELITY_FORMATS` unless
    asked for fewer) moves the model from float32, teacher-forced; ``progress`` is told ``fidelity FMT``
    as each format starts (a format is a conversion and two passes: minutes on a 1.5B model).

    The float32 fast engine writes a greedy, stop-free reply to the bench prompt; prompt + reply is then
    run through the decoder in every format: ``{model, positions, formats: {fmt: {top1_agreement,
    mean_kl, matrices, decode_top1_agreement, decode_mean_kl}}}``, KL(float32 ‖ format) in nats,
    averaged over positions. The first two come from one prefill of the whole sequence (how a prompt is
    read); the ``decode_`` pair from feeding it one token a step through a cache (how a reply's tokens
    are computed: the native kernels' decode-batch path, which multiplies q4's integers exactly).
    """
    from inference.builder import build_chat_model
    from inference.local import return_freed_memory

    model = local_model(build_chat_model(dataclasses.replace(entry, weights="float32"), cache_dir=cache_dir,
                                    warm_up=False, progress=progress))
    if model.engine is None:
        raise ValueError(f"{entry.slug}: the fast engine does not run this model ({model.engine_note})")
    params = GenerationParams(max_new_tokens=new_tokens, temperature=0.0)
    ids = model.prompt_ids(BENCH_MESSAGES, params)
    trace = TokenTrace(ids=[])
    list(serve_ids(model, ids, params, trace=trace))
    sequence = (ids + trace.ids)[: model.context_length]
    backbone = model.loaded.backbone
    del model  # its float32 engine (as large as keras-hub's copy: 6 GB for Qwen2.5-Coder-1.5B) wrote the text
    gc.collect()
    return_freed_memory()
    reference, _, _ = _all_logits(backbone, "float32", sequence, decode=False)
    figures = {}
    for weights in formats:
        if progress is not None:
            progress(f"fidelity {weights}", 0.0)
        logits, stepped, matrices = _all_logits(backbone, weights, sequence, decode=True)
        assert stepped is not None  # decode=True
        gc.collect()
        return_freed_memory()
        figures[weights] = {
            **_agreement(reference, logits),
            "matrices": matrices,
            **{f"decode_{key}": value for key, value in _agreement(reference, stepped).items()},
        }
    return {"model": entry.slug, "positions": len(sequence), "formats": figures}


def _agreement(reference: Logits, logits: Logits) -> dict[str, float]:
    import numpy as np

    return {"top1_agreement": round(float(np.mean(logits.argmax(-1) == reference.argmax(-1))), 4),
            "mean_kl": round(_mean_kl(reference, logits), 5)}


def _all_logits(
    backbone: Any, weights: str, sequence: list[int], *, decode: bool
) -> tuple[Logits, Logits | None, dict[str, int]]:
    """Next-token logits at every position of ``sequence``, from one prefill through the fast decoder and
    (``decode``) from one token a step through a cache, as a reply is generated (else None); and how many
    matrices each format served (:func:`inference.engine.weights.matrix_formats`)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from inference.engine.forward import empty_cache, forward, output_logits
    from inference.engine.weight_policy import choose_weights, served_six_bit
    from inference.engine.weights import decoder_spec, extract_params, matrix_formats

    _, native, _ = choose_weights(weights)  # type: ignore[arg-type]
    spec = decoder_spec(backbone, weights, native_kernels=native,  # type: ignore[arg-type]
                        six_bit=served_six_bit(weights, native))  # type: ignore[arg-type]
    params = extract_params(backbone, spec)

    def run(p: Any, tokens: Any) -> Any:
        cache = empty_cache(spec, batch=1, slots=tokens.shape[1])
        hidden, _ = forward(spec, p, cache, tokens, jnp.zeros((1,), "int32"))
        return output_logits(spec, p, hidden[0])

    def step(p: Any, cache: Any, token: Any, index: Any) -> Any:
        hidden, cache = forward(spec, p, cache, token[None, None], index[None])
        return output_logits(spec, p, hidden[:, 0])[0], cache

    logits = np.asarray(jax.jit(run)(params, jnp.asarray([sequence], "int32")), dtype=np.float64)
    if not decode:
        return logits, None, matrix_formats(params)
    stepped = []
    one_step = jax.jit(step, donate_argnums=(1,))
    cache = empty_cache(spec, batch=1, slots=len(sequence))
    for position, token in enumerate(sequence):
        row, cache = one_step(params, cache, jnp.int32(token), jnp.int32(position))
        stepped.append(np.asarray(row, dtype=np.float64))
    return logits, np.stack(stepped), matrix_formats(params)


def _mean_kl(reference: Logits, other: Logits) -> float:
    import numpy as np

    def log_softmax(x: Logits) -> Logits:
        shifted = x - x.max(axis=-1, keepdims=True)
        return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))

    p, q = log_softmax(reference), log_softmax(other)
    return float(np.mean(np.sum(np.exp(p) * (p - q), axis=-1)))
