# Two commands on a fresh machine with python3 and make:
#   make demo   the governed agent session on embedded defaults (no API key, no server)
#   make test   the whole suite, every extra installed, nothing skipped
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# The MCP tests' second venv and npm servers (see the MCP block below); defined here
# because make expands a rule's prerequisites where the rule is read.
MCP2_VENV  := .venv-mcp2
MCP2_BIN   := $(MCP2_VENV)/bin
MCP2_STAMP := $(MCP2_VENV)/.installed
NPM_STAMP  := .npm-tools/.installed

.PHONY: demo test lint bench clean test-mcp2

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

test: $(STAMP) $(MCP2_STAMP) $(NPM_STAMP)
	$(BIN)/python -m pytest -q
	$(MAKE) --no-print-directory test-mcp2
	$(MAKE) --no-print-directory lint

# mypy cannot follow setuptools' folder renaming (core/ is installed as `jevqueue`),
# so it reads the package through a link with the import name.
lint: $(STAMP)
	$(BIN)/ruff check core plugins tests bench
	mkdir -p $(VENV)/typecheck && ln -sfn $(CURDIR)/core $(VENV)/typecheck/jevqueue
	MYPYPATH=$(VENV)/typecheck $(BIN)/mypy -p jevqueue

bench: $(STAMP)
	$(BIN)/python bench/governor.py
	$(BIN)/python bench/routing.py
	$(BIN)/python bench/policy.py

# --- MCP: the second major, and the third-party servers the MCP tests run -------------
# mcp 2.x cannot share .venv with crewai (crewai pins mcp<2), so a small second venv holds
# the core, mcp 2.x and pytest; it also holds the third-party Python server
# mcp-server-time (its current release needs mcp 2.x), which the MCP tests of both venvs
# start as an upstream. The npm filesystem server goes under .npm-tools/.

$(MCP2_STAMP): pyproject.toml setup.py $(STAMP)
	$(PYTHON) -m venv $(MCP2_VENV)
	$(BIN)/uv pip install --quiet --python $(MCP2_BIN)/python -e . "mcp>=2.3,<3" \
		"pytest>=8" "anyio>=4" "mcp-server-time"
	touch $(MCP2_STAMP)

$(NPM_STAMP):
	npm install --silent --no-audit --no-fund --prefix .npm-tools \
		"@modelcontextprotocol/server-filesystem@2026.8.31"
	touch $(NPM_STAMP)

test-mcp2: $(MCP2_STAMP) $(NPM_STAMP)
	$(MCP2_BIN)/python -m pytest -q -p no:cacheprovider tests/plugins/mcp

clean:
	rm -rf $(VENV) $(MCP2_VENV) .npm-tools build *.egg-info
