# leoguard: the one command interface. `make demo` and `make test` install everything they need.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV    ?= .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.leoguard-deps
export VIRTUAL_ENV := $(abspath $(VENV))
export PATH := $(abspath $(VENV))/bin:$(PATH)
# One BLAS thread: numbers come from the Rust core; spinning BLAS threads only steal a core.
export OPENBLAS_NUM_THREADS ?= 1

.PHONY: help setup build demo test test-rust test-python lint fmt bench fuzz clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

# Python environment with every runtime and development dependency (re-run when pyproject changes).
$(STAMP): pyproject.toml tools/install_deps.py
	@command -v cargo >/dev/null || { echo "cargo not found: install Rust (rustup) first" >&2; exit 1; }
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "maturin>=1.7,<2"
	$(PY) tools/install_deps.py
	touch $@

# Debian packages of every program leoguard and its tests start: python/leoguard/sysdeps.py lists each
# program with its package (test_sysdeps.py fails when the code starts one that is not listed), and
# tools/install_sysdeps.py installs what this machine lacks.
SYSDEPS := $(VENV)/.leoguard-sysdeps
$(SYSDEPS): python/leoguard/sysdeps.py tools/install_sysdeps.py | $(STAMP)
	$(PY) tools/install_sysdeps.py
	touch $@

setup: $(STAMP) $(SYSDEPS) ## Install Python dependencies into .venv and Debian packages (Rust crates come with the build)

# PGO=0 builds the extension without profile-guided optimisation (tools/pgo_build.py).
PGO ?= 1
build: setup ## Build the Rust core (profile dist: fat LTO, profile-guided) and install leoguard into .venv
	$(PY) tools/pgo_build.py $(if $(filter 0,$(PGO)),--no-pgo)
	cargo build --profile dist -p leoguard-tunnel -p leoguard-transport
	install -m 755 target/dist/leoguard-tunnel target/dist/leoguard-relay target/dist/leoguard-transport $(VENV)/bin/
	@# Byte-compile the package: the install is editable, and where PYTHONDONTWRITEBYTECODE is set (this
	@# VM) every process would otherwise compile its modules anew, ~30 ms of `leoguard run` (docs/performance.md).
	$(PY) -m compileall -q python/leoguard

demo: build ## Install, build, and run the main demo (New York - London over Starlink shell 1)
	$(VENV)/bin/leoguard demo --out out/demo

test: build test-rust test-python ## Install, build, and run every test

test-rust:
	cargo test --release --workspace --exclude leoguard-py

test-python:
	$(PY) -m pytest -q python/tests

lint: setup ## cargo fmt --check, clippy -D warnings, ruff
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	$(VENV)/bin/ruff check python tools
	$(VENV)/bin/ruff format --check python tools

fmt: setup ## Format Rust and Python code
	cargo fmt --all
	$(VENV)/bin/ruff format python tools

bench: build ## Benchmarks: print figures, assert nothing
	cargo bench -p leoguard-orbit --bench routing
	cargo bench -p leoguard-sim --bench chain
	cargo bench -p leoguard-proto --bench satguard
	cargo bench -p leoguard-proto --bench liquid
	cargo bench -p leoguard-proto --bench leotp
	$(VENV)/bin/leoguard bench fec --json
	$(VENV)/bin/leoguard bench constellation --json
	$(VENV)/bin/leoguard bench sim --json
	$(VENV)/bin/leoguard bench startup --json
	$(VENV)/bin/leoguard bench emu --json
	$(PY) tools/bench_tunnel.py
	$(PY) tools/bench_transport.py

# libFuzzer on every parser (fuzz/run.sh, docs/fuzzing.md): each target FUZZ_SECONDS, one after another
# on one core, niced; corpora in fuzz/corpus/<target> so runs resume. Stable Rust: RUSTC_BOOTSTRAP=1 lets
# rustc take cargo-fuzz's -Z flags, and AddressSanitizer works that way (stable ships its runtime).
FUZZ_SECONDS ?= 60
fuzz: ## Fuzz every parser FUZZ_SECONDS (default 60) each; print inputs run, fail on any crash
	FUZZ_SECONDS=$(FUZZ_SECONDS) bash fuzz/run.sh

clean: ## Remove build outputs (keeps .venv)
	cargo clean
	rm -rf out
