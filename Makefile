# One-command entry points. Each target creates the virtual environment in
# .venv on first use (CPU build of torch, pinned by constraints-cpu.txt).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PIP_FLAGS := -c constraints-cpu.txt

.PHONY: run test test-min lint docs docs-check bench bench-accuracy bench-defaults clean bad-input-table paper-tables

$(STAMP): pyproject.toml constraints-cpu.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip
	$(BIN)/python -m pip install $(PIP_FLAGS) -e ".[dev]"
	touch $(STAMP)

## run: train CROCS on the bundled PTB-XL sample (500 real records) and print the evaluation tables
run: $(STAMP)
	$(BIN)/python -m sklearn_crocs --output-dir crocs_output

## test: run the whole test suite (unit tests, estimator checks, doctests)
test: $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist loadgroup

## test-min: the test suite on the declared lower bound of every dependency (tox -e min)
test-min: $(STAMP)
	$(BIN)/tox -e min

## docs: build the HTML documentation (runs the example gallery) into docs/_build/html, then docs-check
DOCS_STAMP := $(VENV)/.installed-docs

$(DOCS_STAMP): $(STAMP) pyproject.toml
	$(BIN)/python -m pip install $(PIP_FLAGS) -e ".[dev,docs]"
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	MPLBACKEND=Agg $(BIN)/sphinx-build -W --keep-going -b html docs docs/_build/html
	$(MAKE) docs-check

## docs-check: open every built page in headless Chromium, offline (needs: apt-get install chromium)
docs-check: $(DOCS_STAMP)
	$(BIN)/python scripts/check_docs.py docs/_build/html

## bench: training/embedding, retrieval, fast-path, engine and scaling benchmarks (minutes; run on a quiet machine)
bench: $(STAMP)
	cd benchmarks && ../$(BIN)/python bench_training.py && ../$(BIN)/python bench_retrieval.py && ../$(BIN)/python bench_fastpath.py && ../$(BIN)/python bench_engine.py && ../$(BIN)/python bench_scaling.py

## bench-accuracy: CROCS on the bundled PTB-XL sample, 5 seeds: the paper's Tables 1 and 2, ablations, baselines
bench-accuracy: $(STAMP)
	cd benchmarks && ../$(BIN)/python bench_accuracy.py

## bench-defaults: each default of CROCSClusterer against its alternatives, on validation folds
bench-defaults: $(STAMP)
	cd benchmarks && ../$(BIN)/python bench_defaults.py --fits-per-seed 2

## paper-tables: the paper's experiments (baselines, Tables 1-3, sweeps, ablations) on the
## bundled PTB-XL sample and LUDB, 5 seeds, two processes: writes paper_tables/, copies its
## raw.csv to benchmarks/results/paper_tables_raw.csv and rebuilds from that file the
## documentation's "Reproducing the paper" tables (19 minutes on 2 cores; run on a quiet
## machine). The tables of any raw.csv, without training (seconds):
##   python benchmarks/paper_tables.py --from-raw RAW --docs docs/user_guide/paper_tables.txt
paper-tables: $(STAMP)
	$(BIN)/python benchmarks/paper_tables.py --n-jobs 2 --output-dir paper_tables
	cp paper_tables/raw.csv benchmarks/results/paper_tables_raw.csv
	$(BIN)/python benchmarks/paper_tables.py --from-raw benchmarks/results/paper_tables_raw.csv --docs docs/user_guide/paper_tables.txt

## bad-input-table: rerun the tests marked bad_input and rewrite the Reliability page's table
bad-input-table: $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist loadgroup -q -m bad_input --bad-input-table=docs/user_guide/bad_input_table.txt

lint: $(STAMP)
	$(BIN)/ruff check sklearn_crocs tests examples benchmarks scripts

clean:
	rm -rf $(VENV) .tox .pytest_cache crocs_output paper_tables docs/_build docs/auto_examples docs/generated docs/sg_execution_times.rst
