"""Tiny GGUF files for the fast tests, written with the real ``gguf.GGUFWriter``.

A tiny random keras-hub backbone is exported the way llama.cpp's ``convert_hf_to_gguf.py`` writes
a model: weights in Hugging Face layout ``(out, in)``, Q/K rows permuted for Llama (llama.cpp's
``permute``), +1 on every Gemma RMS-norm weight. Loading the file back with ``load_gguf`` must give
the same logits as the original backbone - so these tests fail if any loader transform is dropped
or wrong, while the slow tests check the same transforms against transformers on the real files.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

# ---- vocabularies --------------------------------------------------------------------------------


def byte_alphabet() -> list[str]:
    """GPT-2's 256 printable stand-ins for bytes, in byte order."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    printable += range(ord("®"), ord("ÿ") + 1)
    extra = iter(range(256, 512))
    return [chr(b) if b in printable else chr(next(extra)) for b in range(256)]


BPE_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
BPE_MERGES = ["Ġ t", "h e", "Ġt he", "1 2", "l l", "he ll"]


def bpe_vocabulary() -> tuple[list[str], list[int], list[str]]:
    """(tokens, token types, merges): 3 control tokens, 256 bytes, one token per merge result."""
    tokens = BPE_SPECIALS + byte_alphabet()
    tokens += ["".join(m.split(" ")) for m in BPE_MERGES]
    types = [3] * len(BPE_SPECIALS) + [1] * (len(tokens) - len(BPE_SPECIALS))
    return tokens, types, list(BPE_MERGES)


SP_HEAD = [("<pad>", 3), ("<eos>", 3), ("<bos>", 3), ("<unk>", 3)]
SP_HEAD += [("<start_of_turn>", 3), ("<end_of_turn>", 3)]
SP_EXTRA = [("\n", 4), ("  ", 4), ("   ", 4)]  # the space runs are stored with literal spaces, as in Gemma
SP_NORMAL = ["▁", "a", "b", "c", "ab", "▁a", "▁ab", "ca"]


def sentencepiece_vocabulary() -> tuple[list[str], list[float], list[int]]:
    """(pieces, scores, types) shaped like Gemma's: control head, user-defined runs, bytes, pieces."""
    tokens = [t for t, _ in SP_HEAD + SP_EXTRA] + [f"<0x{b:02X}>" for b in range(256)] + SP_NORMAL
    types = [k for _, k in SP_HEAD + SP_EXTRA] + [6] * 256 + [1] * len(SP_NORMAL)
    scores = [-1000.0] * (len(tokens) - len(SP_NORMAL)) + [-float(i) for i in range(len(SP_NORMAL))]
    return tokens, scores, types


# ---- writing --------------------------------------------------------------------------------------


def llama_cpp_permute(weight: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp ``convert_hf_to_gguf.py``'s ``LlamaModel.permute`` (HF rows -> llama.cpp rows)."""
    return weight.reshape(heads, 2, weight.shape[0] // heads // 2, *weight.shape[1:]).swapaxes(1, 2).reshape(
        weight.shape
    )


def randomize(backbone: Any, *, seed: int) -> None:
    """Every variable random (norm scales too, so a missing +1/-1 shows)."""
    rng = np.random.default_rng(seed)
    for variable in backbone.weights:
        variable.assign(rng.normal(0.0, 0.2, size=tuple(variable.shape)).astype(np.float32))


def write_gguf(path: Path, *, arch: str, metadata: Any, tensors: dict[str, np.ndarray]) -> Path:
    import gguf

    writer = gguf.GGUFWriter(path, arch=arch)
    metadata(writer)
    for name, array in tensors.items():
        writer.add_tensor(name, np.ascontiguousarray(array, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def tiny_llama_backbone(*, seed: int = 0, tied: bool = True) -> Any:
    from keras_hub.models import Llama3Backbone

    tokens, _, _ = bpe_vocabulary()
    backbone = Llama3Backbone(
        vocabulary_size=len(tokens),
        num_layers=2,
        num_query_heads=4,
        num_key_value_heads=2,
        hidden_dim=32,
        intermediate_dim=48,
        rope_max_wavelength=10_000.0,
        layer_norm_epsilon=1e-5,
        tie_word_embeddings=tied,
    )
    randomize(backbone, seed=seed)
    return backbone


def export_llama(backbone: Any, path: Path, *, pre: str = "smollm") -> Path:
    heads, kv_heads = backbone.num_query_heads, backbone.num_key_value_heads
    hidden = backbone.hidden_dim
    embedding = backbone.get_layer("token_embedding")
    tensors = {"token_embd.weight": np.asarray(embedding.embeddings)}
    if not backbone.tie_word_embeddings:  # llama.cpp writes the LM head as (vocab, hidden)
        tensors["output.weight"] = np.asarray(embedding.reverse_embeddings).T
    for i in range(backbone.num_layers):
        layer = backbone.get_layer(f"transformer_layer_{i}")
        att = layer._self_attention_layer

        def hf(kernel: Any) -> np.ndarray:  # keras (hidden, heads, head_dim) -> HF (heads*head_dim, hidden)
            return np.asarray(kernel).reshape(hidden, -1).T

        tensors[f"blk.{i}.attn_norm.weight"] = np.asarray(layer._self_attention_layernorm.scale)
        tensors[f"blk.{i}.ffn_norm.weight"] = np.asarray(layer._feedforward_layernorm.scale)
        tensors[f"blk.{i}.attn_q.weight"] = llama_cpp_permute(hf(att._query_dense.kernel), heads)
        tensors[f"blk.{i}.attn_k.weight"] = llama_cpp_permute(hf(att._key_dense.kernel), kv_heads)
        tensors[f"blk.{i}.attn_v.weight"] = hf(att._value_dense.kernel)
        tensors[f"blk.{i}.attn_output.weight"] = np.asarray(att._output_dense.kernel).reshape(-1, hidden).T
        tensors[f"blk.{i}.ffn_gate.weight"] = np.asarray(layer._feedforward_gate_dense.kernel).T
        tensors[f"blk.{i}.ffn_up.weight"] = np.asarray(layer._feedforward_intermediate_dense.kernel).T
        tensors[f"blk.{i}.ffn_down.weight"] = np.asarray(layer._feedforward_output_dense.kernel).T
    tensors["output_norm.weight"] = np.asarray(backbone.get_layer("sequence_output_layernorm").scale)
    tokens, types, merges = bpe_vocabulary()

    def metadata(w: Any) -> None:
        w.add_block_count(backbone.num_layers)
        w.add_context_length(256)
        w.add_embedding_length(hidden)
        w.add_feed_forward_length(backbone.intermediate_dim)
        w.add_head_count(heads)
        w.add_head_count_kv(kv_heads)
        w.add_rope_freq_base(10_000.0)
        w.add_layer_norm_rms_eps(1e-5)
        w.add_vocab_size(len(tokens))
        w.add_rope_dimension_count(hidden // heads)
        write_bpe_tokenizer(w, tokens=tokens, types=types, merges=merges, pre=pre)

    return write_gguf(path, arch="llama", metadata=metadata, tensors=tensors)


def write_bpe_tokenizer(
    w: Any, *, tokens: Sequence[str], types: Sequence[int], merges: Sequence[str], pre: str
) -> None:
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(list(tokens))
    w.add_token_types(list(types))
    w.add_token_merges(list(merges))
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(False)


def tiny_gemma3_backbone(*, seed: int = 0) -> Any:
    from keras_hub.models import Gemma3Backbone

    tokens, _, _ = sentencepiece_vocabulary()
    backbone = Gemma3Backbone(
        vocabulary_size=len(tokens),
        image_size=None,
        num_layers=6,
        num_query_heads=2,
        num_key_value_heads=1,
        hidden_dim=16,
        intermediate_dim=24,
        head_dim=8,
        query_head_dim_normalize=True,
        use_query_key_norm=True,
        use_post_ffw_norm=True,
        use_post_attention_norm=True,
        use_sliding_window_attention=True,
        sliding_window_size=4,
        layer_norm_epsilon=1e-6,
    )
    randomize(backbone, seed=seed)
    return backbone


def export_gemma3(backbone: Any, path: Path) -> Path:
    heads, kv_heads, head_dim = backbone.num_query_heads, backbone.num_key_value_heads, backbone.head_dim
    hidden = backbone.hidden_dim

    def norm(scale: Any) -> np.ndarray:  # llama.cpp folds Gemma's (1 + scale) into the stored weight
        return np.asarray(scale) + 1.0

    def hf(kernel: Any) -> np.ndarray:  # keras (heads, hidden, head_dim) -> HF (heads*head_dim, hidden)
        return np.asarray(kernel).transpose(0, 2, 1).reshape(-1, hidden)

    tensors = {"token_embd.weight": np.asarray(backbone.get_layer("token_embedding").embeddings)}
    for i in range(backbone.num_layers):
        block = backbone.get_layer(f"decoder_block_{i}")
        att = block.attention
        tensors[f"blk.{i}.attn_norm.weight"] = norm(block.pre_attention_norm.scale)
        tensors[f"blk.{i}.post_attention_norm.weight"] = norm(block.post_attention_norm.scale)
        tensors[f"blk.{i}.ffn_norm.weight"] = norm(block.pre_ffw_norm.scale)
        tensors[f"blk.{i}.post_ffw_norm.weight"] = norm(block.post_ffw_norm.scale)
        tensors[f"blk.{i}.attn_q_norm.weight"] = norm(att.query_norm.scale)
        tensors[f"blk.{i}.attn_k_norm.weight"] = norm(att.key_norm.scale)
        tensors[f"blk.{i}.attn_q.weight"] = hf(att.query_dense.kernel)
        tensors[f"blk.{i}.attn_k.weight"] = hf(att.key_dense.kernel)
        tensors[f"blk.{i}.attn_v.weight"] = hf(att.value_dense.kernel)
        tensors[f"blk.{i}.attn_output.weight"] = np.asarray(att.output_dense.kernel).reshape(-1, hidden).T
        tensors[f"blk.{i}.ffn_gate.weight"] = np.asarray(block.gating_ffw.kernel).T
        tensors[f"blk.{i}.ffn_up.weight"] = np.asarray(block.gating_ffw_2.kernel).T
        tensors[f"blk.{i}.ffn_down.weight"] = np.asarray(block.ffw_linear.kernel).T
    tensors["output_norm.weight"] = norm(backbone.get_layer("final_normalization").scale)

    def metadata(w: Any) -> None:
        w.add_block_count(backbone.num_layers)
        w.add_context_length(128)
        w.add_embedding_length(hidden)
        w.add_feed_forward_length(backbone.intermediate_dim)
        w.add_head_count(heads)
        w.add_head_count_kv(kv_heads)
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
        w.add_rope_freq_base(1_000_000.0)
        w.add_layer_norm_rms_eps(1e-6)
        w.add_sliding_window(4)
        write_sentencepiece_tokenizer(w)

    return write_gguf(path, arch="gemma3", metadata=metadata, tensors=tensors)


def write_sentencepiece_tokenizer(w: Any) -> None:
    tokens, scores, types = sentencepiece_vocabulary()
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(2)
    w.add_eos_token_id(1)
    w.add_unk_token_id(3)
    w.add_pad_token_id(0)
    w.add_add_bos_token(True)


def tiny_qwen2_backbone(*, seed: int = 0) -> Any:
    from keras_hub.models import QwenBackbone

    tokens, _, _ = bpe_vocabulary()
    backbone = QwenBackbone(vocabulary_size=len(tokens), num_layers=2, num_query_heads=4,
                            num_key_value_heads=2, hidden_dim=32, intermediate_dim=48,
                            rope_max_wavelength=1_000_000.0, layer_norm_epsilon=1e-6,
                            tie_word_embeddings=False)
    randomize(backbone, seed=seed)  # biases too
    return backbone


def export_qwen2(backbone: Any, path: Path) -> Path:
    """What llama.cpp's converter writes for Qwen2: Llama's tensors without the Q/K permutation, plus
    ``attn_{q,k,v}.bias``."""
    heads, kv_heads, hidden = backbone.num_query_heads, backbone.num_key_value_heads, backbone.hidden_dim
    embedding = backbone.get_layer("token_embedding")
    tensors = {"token_embd.weight": np.asarray(embedding.embeddings),
               "output.weight": np.asarray(embedding.reverse_embeddings).T}
    for i in range(backbone.num_layers):
        layer = backbone.get_layer(f"transformer_layer_{i}")
        att = layer._self_attention_layer
        tensors[f"blk.{i}.attn_norm.weight"] = np.asarray(layer._self_attention_layernorm.scale)
        tensors[f"blk.{i}.ffn_norm.weight"] = np.asarray(layer._feedforward_layernorm.scale)
        projections = (("attn_q", att._query_dense), ("attn_k", att._key_dense), ("attn_v", att._value_dense))
        for name, dense in projections:
            tensors[f"blk.{i}.{name}.weight"] = np.asarray(dense.kernel).reshape(hidden, -1).T
            tensors[f"blk.{i}.{name}.bias"] = np.asarray(dense.bias).reshape(-1)
        tensors[f"blk.{i}.attn_output.weight"] = np.asarray(att._output_dense.kernel).reshape(-1, hidden).T
        tensors[f"blk.{i}.ffn_gate.weight"] = np.asarray(layer._feedforward_gate_dense.kernel).T
        tensors[f"blk.{i}.ffn_up.weight"] = np.asarray(layer._feedforward_intermediate_dense.kernel).T
        tensors[f"blk.{i}.ffn_down.weight"] = np.asarray(layer._feedforward_output_dense.kernel).T
    tensors["output_norm.weight"] = np.asarray(backbone.get_layer("sequence_output_layernorm").scale)
    tokens, types, merges = bpe_vocabulary()

    def metadata(w: Any) -> None:
        w.add_block_count(backbone.num_layers)
        w.add_context_length(256)
        w.add_embedding_length(hidden)
        w.add_feed_forward_length(backbone.intermediate_dim)
        w.add_head_count(heads)
        w.add_head_count_kv(kv_heads)
        w.add_rope_freq_base(1_000_000.0)
        w.add_layer_norm_rms_eps(1e-6)
        write_bpe_tokenizer(w, tokens=tokens, types=types, merges=merges, pre="qwen2")

    return write_gguf(path, arch="qwen2", metadata=metadata, tensors=tensors)
