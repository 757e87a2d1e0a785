# ctxlifed — two commands for a newcomer: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: run test test-min eval bench reliability e2e lint clean venv

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip >/dev/null 2>&1 || true
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	@touch $(STAMP)

venv: $(STAMP)

## run: bootstrap .venv, install, start the daemon in the foreground (default socket and store)
run: $(STAMP)
	@$(VENV)/bin/ctxlifed

## test: bootstrap .venv and run the whole suite
test: $(STAMP)
	$(PY) -m pytest -q

## eval: replay the labelled corpus (eval/corpus) through the real shim and daemon; print the judgment scores
eval: $(STAMP)
	$(PY) eval/run.py

## test-min: the whole suite at the lowest versions pyproject.toml allows (tests/min-versions.txt), in .venv-min
MIN_VENV  := .venv-min
MIN_STAMP := $(MIN_VENV)/.installed
$(MIN_STAMP): pyproject.toml tests/min-versions.txt
	@test -x $(MIN_VENV)/bin/python || $(PYTHON) -m venv $(MIN_VENV)
	$(MIN_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -c tests/min-versions.txt -e '.[test]'
	$(MIN_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r tests/min-versions.txt
	@touch $(MIN_STAMP)

test-min: $(MIN_STAMP)
	$(MIN_VENV)/bin/python -m pytest -q

## bench: the benchmark suite (results in bench/results/*.json and a table)
bench: $(STAMP)
	$(PY) bench/run.py

## reliability: the whole reliability matrix with long trials and soaks (fast tier also runs in `make test`); figures in .cache/reliability.jsonl (CTXLIFED_RELIABILITY_RESULTS to change)
reliability: $(STAMP)
	CTXLIFED_RELIABILITY=long $(PY) -m pytest -q tests/reliability

clean:
	rm -rf $(VENV) $(MIN_VENV) .cache build dist src/*.egg-info
