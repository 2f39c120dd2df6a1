# Two commands on a fresh clone: `make run` and `make test`. Both set up .venv when missing.
VENV   ?= .venv
PY     := $(VENV)/bin/python
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1
export ANONYMIZED_TELEMETRY ?= False

.PHONY: run test test-needs services test-unit lint bench eval format clean-venv docker-check

$(VENV)/.runtime: requirements.lock scripts/install.sh
	scripts/install.sh $(VENV)
	touch $@

$(VENV)/.dev: requirements.lock requirements-dev.lock scripts/install.sh
	scripts/install.sh $(VENV) dev
	touch $(VENV)/.runtime $@

# The `rag` command line (client/): its dependencies are in the locks, so it installs offline
# on top of them, and again whenever its sources change.
$(VENV)/bin/rag: client/pyproject.toml $(wildcard client/rag_client/*.py) | $(VENV)/.runtime
	$(PY) -m pip install --quiet --no-deps --no-index --no-build-isolation ./client
	touch $@

run: $(VENV)/.runtime $(VENV)/bin/rag
	RAG_ENV=$${RAG_ENV:-development} $(PY) -m app.serve

# First one list of what the tests need and this machine lacks (services, tools, data), each
# with the command that provides it; it fails `make test` when anything is missing.
test: test-needs $(VENV)/bin/rag
	$(PY) -m pytest

test-needs: $(VENV)/.dev
	$(PY) scripts/check_test_needs.py

# PostgreSQL and Redis for the tests, in Docker (docker/test-services/compose.yml).
services:
	scripts/docker/services.sh

test-unit: $(VENV)/.dev $(VENV)/bin/rag
	$(PY) -m pytest -m unit

lint: $(VENV)/.dev
	$(PY) -m ruff check app eval scripts tests bench testkit client
	$(PY) -m ruff format --check app eval scripts tests bench testkit client
	$(PY) -m mypy
	$(PY) scripts/check_docs.py

format: $(VENV)/.dev
	$(PY) -m ruff format app eval scripts tests bench testkit client
	$(PY) -m ruff check --fix app eval scripts tests bench testkit client

bench: $(VENV)/.dev
	$(PY) -m bench

eval: $(VENV)/.dev
	$(PY) -m eval

clean-venv:
	rm -rf $(VENV)

# Opt-in, as root, ~20 min cold: build the image and run the compose stack end to end
# (scripts/docker/check.sh). Not part of `make test` or CI.
docker-check: $(VENV)/.dev
	scripts/docker/check.sh
