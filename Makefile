# Two entry points for a fresh machine with only Python >= 3.10 and pip:
#   make run   - venv + mi-tune, then `mi-tune search --model deepseek-v4.1-flash` on the embedded defaults
#   make test  - venv + mi-tune[dev,gpu] (torch 2.13.0 CPU first), then ruff and the whole test suite
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

test: $(VENV)/.test-installed
	$(BIN)/ruff check .
	$(BIN)/pytest

lint: $(VENV)/.test-installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
