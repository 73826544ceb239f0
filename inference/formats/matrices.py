"""The weight formats the fast engine serves, by name, and the containers a matrix in each is held in.

``float32`` (the variables as loaded), ``bfloat16``, ``int8`` (:class:`QuantizedMatrix`: per-output-channel
symmetric weights) and llama.cpp's block layouts for the native CPU kernels: ``q8`` (:class:`Q8Blocks`,
Q8_0), ``q4`` (:class:`Q4Blocks`, Q4_1; a matrix a 6-bit grid reproduces is held as :class:`Q6Blocks`
and a fused one whose parts differ as :class:`StackedBlocks`), and ``q8a8``/``q4a8``, the same blocks
multiplied with activations rounded to int8. Which matrix takes which container is the converter's rule
(:mod:`inference.engine.weights`); the containers' arithmetic is :mod:`inference.formats.block_formats`.
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

WeightFormat = Literal["float32", "bfloat16", "int8", "q8", "q4", "q8a8", "q4a8"]
WEIGHT_FORMATS: tuple[WeightFormat, ...] = ("float32", "bfloat16", "int8", "q8", "q4", "q8a8", "q4a8")
BLOCK_FORMATS: tuple[WeightFormat, ...] = ("q8", "q4", "q8a8", "q4a8")
# The same blocks as q8/q4, multiplied with activations rounded to int8 per block of 32 (W4A8, W8A8).
INT8_ACTIVATION_FORMATS: tuple[WeightFormat, ...] = ("q8a8", "q4a8")
# What a q4 model's 6-bit matrices are served in: q6 (7 bits a weight, their values as they are) or q8
# (8.5 bits, re-quantized), whichever weight_policy measured the kernels multiply faster on this CPU.
SixBit = Literal["q6", "q8"]
SIX_BIT_FORMATS: tuple[SixBit, ...] = ("q6", "q8")


class QuantizedMatrix(NamedTuple):
    """An int8 ``(in, out)`` matrix and its float32 per-output-column scale (a pytree: jit passes it)."""

    values: Any
    scale: Any


class Q8Blocks(NamedTuple):
    """An ``(out, in)`` matrix as int8 ``values`` and float16 ``scales`` ``(out, in/32)`` (Q8_0)."""

    values: Any
    scales: Any


class Q4Blocks(NamedTuple):
    """An ``(out, in)`` matrix as packed nibbles ``(out, in/2)`` uint8, float16 ``scales`` and
    ``offsets`` ``(out, in/32)`` (Q4_1)."""

    packed: Any
    scales: Any
    offsets: Any


class Q6Blocks(NamedTuple):
    """An ``(out, in)`` matrix as 6-bit ``q``: ``low`` nibbles ``(out, in/2)`` uint8 (as Q4Blocks'),
    ``high`` 2 bits ``(out, in/4)`` uint8 and float16 ``scales`` ``(out, in/16)``; w = scale·(q − 32)."""

    low: Any
    high: Any
    scales: Any


class StackedBlocks(NamedTuple):
    """An ``(out, in)`` matrix whose output rows are served in consecutive parts of different block
    formats: a fused ``qkv`` whose v rows are Q6_K in the file and q, k Q4_K is q4 for q|k and q6 for v,
    where one format for all of it would be q8 (a re-quantization, and more bytes). Its product is the
    parts' products side by side."""

    parts: tuple[Q8Blocks | Q4Blocks | Q6Blocks, ...]
