# Two commands do all set-up: `make demo` and `make test`. Both create .venv themselves.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# numba's compiled kernels (ArtUC, LDA), cached beside their sources: compiled once here,
# not by a steward's first release (about a minute) nor by each test worker. The same step
# migrates a Prefect database template, so a home's first server skips the migrations.
WARM := $(VENV)/.warm
KERNELS := src/ehr_release/algorithms/artuc/gendiag_kernel.py src/ehr_release/algorithms/lda/kernels.py \
	src/ehr_release/flows/prefect_database.py
# The suite in parallel (pytest-xdist): a test file stays on one worker (its module fixtures
# are built once); each worker has its own homes, Prefect harness and databases (conftest).
TEST_ARGS ?= -n auto --maxprocesses=3 --dist loadfile --durations=20

.PHONY: demo test lint bench clean install

install: $(WARM)

$(STAMP): pyproject.toml constraints.txt
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON) (set PYTHON=...)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

# Byte-compiled once here too: where PYTHONDONTWRITEBYTECODE is set (this machine's CI does)
# every command would otherwise compile the modules it imports on each start.
$(WARM): $(STAMP) $(KERNELS)
	$(BIN)/python -m compileall -q src
	$(BIN)/ehr-release warm-up
	touch $(WARM)

demo: $(WARM)
	bash scripts/demo.sh

test: $(WARM)
	EHR_RELEASE_TEST_MODE=1 $(BIN)/python -m pytest $(TEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check src tests bench

bench: $(WARM)
	@for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b; done

clean:
	rm -rf $(VENV) .ehr_release out
