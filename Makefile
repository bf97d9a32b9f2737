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

bench: $(STAMP)
	$(BIN)/python bench/governor.py
	$(BIN)/python bench/routing.py
	$(BIN)/python bench/policy.py

clean:
	rm -rf $(VENV) build *.egg-info

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
