# colltune — the two entry points are `make demo` and `make test`.
# Everything below installs idempotently (see scripts/setup.sh).
SHELL := /bin/bash
VENV  ?= .venv
PY    := $(VENV)/bin/python
COLLTUNE := $(VENV)/bin/colltune
# pytest-xdist workers for make test (0: one process). --dist loadfile: a module's tests
# share module fixtures with fixed names (an emulated cluster, the Slurm daemons), so
# each module runs on one worker (loadgroup's marks are lost under pytest 9.2)
TEST_JOBS ?= 2

.PHONY: setup demo test clean

setup:
	bash scripts/setup.sh

demo: setup
	$(COLLTUNE) demo

test: setup
	$(PY) -m pytest -n $(TEST_JOBS) --dist loadfile -q -ra --durations=25

clean:
	rm -rf build .colltune-cache results
