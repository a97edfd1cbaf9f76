# sweeper — set-up and everyday commands. Everything installs into .venv.
#   make demo    install if needed, then run the demo sweep on this machine
#   make test    install if needed, then run the whole test suite
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# fairseq-fixed declares torchaudio (no CPU build exists; text training never imports
# it), so it goes in last with --no-deps, building against the torch already installed.
FAIRSEQ := fairseq-fixed==0.12.3.1
TORCH   := torch==2.13.0

.PHONY: install test test-fast lint format demo bench clean

install: $(STAMP)

$(STAMP): pyproject.toml Makefile
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install $(TORCH)
	$(BIN)/pip install -e '.[dev]'
	$(BIN)/pip install --no-deps --no-build-isolation $(FAIRSEQ)
	$(BIN)/python -c "import fairseq, torch, transformers, ray, mlflow, peft, optuna"
	@touch $@

test: install
	$(BIN)/pytest

test-fast: install
	$(BIN)/pytest -m "not integration and not slow"

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# The 12-trial demo grid on this machine; outputs (and the MLflow store) go to runs/demo.
# Run it again after a completed demo with `$(BIN)/sweeper run sweeps/demo.yaml --resume`.
demo: install
	$(BIN)/sweeper run sweeps/demo.yaml

clean:
	rm -rf runs report .pytest_cache .ruff_cache
