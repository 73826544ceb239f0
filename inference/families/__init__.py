"""One folder per model family: its GGUF loader, tokenizer, chat template and layout map sit together.

:func:`load_gguf` is the one entry point the engine and pool call for a GGUF file: it reads
``general.architecture`` and hands the file to that family's loader.
"""

from __future__ import annotations

from pathlib import Path

from inference.families.base import LoadedModel
from inference.gguf_reader import GGUFError, GGUFFile

# general.architecture -> family folder. Mistral GGUF files say "llama" and load as such.
GGUF_FAMILIES: dict[str, str] = {"llama": "llama", "gemma3": "gemma3"}


class UnsupportedArchitectureError(GGUFError):
    """A GGUF file whose architecture has no loader here."""


def load_gguf(path: Path, *, dtype: str = "float32") -> LoadedModel:
    """Load a GGUF file into a built keras-hub backbone with its tokenizer.

    ``dtype`` is the keras dtype policy of the backbone ("float32", "bfloat16", "float16"); weights are
    dequantized to float32 by ``gguf`` and cast on assignment. Raises :class:`GGUFError` (or a subclass)
    for a file that cannot be read or mapped, ``ValueError`` for an unknown dtype.
    """
    return load_gguf_file(GGUFFile(Path(path)), dtype=dtype)


def load_gguf_file(gguf: GGUFFile, *, dtype: str = "float32") -> LoadedModel:
    """:func:`load_gguf` for an already opened file (parsing Gemma 3's header alone takes ~12 s)."""
    architecture = gguf.architecture
    family = GGUF_FAMILIES.get(architecture)
    if family == "llama":
        from inference.families.llama.loader import load_llama

        return load_llama(gguf, dtype=dtype)
    if family == "gemma3":
        from inference.families.gemma3.loader import load_gemma3

        return load_gemma3(gguf, dtype=dtype)
    raise UnsupportedArchitectureError(
        f"{gguf.path.name}: GGUF architecture {architecture!r} has no loader; supported: "
        f"{', '.join(sorted(GGUF_FAMILIES))}"
    )


__all__ = ["GGUF_FAMILIES", "LoadedModel", "UnsupportedArchitectureError", "load_gguf", "load_gguf_file"]
