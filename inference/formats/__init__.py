"""Weight formats: what a model's weights are, in the files they come in and in the engine's memory.

Files: ``matrices`` names the formats the fast engine serves (``q4``, ``q8``, ``bfloat16`` ...) and the
containers a matrix in each is held in, ``block_formats`` the block layouts' arithmetic in plain XLA
(quantizing to them, back, and their products), ``gguf_reader`` the GGUF files models come in. They
import nothing else of ``inference``: the families, the engine and the stores build on them.
"""
