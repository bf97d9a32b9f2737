# Two commands on a fresh machine with python3 and make:
#   make demo   the governed agent session on embedded defaults (no API key, no server)
#   make test   the whole suite, every extra installed, nothing skipped
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
BASE   := $(VENV)/.base
DEMO   := $(VENV)/.installed-demo
STAMP  := $(VENV)/.installed

.PHONY: demo test test-hermes lint bench clean

# The venv and the installer: uv resolves and installs far faster than pip.
$(BASE):
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check uv
	touch $(BASE)

# The demo needs only the core and the OpenAI-compatible host.
$(DEMO): $(BASE) pyproject.toml setup.py
	$(BIN)/uv pip install --quiet --python $(BIN)/python -e ".[openai]"
	touch $(DEMO)

# The suite needs every extra, so that no plugin's tests are skipped.
$(STAMP): $(BASE) pyproject.toml setup.py
	$(BIN)/uv pip install --quiet --python $(BIN)/python -e ".[all,dev]"
	# Routing benchmarks read the Berkeley Function Calling Leaderboard data
	# that bfcl-eval ships; its own dependencies are not needed for that.
	$(BIN)/uv pip install --quiet --python $(BIN)/python --no-deps "bfcl-eval==2026.3.23"
	touch $(STAMP) $(DEMO)

demo: $(DEMO)
	$(BIN)/jevqueue demo

test: $(STAMP)
	$(BIN)/python -m pytest -q
	$(MAKE) --no-print-directory test-hermes
	$(MAKE) --no-print-directory lint

# mypy cannot follow setuptools' folder renaming (core/ is installed as `jevqueue`),
# so it reads the package through a link with the import name.
lint: $(STAMP)
	$(BIN)/ruff check core plugins tests bench
	mkdir -p $(VENV)/typecheck && ln -sfn $(CURDIR)/core $(VENV)/typecheck/jevqueue
	MYPYPATH=$(VENV)/typecheck $(BIN)/mypy -p jevqueue

# --- Hermes Agent, in a venv of its own ------------------------------------------------
# hermes-agent pins a pydantic release that crewai's pin excludes, so it cannot share
# .venv (there its tests skip). This venv holds the core, the hermes extra and pytest, and
# runs tests/plugins/hermes: a real AIAgent loop against a server on 127.0.0.1.
# PYTHONSAFEPATH keeps the checkout off sys.path: Hermes installs a top-level `plugins`
# package, which the repository's plugins/ folder would otherwise shadow.
HERMES_VENV  := .venv-hermes
HERMES_BIN   := $(HERMES_VENV)/bin
HERMES_STAMP := $(HERMES_VENV)/.installed

$(HERMES_STAMP): pyproject.toml setup.py $(STAMP)
	$(PYTHON) -m venv $(HERMES_VENV)
	$(BIN)/uv pip install --quiet --python $(HERMES_BIN)/python -e ".[hermes]" "pytest>=8"
	touch $(HERMES_STAMP)

test-hermes: $(HERMES_STAMP)
	PYTHONSAFEPATH=1 $(HERMES_BIN)/python -m pytest -q -p no:cacheprovider tests/plugins/hermes
# --- end of the Hermes block ------------------------------------------------------------

bench: $(STAMP)
	$(BIN)/python bench/governor.py
	$(BIN)/python bench/routing.py
	$(BIN)/python bench/policy.py

clean:
	rm -rf $(VENV) $(HERMES_VENV) build *.egg-info
