"""Gemma 3 family: GGUF loader onto ``Gemma3Backbone``, SentencePiece tokenizer, chat template."""
