# The README's two commands: `make record` and `make test`; `make check` is the slower tier CI adds.
# Both create/reuse .venv; installing is skipped while settings.ini and setup.py are unchanged.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.attribkit-installed
SCALE ?= smoke
JOBS ?= auto   # notebooks at once: one per core; on CUDA at most 4 per GPU (attribkit.reproduce.auto_jobs)
# torch/torchvision pair that imports on this platform; install_requires keeps a range.
TORCH_PIN := torch==2.14.1 torchvision==0.29.1

.PHONY: reproduce record data test check sync-check format pytest nbtest slow-tests bench gpu-check lab

$(STAMP): settings.ini setup.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q $(TORCH_PIN)
	$(BIN)/python -m pip install -q -e ".[dev]" $(TORCH_PIN)
	touch $(STAMP)

reproduce: $(STAMP) data
	$(BIN)/attribkit-reproduce --scale $(SCALE) --jobs $(JOBS)

# The committed record: every notebook at the cpu tier (real data) → reproduction/cpu/*.json, summary.md; figures/*.png
record: $(STAMP) data
	$(BIN)/attribkit-reproduce --scale cpu --jobs $(JOBS) --out reproduction/cpu --figures figures $(RECORD_ARGS)

# Real data for the cpu tier and the tests: Fashion-MNIST from Debian's package (offline; nothing is downloaded at run time)
FMNIST := /usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz
data:
	@if [ -f "$(FMNIST)" ] || [ -f "$$ATTRIBKIT_DATA/FashionMNIST/raw/t10k-labels-idx1-ubyte.gz" ] || \
	    [ -f "$$ATTRIBKIT_DATA/FashionMNIST/raw/t10k-labels-idx1-ubyte" ]; then echo "Fashion-MNIST: present"; \
	elif command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	  (apt-get update -qq && apt-get install -y -qq dataset-fashion-mnist >/dev/null) && echo "Fashion-MNIST: installed"; \
	else echo "Fashion-MNIST is missing. As root on Debian/Ubuntu: apt-get install dataset-fashion-mnist;" \
	  "or put the four idx files in DIR/FashionMNIST/raw and export ATTRIBKIT_DATA=DIR"; exit 1; fi

# The contributor's loop (about 70 s): notebooks ↔ library sync, the fast pytest tier, the notebooks' example-tests
test: $(STAMP) data sync-check pytest nbtest

# The slower tier (what .ci/run adds after `make test`): tests marked slow (the wheel in a fresh venv, the 24-notebook
# paper-path dry run, training to accuracy floors), then the smoke reproduction of every repro notebook
check: $(STAMP) data slow-tests reproduce

# Notebooks are the source: cleaning and exporting must not change anything.
sync-check: $(STAMP)
	@before="$$(git status --porcelain; git diff)"; \
	$(BIN)/nbdev_clean && $(BIN)/nbdev_export; \
	after="$$(git status --porcelain; git diff)"; \
	if [ "$$before" != "$$after" ]; then \
	  echo "Notebooks and library are not in sync (or notebooks not clean): run nbdev_clean && nbdev_export and commit"; \
	  git status --porcelain; exit 1; fi; \
	echo "notebooks clean and in sync with attribkit/"
	@$(BIN)/ruff format --check -q nbs/papers || { echo "nbs/papers is not formatted: run make format and commit"; exit 1; }

# The paper layer's notebooks formatted by ruff (one statement per line), then exported
format: $(STAMP)
	$(BIN)/ruff format -q nbs/papers && $(BIN)/nbdev_clean && $(BIN)/nbdev_export

# pytest.ini_options in pyproject.toml deselect the tests marked slow; `slow-tests` runs only those, one at a time, so
# that the dry run's two notebook kernels have the two cores to themselves
pytest: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 tests/

slow-tests: $(STAMP)
	$(BIN)/python -m pytest -q -m slow tests/

# Two notebooks at a time, each with one torch thread (two threads each would oversubscribe the two cores)
nbtest: $(STAMP)
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} $(BIN)/nbdev_test --n_workers 2 --timing

bench: $(STAMP)
	for f in benchmarks/bench_*.py; do $(BIN)/python $$f || exit 1; done

# On a CUDA machine: the benchmarks with --device cuda, tests/test_cuda.py and a smoke reproduction → gpu_check.json (exits 0 without CUDA)
gpu-check: $(STAMP) data
	$(BIN)/python benchmarks/gpu_check.py --out gpu_check.json

# JupyterLab on the repro notebooks from the project's venv (as root too: --allow-root is harmless otherwise)
lab: $(STAMP)
	$(BIN)/jupyter lab --allow-root --no-browser nbs/repro
