#!/usr/bin/env bash
# The accelerator path, checked (issue 45, item 6): on one NVIDIA H100/H200 host that has Python 3.12 and
# JAX with CUDA but no network, in under 8 minutes:
#   1. the inference tests that need no GGUF file (pytest -m "not slow"), on the GPU;
#   2. the engine on random weights shaped like SmolLM2-135M and Qwen2.5-Coder-1.5B, bfloat16, at
#      c = 1, 8, 64 (python -m inference bench --concurrency);
#   3. a model sharded over every device found (ARENA_MESH=1xN python -m inference generate, and the
#      layout from python -m inference shardings).
# Each step has a time limit; a summary to paste into docs/BENCHMARKS.md ends the output.
#
#   tools/gpu_check.sh --prepare [DIR]   on a machine with network: download the wheels the GPU host lacks
#                                        (exact pins of requirements.txt, CPython 3.12, manylinux x86_64)
#                                        into DIR (default var/wheels, git-ignored)
#   tools/gpu_check.sh [--wheels DIR]    on the GPU host: install them into var/gpu-venv (which sees the
#                                        host's own jax) with --no-index, then run the check
#   tools/gpu_check.sh --dry-run         on any machine, with .venv: the same steps on the CPU, tiny
#                                        models and short runs (checks the script, not the accelerator)
# PYTHON names the interpreter (default: python3 on the GPU host, .venv/bin/python for --dry-run).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"

# What the inference code and its tests import, beyond the host's jax, jaxlib, numpy, scipy, ml_dtypes and
# opt_einsum (left as the host has them: they match its CUDA build). Versions come from requirements.txt.
WHEELS=(keras keras-hub absl-py h5py namex optree rich markdown-it-py mdurl Pygments packaging regex
        gguf PyYAML tqdm sentencepiece tokenizers Jinja2 MarkupSafe pydantic pydantic_core pydantic-settings
        annotated-types typing-inspection typing_extensions python-dotenv SQLAlchemy greenlet alembic Mako
        starlette anyio idna uvicorn click h11 prometheus_client pytest iniconfig pluggy pytest-timeout
        hypothesis sortedcontainers attrs)

usage() {
  sed -n '/^#   tools/,/^# PYTHON/p' "$0" | sed 's/^# \{0,1\}//'
}

fail_usage() {
  echo "error: $1" >&2
  usage >&2
  exit 2
}

# The requirements.txt line pinning each name of WHEELS (one missing pin stops with its name).
pins() {
  local name line
  for name in "${WHEELS[@]}"; do
    line="$(grep -i -E "^${name//[-_]/[-_]}==" requirements.txt || true)"
    [[ -n "$line" ]] || { echo "error: requirements.txt pins no $name" >&2; return 1; }
    echo "$line"
  done
}

prepare() {
  local dir="$1" python="${PYTHON:-.venv/bin/python}" list
  mkdir -p "$dir"
  list="$(mktemp)"
  pins > "$list"
  "$python" -m pip download --quiet --dest "$dir" --no-deps --only-binary=:all: \
    --python-version 3.12 --implementation cp --abi cp312 \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -r "$list"
  rm -f "$list"
  echo "$(ls "$dir"/*.whl | wc -l) wheels in $dir ($(du -sh "$dir" | cut -f1)); bring $dir with the tree"
}

install() {
  local dir="$1" host="${PYTHON:-python3}" list
  [[ -d "$dir" ]] || { echo "error: no wheel folder $dir: run tools/gpu_check.sh --prepare $dir where there is network" >&2; exit 2; }
  "$host" -m venv --system-site-packages var/gpu-venv
  list="$(mktemp)"
  pins > "$list"
  var/gpu-venv/bin/python -m pip install --quiet --no-index --find-links "$dir" --no-deps -r "$list"
  rm -f "$list"
}

# Steps: each runs under `timeout`, its output kept in var/gpu-check/<name>.log; SUMMARY collects lines.
SUMMARY=()
step() {
  local name="$1" limit="$2"; shift 2
  local log="var/gpu-check/$name.log" start=$SECONDS rc=0
  echo "== $name (at most ${limit} s): $*"
  timeout --kill-after=10 "$limit" "$@" > "$log" 2>&1 || rc=$?
  cat "$log"
  local took=$((SECONDS - start)) verdict="ok"
  [[ $rc -eq 0 ]] || verdict="FAILED (exit $rc)"
  [[ $rc -eq 124 || $rc -eq 137 ]] && verdict="TIMED OUT after ${limit} s"
  SUMMARY+=("- $name: $verdict in ${took} s")
}

catalogue() {  # the random-weight models, bfloat16, as a catalogue file
  local path="$1" small="$2" large="$3"
  cat > "$path" <<EOF
[[model]]
slug = "random-small"
name = "$small (random weights)"
family = "llama"
source = "tiny:$small"
template = "chatml"
dtype = "bfloat16"
weights = "bfloat16"
context_length = 1024
memory_mb = 2000

[[model]]
slug = "random-large"
name = "$large (random weights)"
family = "qwen2"
source = "tiny:$large"
template = "chatml"
dtype = "bfloat16"
weights = "bfloat16"
context_length = 1024
memory_mb = 12000
EOF
}

check() {
  local python="$1" dry="$2" levels small large tests_limit bench_limit
  if [[ "$dry" == 1 ]]; then  # two virtual CPU devices, so the sharded step splits weights
    export JAX_PLATFORMS=cpu XLA_FLAGS="--xla_force_host_platform_device_count=2"
    levels="1,2"; small="llama"; large="qwen2"; tests_limit=120; bench_limit=120
  else
    levels="1,8,64"; small="smollm2-135m"; large="qwen2.5-coder-1.5b"; tests_limit=200; bench_limit=130
  fi
  mkdir -p var/gpu-check
  export KERAS_BACKEND=jax ARENA_ENVIRONMENT=development ARENA_DATA_DIR="$REPO/var/gpu-check/data"
  export ARENA_CATALOGUE_PATH="$REPO/var/gpu-check/catalogue.toml"
  catalogue "$ARENA_CATALOGUE_PATH" "$small" "$large"
  local devices backend
  read -r backend devices < <("$python" -c 'import jax; print(jax.default_backend(), jax.device_count())')
  "$python" -c 'import jax; print("jax", jax.__version__, "on", jax.devices())'
  if [[ "$dry" != 1 && "$backend" != "gpu" ]]; then
    echo "error: jax sees no GPU (backend $backend); this check is for an accelerator host" >&2
    exit 1
  fi

  local tests=(-m pytest tests/inference -m "not slow" -q -p no:cacheprovider --continue-on-collection-errors)
  echo '[{"role": "user", "content": "Hello"}]' > var/gpu-check/messages.json
  [[ "$dry" == 1 ]] && tests+=(--collect-only -q)  # the selection resolves; the CPU suite runs in CI
  step inference-tests "$tests_limit" "$python" "${tests[@]}"
  local slug
  for slug in random-small random-large; do
    step "bench-$slug" "$bench_limit" "$python" -m inference bench --model "$slug" --weights bfloat16 \
      --concurrency "$levels" --runs 1
  done
  step sharded-generate 60 env ARENA_MESH="1x$devices" "$python" -m inference generate --model random-large \
    --max-new-tokens 16 --temperature 0 --json --messages var/gpu-check/messages.json
  step sharded-layout 40 "$python" -m inference shardings --model random-large --model-axis "$devices"

  echo
  echo "== summary (paste into docs/BENCHMARKS.md)"
  echo "tools/gpu_check.sh$([[ "$dry" == 1 ]] && echo " --dry-run"), $(date -u +%Y-%m-%d), $(gpu_name), jax $("$python" -c 'import jax; print(jax.__version__)') ($backend, $devices device(s))"
  printf '%s\n' "${SUMMARY[@]}"
  local log
  for log in var/gpu-check/bench-random-*.log; do
    echo; echo "$(basename "$log" .log):"; grep -E "^ *[0-9]+ |cold start|concurrency" "$log" || true
  done
  echo; grep -h -E "passed|failed|errors? in" var/gpu-check/inference-tests.log | tail -1 \
    || awk -F': ' '/^tests\/.*: [0-9]+$/ {n += $2} END {print n " inference tests selected (collected only)"}' \
      var/gpu-check/inference-tests.log
  tail -1 var/gpu-check/sharded-layout.log || true
  [[ ! "${SUMMARY[*]}" =~ FAILED|TIMED ]]
}

gpu_name() {
  nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || echo "no nvidia-smi"
}

main() {
  local mode=check dir=var/wheels
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --prepare) mode=prepare; [[ $# -gt 1 && "$2" != --* ]] && { dir="$2"; shift; } ;;
      --wheels) [[ $# -gt 1 ]] || fail_usage "--wheels needs a folder"; dir="$2"; shift ;;
      --dry-run) mode=dry-run ;;
      -h|--help) usage; exit 0 ;;
      *) fail_usage "unknown argument $1" ;;
    esac
    shift
  done
  case "$mode" in
    prepare) prepare "$dir" ;;
    dry-run) check "${PYTHON:-.venv/bin/python}" 1 ;;
    check) install "$dir"; check var/gpu-venv/bin/python 0 ;;
  esac
}

main "$@"
