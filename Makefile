# Two commands on a fresh machine: `make run` (the main job) and `make test` (the whole suite).
# Both install everything into .venv/ first, at the exact versions of $(CONSTRAINTS).
# Another environment: `make test VENV=.venv-tf2.17 CONSTRAINTS=constraints/ci-tf2.17.txt`.
VENV ?= .venv
CONSTRAINTS ?= constraints/ci-tf2.21.txt
PYTHON ?= python3
PYTEST_ARGS ?=
PY := $(VENV)/bin/python
# One stamp per constraints file, so pointing a venv at other constraints reinstalls it.
STAMP := $(VENV)/.installed-$(notdir $(CONSTRAINTS))
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# JupyterLab refuses to run as root unless told; our machines and containers run as root.
LAB_ROOT := $(shell [ "$$(id -u)" = 0 ] && echo --allow-root)
export TF_CPP_MIN_LOG_LEVEL ?= 2

.PHONY: install system-deps run report test bench clean

install: $(STAMP) system-deps

$(STAMP): pyproject.toml $(CONSTRAINTS)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c $(CONSTRAINTS) -e '.[cpu,samples,lab,dev,export]'
	rm -f $(VENV)/.installed*
	touch $(STAMP)

# Graphviz's `dot` renders the segment graphs; the browser test drives Debian's Chromium
# (browser downloads are impossible here, so Playwright uses this one).
system-deps:
	@command -v dot >/dev/null && command -v chromium >/dev/null || { \
		$(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq graphviz chromium >/dev/null; }

# The main job: JupyterLab on the workbench notebook (open the URL it prints).
run: install
	$(PY) -m sample_models build resnet50
	cd notebooks && ../$(VENV)/bin/jupyter lab 00_workbench.ipynb --ip=127.0.0.1 $(LAB_ROOT)

# The same view without Jupyter: a static HTML report.
report: install
	$(PY) -m sample_models build resnet50
	$(VENV)/bin/workbench report sample_models/build/resnet50 -o report.html

test: install
	$(PY) -m ruff check workbench sample_models tests benchmarks
	$(PY) -m pytest $(PYTEST_ARGS)

bench: install
	$(PY) benchmarks/segmentation.py
	$(PY) benchmarks/ui.py

clean:
	rm -rf .venv .venv-tf2.17 $(VENV) sample_models/build
