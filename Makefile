# The two set-up commands: `make run` and `make test`. Each bootstraps .venv:
# `run` installs what the service needs, `test` every extra and the dev group, and the
# Node.js packages the MCP interoperability tests drive. `make test` is the whole run:
# at its end, pytest names each group of tests that could not run here, and why.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip install --quiet
BASE := $(VENV)/.base
SERVICE := $(VENV)/.service
STAMP := $(VENV)/.installed
NODE_DIR := tests/mcp/node
# Written after `npm ci`: the packages are installed again only when the lockfile changes.
NODE_STAMP := $(NODE_DIR)/node_modules/.installed

.PHONY: run test test-packaging node lint typecheck docs-check bench docs clean

$(BASE):
	$(PY) -m venv $(VENV)
	$(PIP) --upgrade pip
	touch $(BASE)

$(SERVICE): pyproject.toml | $(BASE)
	$(PIP) -e '.[service]'
	touch $(SERVICE)

# pip reads the dev dependency group (PEP 735) from pyproject.toml.
$(STAMP): pyproject.toml | $(BASE)
	$(PIP) -e '.[all]' --group dev
	# The OpenAPI fuzz test needs schemathesis 4.32+, whose jsonschema-rs pin (<0.61)
	# clashes with toolbound's (>=0.61); its other requirements came with the dev group.
	$(PIP) --no-deps 'schemathesis>=4.32'
	touch $(STAMP) $(SERVICE)

# The official MCP clients and suites of tests/mcp (versions pinned in the lockfile).
# Without npm the recipe says so and goes on: those tests are then skipped, and named
# in the summary at the end of the run.
$(NODE_STAMP): $(NODE_DIR)/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
	  npm ci --prefix $(NODE_DIR) --no-audit --no-fund --loglevel=error && touch $@; \
	else \
	  echo "npm not found: the MCP Node.js tests will be skipped (install Node.js 20 and npm)"; \
	fi

node: $(NODE_STAMP)

run: $(SERVICE)
	$(BIN)/toolbound serve --config examples/toolbound.toml

# The suite on JOBS processes (pytest-xdist; `auto`: one per core), each module's tests in
# one process, so a module's servers and fixtures start once. `make test JOBS=0` runs it
# in this process alone.
JOBS ?= auto

test: $(STAMP) $(NODE_STAMP) lint typecheck docs-check
	$(BIN)/python -m pytest -n $(JOBS) --dist loadfile

# Each extra from the built wheel, alone in a fresh venv (needs the package index; a few
# minutes): the `packaging` marker, which `make test` leaves out and .ci/run adds.
test-packaging: $(STAMP)
	$(BIN)/python -m pytest -m packaging tests/packaging

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples docs/_tooling conformance
	$(BIN)/ruff format --check src tests bench examples docs/_tooling conformance

typecheck: $(STAMP)
	$(BIN)/mypy

bench: $(STAMP)
	@for f in bench/bench_*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

# The documentation site (mkdocs.yml) builds without a single warning; it goes to site/.
# NO_MKDOCS_2_WARNING quiets the Material theme's notice about MkDocs 2.0.
docs-check: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# docs/problems.md is generated from the problem catalogue, docs/configuration.md from
# the configuration checker's tables.
docs: $(STAMP)
	$(BIN)/python -c 'import sys, toolbound.problems as p; sys.stdout.write(p.render_markdown())' > docs/problems.md
	$(BIN)/python -c 'import sys, toolbound.config_reference as c; sys.stdout.write(c.render_markdown())' > docs/configuration.md

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache site
