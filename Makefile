# Set-up and the two commands the README promises. Both work alone on a fresh machine:
#   make demo   creates .venv, installs perfscout, runs the main job on the embedded default
#   make test   creates .venv, installs with test extras + system test deps, runs every test
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q
# llama-cpp-python is built from source for the offline LLM test; a native build
# crashes in AMX code on these CPUs, so the SIMD set is pinned explicitly.
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
PYTEST_ARGS ?=

.PHONY: demo test install install-test system-deps bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip

$(VENV)/.core-installed: pyproject.toml | $(PY)
	$(PIP) install -e .
	touch $@

$(VENV)/.test-installed: pyproject.toml $(VENV)/.core-installed
	$(PIP) install -e '.[test]'
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PIP) install -e '.[llm-local]'
	touch $@

install: $(VENV)/.core-installed
install-test: $(VENV)/.test-installed

# Debian packages the integration tests drive for real (Chromium, PostgreSQL).
system-deps:
	bash .ci/system-deps.sh

demo: $(VENV)/.core-installed
	$(VENV)/bin/perfscout demo

test: $(VENV)/.test-installed system-deps
	$(PY) -m pytest $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis build *.egg-info
