# Two commands on a fresh machine: `make run` (the main job) and `make test` (the whole suite).
# `make docs` builds the documentation site into site/; `make screenshots` refreshes its pictures.
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
# Material for MkDocs prints a notice about its successor on every build.
export NO_MKDOCS_2_WARNING ?= 1

.PHONY: install system-deps run report test test-fast typecheck docs docs-notebooks docs-diagrams screenshots \
	bench clean

install: $(STAMP) system-deps

$(STAMP): pyproject.toml $(CONSTRAINTS)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c $(CONSTRAINTS) -e '.[cpu,samples,lab,dev,tensorrt,docs,export]'
	# Keras 2 for TF-TRT's printed runs (tests/conversion/test_tftrt_goldens.py), where the
	# constraints pin it: without --no-deps it would pull the GPU build of TensorFlow.
	if grep -qi '^tf[-_]keras==' $(CONSTRAINTS); then \
		$(PY) -m pip install -q --no-deps -c $(CONSTRAINTS) tf-keras; fi
	rm -f $(VENV)/.installed*
	touch $(STAMP)

# Graphviz's `dot` renders the segment graphs; the browser test drives Debian's Chromium
# (browser downloads are impossible here, so Playwright uses this one); g++ compiles the
# workbench's TensorFlow ops (the engine-call op, TF-TRT's TRTEngineOp) on first use.
system-deps:
	@command -v dot >/dev/null && command -v chromium >/dev/null && command -v g++ >/dev/null || { \
		$(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq graphviz chromium g++ >/dev/null; }

# The sample models the README's and the app's examples use (about a minute on 2 cores, then reused).
SAMPLES := tiny_bert detector digits_cnn resnet50

# The main job: JupyterLab on the workbench notebook. Its log stays at warnings, so the URL to
# open is what it prints (JupyterLab prints that banner at every log level); that URL is the
# notebook's own (default_url), not the Launcher's. Notebooks are saved
# without outputs (tools/jupyter_server_config.py), so the tracked ones stay clean.
run: install
	$(PY) -m sample_models build $(SAMPLES)
	@echo "Starting JupyterLab: open the http://127.0.0.1:... URL below (Ctrl-C to stop)."
	cd notebooks && ../$(VENV)/bin/jupyter lab --ip=127.0.0.1 $(LAB_ROOT) \
		--LabApp.default_url=/lab/tree/00_workbench.ipynb \
		--ServerApp.log_level=WARN --config=../tools/jupyter_server_config.py

# The same view without Jupyter: a static HTML report.
report: install
	$(PY) -m sample_models build resnet50
	$(VENV)/bin/workbench report sample_models/build/resnet50 -o report.html

# The suite runs on every core, up to 4 (each worker holds a TensorFlow), a test file per worker
# at a time: a file's fixtures are built once. TEST_WORKERS=0 runs it in this one process.
TEST_WORKERS ?= auto
PYTEST_PARALLEL := $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --maxprocesses 4 --dist loadfile)

# With SKIP_STACK_INDEPENDENT=1 (CI's second environment, .ci/run) the checks that no TensorFlow
# or numpy version changes (types, lint, the docs site) are left to the first run, as the tests are.
ifeq ($(SKIP_STACK_INDEPENDENT),1)
test: install
else
test: install typecheck
	$(PY) -m ruff check workbench sample_models tests benchmarks tools
	$(PY) -m mkdocs build --strict --quiet
endif
	$(PY) -m pytest $(PYTEST_PARALLEL) $(PYTEST_ARGS)

# The suite without the tests marked slow (those that build sample models or run TensorFlow end
# to end): 1166 of 1583 tests, for a quick check while working. No docs build, no type check.
test-fast: install
	$(PY) -m ruff check workbench sample_models tests benchmarks tools
	$(PY) -m pytest -m "not slow" $(PYTEST_PARALLEL) $(PYTEST_ARGS)

# The documentation site (MkDocs, offline): open site/index.html. (`make test` builds it with
# --strict: a broken link, a missing page or a page left out of the nav fails.)
docs: install
	$(PY) -m mkdocs build

# The lessons with their outputs, as the site shows them: executes every notebook (about 7 min on
# 2 cores) into docs/notebooks/, which is kept in git. Rerun after changing a notebook
# (tests/test_docs.py names the copies out of step); `NOTEBOOKS="03_precision ..."` for some.
docs-notebooks: install
	$(PY) tools/render_notebooks.py $(NOTEBOOKS)

# The Concepts pages' diagrams (docs/images/concepts/), drawn by the workbench from the samples.
docs-diagrams: install
	$(PY) tools/draw_concept_diagrams.py

# The app's pictures in the README and the docs, taken by the browser tests from the real app.
SHOTS := test-output/browser
screenshots: install
	$(PY) -m pytest -q tests/ui/test_browser.py::test_slider_updates_summary_and_graph \
		tests/ui/test_tuning_browser.py
	cp $(SHOTS)/01_before_slider.png docs/images/workbench.png
	cp $(SHOTS)/01_nonconversion_report.png docs/images/nonconversion-report.png
	cp $(SHOTS)/01_segment_graph_opened.png docs/images/segment-graph.png
	cp $(SHOTS)/02_validation.png docs/images/validation.png
	cp $(SHOTS)/03_charts.png docs/images/charts.png
	cp $(SHOTS)/02_runs.png docs/images/runs.png
	cp $(SHOTS)/02_profiling.png docs/images/profiling.png
	cp $(SHOTS)/tune_01_search_done.png docs/images/tune.png


# The TensorRT backend family's GPU-only code, type-checked against the real APIs: stubs made
# from the installed tensorrt_rtx (stubgen), and tensorrt-stubs for tensorrt, installed alone
# (it requires tensorrt, whose libraries only come from NVIDIA's index). Both carry pybind11
# signatures Python cannot parse (a parameter named `in`, a required one after defaults): the
# sed line repairs those. Kept out of site-packages: stubs alone make `import tensorrt` succeed.
TYPING := $(VENV)/typing
TENSORRT_MODULES := workbench/engines/backends/tensorrt_api.py workbench/engines/backends/tensorrt_backend.py \
	workbench/engines/inspection/tensorrt_verdict.py workbench/engines/backends/tensorrt_rtx_onnx.py

typecheck: install $(TYPING)/.made
	MYPYPATH=$(TYPING) $(PY) -m mypy $(TENSORRT_MODULES)

$(TYPING)/.made: $(STAMP)
	rm -rf $(TYPING)
	$(PY) -m pip install -q --no-deps -c $(CONSTRAINTS) --target $(TYPING) tensorrt-stubs
	$(VENV)/bin/stubgen -q -p tensorrt_rtx -p tensorrt_rtx_bindings -o $(TYPING)
	sed -i -E -e '/^\s*def /s/([(,] ?)in: /\1in_: /g' \
		-e 's/, channel_axis: ([A-Za-z.]+)\) -> IScaleLayer/, channel_axis: \1 = ...) -> IScaleLayer/' \
		$(TYPING)/tensorrt_bindings/tensorrt.pyi $(TYPING)/tensorrt_rtx_bindings/tensorrt_rtx.pyi
	touch $@

bench: install
	$(PY) benchmarks/segmentation.py
	$(PY) benchmarks/ui.py

clean:
	rm -rf .venv .venv-tf2.17 $(VENV) sample_models/build
