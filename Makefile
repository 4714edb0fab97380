# Quick start: `make demo` (the main job on a local cluster) and `make test` (the test suite).
# Both bootstrap everything from nothing (scripts/setup.sh) on a fresh Debian machine as root.
VENV := .venv
PY := $(VENV)/bin/python
WRACK := $(VENV)/bin/wrack

.PHONY: setup demo test lint bench compat compat-quick compat-ci clean

setup:
	@bash scripts/setup.sh

demo: setup
	$(WRACK) demo

test: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(PY) -m pytest $(PYTEST_ARGS)

# The lint rules (pyproject.toml [tool.ruff.lint]) and the type check. The code is formatted by
# hand to the house style (docs/ARCHITECTURE.md "Code style to learn from"), not by `ruff format`: tried on
# the whole tree it rewrote 389 of 501 files and added 16 % lines, 13 product files past 600.
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

bench: setup
	@for b in bench/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

# Real clients' own test suites (kafka-python, Debian's librdkafka) against 1- and 3-node local
# clusters; a table of passed/failed/skipped; fails only on a failure not in
# compat/expected-failures.txt (docs/broker.md, "Compatibility"). COMPAT_ARGS: e.g. --json FILE.
compat: setup
	$(PY) -m compat $(COMPAT_ARGS)

# The part that fits CI: about 2-3 minutes on 2 cores once librdkafka is built (the first build adds ~3).
compat-quick: setup
	$(PY) -m compat --quick $(COMPAT_ARGS)

# What CI runs (.ci/run): kafka-python's suite against one broker, about 40 s from nothing.
compat-ci: setup
	$(PY) -m compat --suite kafka-python --nodes 1 $(COMPAT_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
