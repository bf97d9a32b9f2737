# Two commands on a fresh machine with python3 and make:
#   make demo   the governed agent session on embedded defaults (no API key, no server)
#   make test   the whole suite, every extra installed, nothing skipped
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip uv
	$(BIN)/uv pip install --quiet --python $(BIN)/python -e ".[all,dev]"
	# Routing benchmarks read the Berkeley Function Calling Leaderboard data
	# that bfcl-eval ships; its own dependencies are not needed for that.
	$(BIN)/uv pip install --quiet --python $(BIN)/python --no-deps "bfcl-eval==2026.3.23"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/jevqueue demo

test: $(STAMP)
	$(BIN)/python -m pytest -q
	$(MAKE) --no-print-directory lint

# mypy cannot follow setuptools' folder renaming (core/ is installed as `jevqueue`),
# so it reads the package through a link with the import name.
lint: $(STAMP)
	$(BIN)/ruff check core plugins tests bench
	mkdir -p $(VENV)/typecheck && ln -sfn $(CURDIR)/core $(VENV)/typecheck/jevqueue
	MYPYPATH=$(VENV)/typecheck $(BIN)/mypy -p jevqueue

# --- benchmarks -------------------------------------------------------------------
# The peers the policy benchmark measures beside jevqueue live in a venv of their own,
# so the test venv never depends on them.
BENCH_VENV  := .venv-bench
BENCH_BIN   := $(BENCH_VENV)/bin
BENCH_STAMP := $(BENCH_VENV)/.installed

$(BENCH_STAMP): pyproject.toml setup.py
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_BIN)/python -m pip install --quiet --upgrade pip uv
	$(BENCH_BIN)/uv pip install --quiet --python $(BENCH_BIN)/python -e ".[all,bench]"
	$(BENCH_BIN)/uv pip install --quiet --python $(BENCH_BIN)/python --no-deps "bfcl-eval==2026.3.23"
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(BENCH_BIN)/python bench/governor.py
	$(BENCH_BIN)/python bench/routing.py
	$(BENCH_BIN)/python bench/policy.py
	$(BENCH_BIN)/python bench/audit_throughput.py

clean:
	rm -rf $(VENV) $(BENCH_VENV) build *.egg-info
