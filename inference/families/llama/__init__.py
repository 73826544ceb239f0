"""Llama family (SmolLM2, Llama 3, and GGUF files of the same architecture): loader, tokenizer, template."""
