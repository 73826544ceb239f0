"""One folder per model family: its GGUF loader, tokenizer, chat template and layout map sit together."""
