# Two entry points for a fresh machine with only Python >= 3.10 and pip:
#   make run   - venv + mi-tune, then `mi-tune search --model deepseek-v4.1-flash` on the embedded defaults
#   make test  - venv + mi-tune[dev,gpu] (torch 2.13.0 CPU first), then ruff and the whole test suite
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
MODEL ?= deepseek-v4.1-flash

.PHONY: run test lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.run-installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q .
	touch $@

# torch first and pinned: a torch range admitting newer releases pulls a multi-GB CUDA build on CPU machines.
$(VENV)/.test-installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev,gpu]'
	touch $@

run: $(VENV)/.run-installed
	$(BIN)/mi-tune search --model $(MODEL)

# Chromium, the pinned engine sources (.ci/test_deps.sh) and a PostgreSQL server on 127.0.0.1 (.ci/postgres.sh,
# stopped when the recipe's shell exits): the tests that need them fail without them, they do not skip.
test: $(VENV)/.test-installed
	$(BIN)/ruff check .
	bash .ci/test_deps.sh
	source .ci/postgres.sh && $(BIN)/pytest

lint: $(VENV)/.test-installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
