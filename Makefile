# qcn-p4 front door.  `make run` runs the main job, `make test` the test suite; both install
# what they need (Debian packages, a virtual environment, the project) and are safe to rerun.

SHELL := /bin/bash
.DEFAULT_GOAL := help

# Debian's interpreter: its `mininet` module is only visible to /usr/bin/python3.
PYTHON_BASE ?= $(shell [ -x /usr/bin/python3 ] && echo /usr/bin/python3 || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python
BUILD := build
P4_SOURCES := $(shell find p4src -name '*.p4' 2>/dev/null)

.PHONY: help deps sysdeps venv lint fmt test test-long unit build ptf bench run reproduce robustness-map clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

sysdeps:  ## install the Debian packages the project uses (mininet, iperf3, ...)
	@scripts/install-deps.sh system

deps: sysdeps  ## also the p4lang toolchain (p4c, BMv2, PI) and Chromium for the browser test
	@scripts/install-deps.sh p4lang
	@scripts/install-deps.sh browser

# The install builds the simulator's compiled core (setup.py: simulator/_core.cpp, with g++
# and python3-dev from sysdeps and pybind11 from PyPI), again whenever its source changes;
# a machine that cannot build it says so in one line and runs the Python engine.
$(VENV)/.installed: pyproject.toml setup.py simulator/_core.cpp
	@echo "==> virtual environment $(VENV) ($(PYTHON_BASE))"
	@[ -x $(PY) ] || $(PYTHON_BASE) -m venv --system-site-packages $(VENV)
	@$(PY) -m pip install -q --upgrade pip
	@$(PY) -m pip install -q -e '.[dev]'
	@$(PY) -c 'from qcn.simulator.compiled import core_status; print(core_status())'
	@touch $@

venv: sysdeps $(VENV)/.installed  ## create the virtual environment and install the project
	@scripts/install-deps.sh thrift-path $(VENV)

# mypy through scripts/typecheck.py: it names the layers' files as they are imported
# (controller/agent.py is qcn.controller.agent), which mypy alone cannot (docs/layout.md).
lint: venv  ## ruff (lint + format check) and mypy; any finding fails
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) scripts/typecheck.py

fmt: venv  ## reformat the Python code
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# The tests that need neither root nor BMv2 run on every CPU at once (pytest-xdist, a file
# to a worker), then the rest one at a time: they start switches and real-time processes
# and measure their timing against the machine (tests/toolchain.py, ALONE). Both parts
# always run; either failing fails the target.
PYTEST_SUITE = $(VENV)/bin/pytest -n auto --dist loadfile -m 'not alone'; status=$$?; \
	$(VENV)/bin/pytest -m alone || status=1; exit $$status

unit: venv  ## the Python test suite only
	$(PYTEST_SUITE)

test: lint  ## the whole test suite (PTF/BMv2 parts skip in one line without the toolchain)
	@scripts/install-deps.sh status
	$(PYTEST_SUITE)

test-long: venv  ## the long BMv2 tests the default suite leaves out (tests/toolchain.py)
	QCN_LONG_TESTS=1 $(VENV)/bin/pytest tests/test_mininet_bmv2.py tests/test_control.py tests/test_net_bmv2.py tests/test_live_browser.py

# The p4c command line is defined once, in qcn/core/pipeline.py (stdlib only: no venv needed).
$(BUILD)/qcn_cp.json: $(P4_SOURCES)
	@QCN_BUILD_DIR=$(BUILD) $(PYTHON_BASE) -m qcn.core.pipeline

build: $(BUILD)/qcn_cp.json  ## compile the P4 pipeline into build/ (BMv2 JSON + P4Info)

ptf: venv build  ## PTF tests of the pipeline on simple_switch_grpc (needs root and the toolchain)
	$(VENV)/bin/qcn ptf

bench: venv  ## benchmarks (each prints its figures and ratios against a same-run baseline)
	$(PY) -m bench.sim_bench
	$(PY) -m bench.scale_bench
	$(PY) -m bench.htsim_bench
	$(PY) -m bench.rp_bench
	$(PY) -m bench.flow_bench
	$(PY) -m bench.pause_bench
	$(PY) -m bench.sweep_bench
	$(PY) -m bench.tune_bench
	$(PY) -m bench.import_costs
	@if command -v p4c >/dev/null && command -v simple_switch_grpc >/dev/null; then \
	    $(PY) -m bench.pipeline_bench && $(PY) -m bench.bmv2_builds && $(PY) -m bench.ctl_bench && $(PY) -m bench.hold_bench; \
	else echo "bench: pipeline, controller and hold benchmarks skipped: p4lang toolchain missing"; fi

run: venv  ## the main job: the transient experiment (seed 000), results and plots in results/
	$(VENV)/bin/qcn run transient --force
	@[ "$$(command -v qcn)" = "$(CURDIR)/$(VENV)/bin/qcn" ] || \
	    echo 'make run: `qcn` is $(VENV)/bin/qcn; put it on the PATH: export PATH="$$PWD/$(VENV)/bin:$$PATH"'

reproduce: venv  ## the seeds' published numbers next to the simulator's
	$(VENV)/bin/qcn reproduce

ROBUSTNESS_MAP := results/robustness-map
ROBUSTNESS_GRID := --seeds 3 --no-point-plots \
    --grid network.rtt_s=10e-6,50e-6,100e-6,200e-6,500e-6 --grid network.sources=2,5,10,20
robustness-map: venv  ## seed 004's robustness claim as a map: QCN and ECM over RTT x sources (qcn sweep)
	$(VENV)/bin/qcn sweep robustness --out $(ROBUSTNESS_MAP)/qcn $(ROBUSTNESS_GRID)
	$(VENV)/bin/qcn sweep robustness --out $(ROBUSTNESS_MAP)/ecm $(ROBUSTNESS_GRID) \
	    --set qcn_preset='"ecm"' --set qcn.cp.sampling='"bernoulli"'
	@mkdir -p docs/img
	for scheme in qcn ecm; do \
	    cp $(ROBUSTNESS_MAP)/$$scheme/recovery_ms.png docs/img/robustness-map-$$scheme-recovery.png && \
	    cp $(ROBUSTNESS_MAP)/$$scheme/queue_std_episode_pkts.png docs/img/robustness-map-$$scheme-queue-std.png; \
	done

clean:  ## remove build outputs and the virtual environment
	rm -rf $(BUILD) $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis simulator/_core*.so
