# Two commands a new user needs: `make demo` and `make test`. Each sets up .venv itself.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# --no-compile: pip would byte-compile all ~19,000 installed .py files (~1 CPU-minute; transformers alone ~9 s);
# Python compiles the few thousand that are imported, once, on first import.
PIP_FLAGS := --quiet --disable-pip-version-check --progress-bar off --no-compile -c constraints.txt
PIP := $(PY) -m pip install $(PIP_FLAGS)
export WANDB_MODE ?= offline
export WANDB_SILENT ?= true

.PHONY: install demo test test-fast test-floor gallery-proofs lint ruff typecheck bench clean

# pytest-xdist workers: one per core up to 4 (each test may itself start 2 DDP processes); `--dist worksteal` lets
# an idle worker take queued tests from a busy one (the suite ends on both cores). `make test TEST_WORKERS=0`
# runs in one process.
TEST_WORKERS ?= $(shell $(PYTHON) -c "import os; print(min(4, max(1, len(os.sched_getaffinity(0)))))")

# The oldest Lightning we support: pyproject.toml's `lightning>=` (tests/test_packaging.py keeps them equal).
LIGHTNING_FLOOR := 2.6.0
FLOOR_VENV := .venv-floor

$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	# torch first: the CPU wheel. A bare `pip install lightning` would pull a multi-GB CUDA build.
	# pip >= 25.1 installs the PEP 735 dependency groups (dev, notebooks, docs: pyproject.toml), kept out of the wheel
	$(PIP) "pip>=25.1"
	$(PIP) torch==2.13.0
	$(PIP) -e ".[data,plots,wandb,deepspeed,rich]" --group dev --group notebooks --group docs
	$(PY) -m ipykernel install --sys-prefix --name python3 > /dev/null
	touch $@

install: $(VENV)/.installed

demo: install
	$(VENV)/bin/lightning-recipes demo

lint: ruff typecheck

ruff: install
	$(VENV)/bin/ruff check conftest.py lightning_recipes tests galleries benchmarks docs/_ext docs/conf.py
	$(VENV)/bin/ruff format --check conftest.py lightning_recipes tests galleries benchmarks docs/_ext docs/conf.py

typecheck: install
	$(VENV)/bin/mypy

# Lint, mypy, the strict docs build and the suite run side by side (--output-sync: each target's output printed
# whole when it ends; any failure fails `make test`). The docs build keeps one core busy for ~6 minutes while it
# runs the notebooks afresh (its notebook cache is cleared first); the suite fills the other core, then both.
# The two test files that read that build run after it (READS_DOCS): tests/docs checks the built site, and
# tests/test_notebooks.py reads the notebooks' outputs instead of running them a second time.
# Every test's time lands in build/test-results*.xml (JUnit XML), for the suite's cost by directory.
# The suite's kernels are pinned to AVX2 (conftest.py says why), the docs build's notebooks included.
READS_DOCS := tests/docs tests/test_notebooks.py
PYTEST_SUITE := $(PY) -m pytest -n $(TEST_WORKERS) --dist worksteal
ifeq ($(shell uname -m),x86_64)
test: export ATEN_CPU_CAPABILITY ?= avx2
test: export MKL_ENABLE_INSTRUCTIONS ?= AVX2
test: export ONEDNN_MAX_CPU_ISA ?= AVX2
endif
test: install
	rm -rf docs/_build/.jupyter_smoke1
	$(MAKE) --no-print-directory -j4 --output-sync=target ruff typecheck docs suite-without-docs
	LR_DOCS_HTML=docs/_build/html $(PYTEST_SUITE) $(READS_DOCS) --junitxml=build/test-results-docs.xml

.PHONY: suite-without-docs
suite-without-docs: install
	$(PYTEST_SUITE) $(addprefix --ignore=,$(READS_DOCS)) --durations=25 --junitxml=build/test-results.xml

# The developer's loop: the suite without the tests marked `slow` (`make test` and CI run them), no lint/docs.
test-fast: install
	$(PY) -m pytest -n $(TEST_WORKERS) -q -p no:cacheprovider -m "not slow"

# The gallery proofs (each planted bug real, each healthy run healthy; plain torch/Lightning, no library code) are
# deselected from every other run; they run here, when a gallery changes, and when all pass this writes
# galleries/proofs.stamp, which an always-on test compares with the galleries (galleries/proofs.py). They run on
# the machine's own kernels, as stamped (LR_KERNELS=native: galleries/proofs.py says why).
gallery-proofs: install
	LR_KERNELS=native $(PY) -m pytest galleries -n $(TEST_WORKERS) -q -p no:cacheprovider --gallery-proofs -m gallery_proof
	git status --short galleries/proofs.stamp

# One test per place where our code meets Lightning's API, again against the oldest supported Lightning, in its
# own environment (CI runs it after `test`). The selection and how it is kept honest: tests/helpers/floor.py.
# The floor venv is a copy of .venv with only Lightning swapped for the floor release: the pass varies one thing,
# and the copy takes ~20 s where a fresh install takes minutes. Its bin/ scripts still name .venv's python: call
# $(FLOOR_VENV)/bin/python -m ... (its pyvenv.cfg makes that the floor environment).
$(FLOOR_VENV)/.installed: $(VENV)/.installed Makefile
	rm -rf $(FLOOR_VENV)
	cp -a $(VENV) $(FLOOR_VENV)
	$(FLOOR_VENV)/bin/python -m pip install $(PIP_FLAGS) \
		"lightning==$(LIGHTNING_FLOOR)"
	$(FLOOR_VENV)/bin/python -m ipykernel install --sys-prefix --name python3 > /dev/null
	touch $@

test-floor: $(FLOOR_VENV)/.installed
	$(FLOOR_VENV)/bin/python -c "import lightning; assert lightning.__version__ == '$(LIGHTNING_FLOOR)', lightning.__version__"
	$(FLOOR_VENV)/bin/python -m pytest tests -n $(TEST_WORKERS) -q -p no:cacheprovider -m floor --dist worksteal --junitxml=build/test-results-floor.xml

bench: install
	# public optimizers to compare against, with --no-deps: timm would pull torchvision (a CUDA build that cannot
	# load beside torch+cpu) and the others a different torch; benchmarks/optimizers.py loads timm's optimizer files alone
	$(PIP) --no-deps --group bench timm
	$(PY) -m benchmarks

# The documentation site, built strictly: a warning, a broken reference, a public name without a docstring fails.
# Needs the docs dependency group in $(VENV) (make install puts it there).
.PHONY: docs
docs: install
	$(VENV)/bin/sphinx-build -q -W --keep-going -n -b html docs docs/_build/html
	@echo "Open $(CURDIR)/docs/_build/html/index.html"

clean:
	rm -rf $(VENV) $(FLOOR_VENV) lightning_logs demo_output .pytest_cache .mypy_cache .ruff_cache
