# The two commands the README opens with: `make reproduce` and `make test`.
# Both create/reuse .venv; installing is skipped while settings.ini and setup.py are unchanged.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.attribkit-installed
SCALE ?= smoke
JOBS ?= 2
# torch/torchvision pair that imports on this platform; install_requires keeps a range.
TORCH_PIN := torch==2.14.1 torchvision==0.29.1

.PHONY: reproduce test sync-check pytest nbtest bench clean-nbs

$(STAMP): settings.ini setup.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q $(TORCH_PIN)
	$(BIN)/python -m pip install -q -e ".[dev]" $(TORCH_PIN)
	touch $(STAMP)

reproduce: $(STAMP)
	$(BIN)/attribkit-reproduce --scale $(SCALE) --jobs $(JOBS)

test: $(STAMP) sync-check pytest nbtest

# Notebooks are the source: cleaning and exporting must not change anything.
sync-check: $(STAMP)
	@before="$$(git status --porcelain; git diff)"; \
	$(BIN)/nbdev_clean && $(BIN)/nbdev_export; \
	after="$$(git status --porcelain; git diff)"; \
	if [ "$$before" != "$$after" ]; then \
	  echo "Notebooks and library are not in sync (or notebooks not clean): run nbdev_clean && nbdev_export and commit"; \
	  git status --porcelain; exit 1; fi; \
	echo "notebooks clean and in sync with attribkit/"

pytest: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 tests/

nbtest: $(STAMP)
	$(BIN)/nbdev_test --n_workers 2 --timing

bench: $(STAMP)
	for f in benchmarks/bench_*.py; do $(BIN)/python $$f || exit 1; done
