# Quick start: `make demo` (the main job on a local cluster) and `make test` (the test suite).
# Both bootstrap everything from nothing (scripts/setup.sh) on a fresh Debian machine as root.
VENV := .venv
PY := $(VENV)/bin/python
WRACK := $(VENV)/bin/wrack

.PHONY: setup demo test lint bench clean

setup:
	@bash scripts/setup.sh

demo: setup
	$(WRACK) demo

test: setup
	$(VENV)/bin/ruff check .
	$(PY) -m pytest $(PYTEST_ARGS)

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check . || true

bench: setup
	@for b in bench/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
