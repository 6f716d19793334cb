# The two set-up commands: `make demo` and `make test`. Both create .venv if it is missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.stoker-installed

.PHONY: demo test lint typecheck unit install clean

install: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade "pip>=25.1"
	# torch is pinned to the CPU build on disk; a plain `torch` would fetch a CUDA build.
	$(BIN)/python -m pip install -q "torch==2.13.0" -e ".[all]" --group dev
	# Interoperability tests run against the real Energon package.
	$(BIN)/python -m pip install -q "torch==2.13.0" --group interop
	touch $(STAMP)

demo: install
	PATH="$(CURDIR)/$(BIN):$$PATH" bash scripts/demo.sh

test: install
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) demo-data .pytest_cache .mypy_cache .ruff_cache
