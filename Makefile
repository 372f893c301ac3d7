# colltune — the two entry points are `make demo` and `make test`.
# Everything below installs idempotently (see scripts/setup.sh).
SHELL := /bin/bash
VENV  ?= .venv
PY    := $(VENV)/bin/python
COLLTUNE := $(VENV)/bin/colltune

.PHONY: setup demo test clean

setup:
	bash scripts/setup.sh

demo: setup
	$(COLLTUNE) demo

test: setup
	$(PY) -m pytest -q -ra --durations=25

clean:
	rm -rf build .colltune-cache results
