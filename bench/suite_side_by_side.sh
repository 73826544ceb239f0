#!/usr/bin/env bash
# A fixing suite's speed, ours beside llama.cpp's OpenAI-compatible server on the same GGUF file
# (issue 42, item 4; docs/BENCHMARKS.md, "Fixing suites"). The same command plays the same generated
# dialogues twice: through this project's engine, then through `python -m llama_cpp.server` as a remote
# contestant (what a user would run instead), one after the other on a quiet machine.
#
#   python3.11 -m venv ~/anchor && ~/anchor/bin/pip install "llama-cpp-python[server]"   (7-12 minutes)
#   ANCHOR=~/anchor/bin/python ARENA_ENVIRONMENT=development bench/suite_side_by_side.sh \
#       [SCENARIO [DIALOGUES [MODEL]]] > figures.jsonl
#
# Defaults: calendar, 20 dialogues, qwen2.5-coder-1.5b-instruct (its file must be stored: run the suite
# or `make run` once). Both sides use the catalogue's sampling (temperature 0.7, top_p 0.9, 128 tokens),
# seed 1, k = 5, two threads. The llama.cpp side runs at every concurrency in LLAMA_CONCURRENCY
# (default "1 8": its server answers one request at a time, and one conversation at a time keeps its
# single prompt cache warm), ours at OUR_CONCURRENCY (default 8). Prints one `scenarios run --json`
# line per run, each with "engine" and "concurrency" added, then a line of ratios:
# {"ours_dialogues_per_minute", "llama_cpp_best_dialogues_per_minute", "ratio"}.
set -euo pipefail
cd "$(dirname "$0")/.."
ANCHOR="${ANCHOR:?set ANCHOR to the interpreter that has llama-cpp-python[server]}"
SCENARIO="${1:-calendar}"
DIALOGUES="${2:-20}"
MODEL="${3:-qwen2.5-coder-1.5b-instruct}"
PORT="${PORT:-8765}"
GGUF="$(.venv/bin/python - "$MODEL" <<'EOF'
import sys
from inference.builder import entry_file
from inference.catalogue import load_catalogue
from settings import Settings
from wiring import models_dir
settings = Settings()
entry = next(e for e in load_catalogue(settings.catalogue_path) if e.slug == sys.argv[1])
print(entry_file(entry, cache_dir=models_dir(settings)))
EOF
)"
WORK="$(mktemp -d)"
SERVER=""
cleanup() { [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
lscpu | grep -E "Model name|Flags" >&2

tag() { .venv/bin/python -c 'import json, sys
for line in sys.stdin:
    row = json.loads(line); row.update(engine=sys.argv[1], concurrency=int(sys.argv[2])); print(json.dumps(row))' "$@"; }

suite() {  # catalogue slug concurrency engine
  ARENA_CATALOGUE_PATH="$1" .venv/bin/python -m scenarios run "$SCENARIO" --models "$2" \
    --dialogues "$DIALOGUES" --seed 1 --k 5 --concurrency "$3" --no-store --json 2>>"$WORK/stderr" | tag "$4" "$3"
}

for c in ${OUR_CONCURRENCY:-8}; do
  suite inference/catalogue.toml "$MODEL" "$c" ours | tee -a "$WORK/ours.jsonl"
done

"$ANCHOR" -m llama_cpp.server --model "$GGUF" --host 127.0.0.1 --port "$PORT" --n_threads 2 \
  --n_threads_batch 2 --n_ctx 2048 >"$WORK/server.log" 2>&1 &
SERVER=$!
for _ in $(seq 120); do
  curl -sf "http://127.0.0.1:$PORT/v1/models" >/dev/null && break
  sleep 1
done
cat >"$WORK/catalogue.toml" <<EOF
[[model]]
slug = "llama-cpp-server"
name = "llama.cpp server ($MODEL)"
family = "remote"
source = "remote:http://127.0.0.1:$PORT"
remote_model = "$MODEL"
[model.sampling]
temperature = 0.7
top_p = 0.9
max_new_tokens = 128
EOF
# its server queues concurrent requests without sending a byte: give a waiting request time
export ARENA_REMOTE_IDLE_TIMEOUT_S=900 ARENA_REMOTE_REPLY_DEADLINE_S=1800
for c in ${LLAMA_CONCURRENCY:-1 8}; do
  suite "$WORK/catalogue.toml" llama-cpp-server "$c" llama.cpp | tee -a "$WORK/llama.jsonl"
done
.venv/bin/python - "$WORK/ours.jsonl" "$WORK/llama.jsonl" <<'EOF'
import json, sys
best = lambda path: max(json.loads(l)["dialogues_per_minute"] for l in open(path) if l.strip())
ours, theirs = best(sys.argv[1]), best(sys.argv[2])
print(json.dumps({"ours_dialogues_per_minute": ours, "llama_cpp_best_dialogues_per_minute": theirs,
                  "ratio": round(ours / theirs, 2) if theirs else None}))
EOF
grep -E "warning|error" "$WORK/stderr" >&2 || true
