# sweeper — set-up and everyday commands. Everything installs into .venv.
#   make demo    install if needed, then run the demo sweep on this machine
#   make test    install if needed, lint, then the whole test suite but the soak (make reliability)
#   make lint    ruff, the import-layer contract of docs/architecture.md, no import cycles
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# How the install is made fast (measured in docs/benchmarks.md, "Install"):
# - torch goes in first with pip, so pip's own configuration picks the wheel (the local CPU
#   build on the dev machines, the CUDA build from PyPI elsewhere); the pinned uv comes with it.
# - uv then installs the rest (`-e '.[dev,server]'`), leaving that torch in place: it resolves the
#   same versions as pip, several times faster, and a warm uv cache installs in seconds.
# - fairseq-fixed ships only as an sdist. A plain build compiles three torch C++ extensions
#   (libbase, libnat, alignment_train; CUDA ones too where CUDA_HOME is set), most of the
#   install's time, that sweeper never imports (fairseq loads them lazily, for base layers,
#   non-autoregressive models and an example). tools/fairseq_wheel.py builds the pinned
#   sdist (sha256 checked) without them, against this venv's numpy, Cython and torch, and
#   caches the wheel in ~/.cache/sweeper/wheels. It is installed with --no-deps: its
#   metadata declares torchaudio (no CPU build exists; text training never imports it).
# - Everything is byte-compiled at install (pip's default; uv's --compile-bytecode): where
#   $PYTHONDONTWRITEBYTECODE is set (these machines and CI set it), Python never writes
#   bytecode at import, and every trainer, Ray worker and CLI process would compile torch,
#   Ray, transformers and MLflow from source again.
TORCH   := torch==2.13.0
UV      := uv==0.13.9
UV_PIP   = $(BIN)/uv pip install --compile-bytecode --python $(BIN)/python

.PHONY: install postgres-server test test-fast lint format demo bench clean reliability browser spec-doc

install: $(STAMP) postgres-server

# The tests run a real PostgreSQL server (tests/support/postgres.py) from Debian's
# binaries; where a machine lacks them they are installed here (root, as on CI), without
# the package's own cluster: no server is left running by the install.
postgres-server:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
		echo "PostgreSQL server binaries missing: apt-get install postgresql"; \
		mkdir -p /etc/postgresql-common && \
		echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.conf && \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql; }

$(STAMP): pyproject.toml Makefile tools/fairseq_wheel.py
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install $(TORCH) $(UV)
	$(UV_PIP) -e '.[dev,server]'
	wheel=$$($(BIN)/python tools/fairseq_wheel.py) && $(UV_PIP) --no-deps "$$wheel"
	$(BIN)/python -c "import fairseq, fairseq.data.data_utils_fast, torch, transformers, ray, mlflow, peft, optuna"
	@touch $@

test: install lint
	$(BIN)/pytest -m "not soak" --ignore=$(BROWSER_TEST) --durations=15

test-fast: install
	$(BIN)/pytest -m "not integration and not slow"

# The MLflow UI in headless Chromium (tests/integration/test_browser_ui.py). Nothing can
# download a browser, so Debian's chromium + chromedriver are installed when missing
# (needs root); `make test` leaves it out (CI has no browser). Its screenshots replace
# those in docs/figures.
BROWSER_TEST := tests/integration/test_browser_ui.py
browser: install
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
		apt-get install -y chromium chromium-driver
	SWEEPER_SCREENSHOTS=docs/figures $(BIN)/pytest $(BROWSER_TEST) -p no:cacheprovider -rs

# The layers (docs/architecture.md) are import-linter contracts in pyproject.toml;
# tools/check_cycles.py adds "no import cycle between any two modules of src/sweeper".
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache
	$(BIN)/python tools/check_cycles.py sweeper

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# docs/spec.md, the sweep file reference, from the schema's field docstrings in
# src/sweeper/spec/ (schema.py and its *_block.py modules); tests/unit/test_docs.py fails
# while the committed page differs.
spec-doc: install
	$(BIN)/python tools/spec_doc.py --out docs/spec.md

# The 12-trial demo grid on this machine; outputs (and the MLflow store) go to runs/demo.
# Run it again after a completed demo with `$(BIN)/sweeper run sweeps/demo.yaml --resume`.
demo: install
	$(BIN)/sweeper run sweeps/demo.yaml

# Benchmarks on this machine; each script replaces its section of docs/benchmarks.md.
# The whole target takes about 25 min on 2 idle cores (the 2026-11-26 VM). GPU packing
# runs only where a GPU is (elsewhere it writes its method, skipped). Two scripts also run
# older code, its src/ first on PYTHONPATH: the overhead's single-trial sweep with 1a38f1e's
# (before issue 18's fixed-cost work), and `make demo`'s sweep cold with c5bd0ef's (main
# before the stage graph), comparing their records.
# The demo's data and pretrained checkpoint are prepared first if runs/demo lacks them
# (about 2.5 min, untimed). Options per script: `python bench/NAME.py --help`.
bench: install
	$(BIN)/python bench/bench_overhead.py --baseline 1a38f1e
	$(BIN)/python bench/bench_concurrency.py
	$(BIN)/python bench/bench_summarize.py
	$(BIN)/python bench/bench_throughput.py
	$(BIN)/python bench/bench_frameworks.py
	$(BIN)/python bench/bench_gpu_packing.py
	$(BIN)/python bench/bench_staging.py
	$(BIN)/python bench/bench_lab_size.py
	$(BIN)/python bench/bench_stages.py --baseline c5bd0ef

# Fault-injection and bad-input tests (every test file that records into the reliability
# log), then docs/reliability.md from what they recorded; the page is written even when a
# test fails (its row says FAIL), and the target then fails too.
RELIABILITY_LOG   := report/reliability.jsonl
RELIABILITY_COMMAND ?= make reliability
RELIABILITY_TESTS  = $(shell grep -l '^from tests.support.reliability import' tests/integration/test_*.py)
# Long scenarios kept out of `make test` (marked soak) in files that record nothing: run here too.
SOAK_TESTS = $(filter-out $(RELIABILITY_TESTS),$(shell grep -l 'mark.soak' tests/integration/test_*.py))
reliability: install
	$(if $(RELIABILITY_TESTS),,$(error no test file imports reliability.record))
	@mkdir -p report && rm -f $(RELIABILITY_LOG)
	SWEEPER_RELIABILITY_LOG=$(abspath $(RELIABILITY_LOG)) $(BIN)/pytest $(RELIABILITY_TESTS) \
		--junitxml=report/reliability-junit.xml; \
	status=$$?; \
	$(if $(SOAK_TESTS),$(BIN)/pytest -m soak $(SOAK_TESTS) || status=1;) \
	$(BIN)/python tests/support/reliability_report.py $(RELIABILITY_LOG) docs/reliability.md \
		--junit report/reliability-junit.xml --command "$(RELIABILITY_COMMAND)" && exit $$status

clean:
	rm -rf runs report .pytest_cache .ruff_cache
