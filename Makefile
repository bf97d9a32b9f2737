# Two commands on a fresh machine with python3 and make:
#   make demo   the governed agent session on embedded defaults (no API key, no server)
#   make test   the whole suite, every extra installed, nothing skipped
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
BASE   := $(VENV)/.base
DEMO   := $(VENV)/.installed-demo
STAMP  := $(VENV)/.installed
# The MCP tests' second venv and npm servers (see the MCP block below); defined here
# because make expands a rule's prerequisites where the rule is read.
MCP2_VENV  := .venv-mcp2
MCP2_BIN   := $(MCP2_VENV)/bin
MCP2_STAMP := $(MCP2_VENV)/.installed
NPM_STAMP  := .npm-tools/.installed

.PHONY: demo test test-hermes test-mcp2 lint bench bench-prompt-injection clean fuzz

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

test: $(STAMP) $(MCP2_STAMP) $(NPM_STAMP)
	$(BIN)/python -m pytest -q
	$(MAKE) --no-print-directory test-hermes
	$(MAKE) --no-print-directory test-mcp2
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

# --- fuzzing ----------------------------------------------------------------------------
# make test runs every harness of tests/fuzz briefly; this runs each for FUZZ_SECONDS from
# its seed corpus. The inputs it adds and any crash-* or timeout-* file (the input that
# failed) go to $(FUZZ_DIR)/<harness>/, outside the tree. One harness:
# make fuzz FUZZ_HARNESSES=cli.
FUZZ_SECONDS   ?= 300
FUZZ_DIR       ?= $(VENV)/fuzz
FUZZ_HARNESSES ?= $(patsubst tests/fuzz/fuzz_%.py,%,$(filter-out tests/fuzz/fuzz_main.py,$(wildcard tests/fuzz/fuzz_*.py)))

fuzz: $(STAMP)
	@status=0; for name in $(FUZZ_HARNESSES); do \
		mkdir -p $(FUZZ_DIR)/$$name/corpus; \
		echo "== $$name: $(FUZZ_SECONDS) s, findings in $(FUZZ_DIR)/$$name/"; \
		PYTHONHASHSEED=0 $(BIN)/python tests/fuzz/fuzz_$$name.py -max_total_time=$(FUZZ_SECONDS) \
			-timeout=30 -print_final_stats=1 -artifact_prefix=$(FUZZ_DIR)/$$name/ \
			$(FUZZ_DIR)/$$name/corpus tests/fuzz/corpus/$$name 2>$(FUZZ_DIR)/$$name/log \
			|| { status=1; tail -n 40 $(FUZZ_DIR)/$$name/log; }; \
		grep -E "^Done|^stat::number_of_executed_units" $(FUZZ_DIR)/$$name/log || true; \
	done; exit $$status

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

# Prompt injection: AgentDojo's suites replayed without a model (bench/prompt_injection.py).
# AgentDojo pulls in every model provider's client, so it has a venv of its own.
INJECTION_VENV  := .venv-agentdojo
INJECTION_STAMP := $(INJECTION_VENV)/.installed

$(INJECTION_STAMP): pyproject.toml setup.py $(BASE)
	$(PYTHON) -m venv $(INJECTION_VENV)
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(INJECTION_VENV)/bin/python \
		"agentdojo==0.1.35" -e .
	touch $(INJECTION_STAMP)

bench-prompt-injection: $(INJECTION_STAMP)
	$(INJECTION_VENV)/bin/python bench/prompt_injection.py --json $(INJECTION_VENV)/prompt_injection.json

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
	rm -rf $(VENV) $(HERMES_VENV) $(MCP2_VENV) $(BENCH_VENV) $(INJECTION_VENV) .npm-tools build \
		*.egg-info

# --- PostgreSQL, for the fleet backends' tests and bench/fleet.py ---------------------------
# The tests start their own throwaway server (a free port on 127.0.0.1, a temp data dir, run
# as an unprivileged user); they need only the server binaries. As root on Debian they are
# installed here, without the package's default cluster; elsewhere install PostgreSQL
# yourself (or set JEVQUEUE_PG_BINDIR). Under CI (CI=true) the PostgreSQL tests fail, not
# skip, when the binaries are missing.
.PHONY: postgres-server
test: postgres-server

postgres-server:
	@if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || [ -n "$$JEVQUEUE_PG_BINDIR" ]; then \
		true; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		mkdir -p /etc/postgresql-common; \
		grep -qs '^create_main_cluster' /etc/postgresql-common/createcluster.conf || \
			echo 'create_main_cluster = false' >> /etc/postgresql-common/createcluster.conf; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
			apt-get install -y -qq --no-install-recommends postgresql >/dev/null; \
	else \
		echo "note: no PostgreSQL server binaries; install postgresql to run its tests"; \
	fi

# --- Chromium, for the browser tests of jevqueue serve --------------------------------------
# tests/serve drives Debian's Chromium with Playwright (the playwright package of the dev
# extra, with executable_path: no browser is downloaded). As root on Debian it is installed
# here; elsewhere install chromium yourself or set JEVQUEUE_CHROMIUM to a Chromium binary.
# Under CI (CI=true) the browser tests fail, not skip, when no Chromium is found.
.PHONY: chromium
test: chromium

chromium:
	@if [ -x /usr/bin/chromium ] || [ -n "$$JEVQUEUE_CHROMIUM" ]; then \
		true; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
			apt-get install -y -qq --no-install-recommends chromium >/dev/null; \
	else \
		echo "note: no Chromium; install chromium to run the browser tests"; \
	fi
