#!/usr/bin/env bash
# Speed of the bundled models against llama.cpp on the same GGUF files, one model after the other in one
# run (docs/BENCHMARKS-HISTORY.md, "portable kernels"). Needs llama-cpp-python in its own virtualenv:
#   python3.11 -m venv ~/anchor && ~/anchor/bin/pip install "llama-cpp-python[server]"   (7-12 minutes)
#   ANCHOR=~/anchor/bin/python bench/side_by_side.sh [MODEL ...] > figures.jsonl
# Prints one JSON line per (model, weight format): our figures at concurrency 1 and 8, llama.cpp's, ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
ANCHOR="${ANCHOR:?set ANCHOR to the interpreter that has llama-cpp-python}"
MODELS=("$@")
[ ${#MODELS[@]} -gt 0 ] || MODELS=(smollm2-135m-instruct gemma3-270m qwen2.5-coder-0.5b-instruct qwen2.5-coder-1.5b-instruct)
lscpu | grep -E "Model name|Flags" >&2
.venv/bin/python -m inference kernels >&2
for model in "${MODELS[@]}"; do
  .venv/bin/python -m inference bench --model "$model" --concurrency 1,8 --runs "${RUNS:-3}" --json \
    --anchor llama.cpp --anchor-python "$ANCHOR"
done
