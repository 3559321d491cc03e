# Every target creates .venv itself: a fresh machine needs only Python 3.11+, git and make.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: demo test lint bench clean control-plane control-plane-if-go

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is required (set PYTHON=python3.11)")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $@

demo: $(STAMP)
	$(BIN)/asg-reconciler demo

lint: $(STAMP)
	$(BIN)/ruff check reconciler tests benchmarks
	$(BIN)/ruff format --check reconciler tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports

# The real tier (tests/realcluster/) runs against etcd, kube-apiserver, kube-controller-manager and
# kube-scheduler built from source (tests/controlplane/, cached in ~/.cache/asg-reconciler/control-plane/
# per version): `make test` builds them when they are not cached; without Go it says so in one line
# and the real tier skips.
test: lint control-plane-if-go
	$(BIN)/python -m pytest -n 2 --dist loadgroup -p no:cacheprovider

control-plane: $(STAMP)
	$(BIN)/python -m tests.controlplane build

control-plane-if-go: $(STAMP)
	$(BIN)/python -m tests.controlplane build --if-go

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .ruff_cache
