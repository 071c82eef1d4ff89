# alphac — the README's two commands are `make demo` and `make test`.
# Everything runs in a virtual environment, .venv/ (PEP 668: a Debian-managed interpreter
# is never installed into); `make setup` makes it from the system's python3.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# libssl-dev named with this machine's architecture: with the arm64 one beside it, a bare
# name is ambiguous to dpkg -s
NATIVE_ARCH := $(shell dpkg --print-architecture 2>/dev/null || echo amd64)
APT_PACKAGES := qemu-user gcc-aarch64-linux-gnu libc6-dev-arm64-cross openmpi-bin libopenmpi-dev slurm-wlm \
                python3-venv libssl-dev:$(NATIVE_ARCH)
# OpenSSL's libcrypto for the static AArch64 executables, from Debian's arm64 architecture
ARM64_PACKAGES := libssl-dev:arm64
# The peers the benchmarks measure beside alphac, in their own virtual environment (alphac
# itself stays in $(VENV)): torch's gloo, and Open MPI through mpi4py.
BENCH_VENV := bench/.venv
BENCH_APT_PACKAGES := openmpi-bin libopenmpi-dev
# torch: the CPU wheel where pip finds one (a local wheel directory), else from its CPU wheel
# index: PyPI's Linux wheel pulls in the CUDA libraries as well.
BENCH_TORCH := torch==2.13.0
BENCH_TORCH_INDEX := https://download.pytorch.org/whl/cpu
BENCH_PIP_PACKAGES := mpi4py numpy
DEMO_SPEC := specs/demo.alpha

.PHONY: setup bench-peers demo test test-exhaustive test-gpu test-sanitize bench conform size clean

# Installs those of the Debian packages $(1) that are missing (through sudo unless root).
define apt_install
missing=""; for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
if [ -n "$$missing" ]; then \
  echo "$@: installing$$missing"; \
  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing; \
fi
endef

# Idempotent: installs only what is missing (the Debian packages, the environment, the
# project in it, editable, pointing at this tree).
setup:
	@$(call apt_install,$(APT_PACKAGES))
	@dpkg --print-foreign-architectures | grep -qx arm64 || dpkg -s $(ARM64_PACKAGES) >/dev/null 2>&1 \
	  || (echo "setup: adding Debian's arm64 architecture"; SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	      $$SUDO dpkg --add-architecture arm64)
	@$(call apt_install,$(ARM64_PACKAGES))
	@[ -x $(PY) ] || (echo "setup: creating $(VENV)" && $(PYTHON) -m venv $(VENV))
	@# the editable install must point at this tree (a clone elsewhere must not run another copy)
	@cd / && $(abspath $(PY)) -c "import lark, click, llvmlite, elftools, numba, mpmath, gmpy2, cryptography, pytest, hypothesis, numpy, wheel, jsonschema, xdist" 2>/dev/null \
	  && $(abspath $(PY)) -m pip show nvidia-cuda-nvdisasm >/dev/null 2>&1 \
	  && $(abspath $(PY)) -m pip show alphac 2>/dev/null | grep -qx "Editable project location: $(CURDIR)" \
	  || (cd $(CURDIR) && $(PY) -m pip install -q -e '.[test]')

demo: setup
	$(PY) -m alphac.demo $(DEMO_SPEC)

# `make test` runs the suite in TEST_JOBS processes (pytest-xdist): most tests wait on owner
# processes, sockets and compilers, so two share a core well. This machine's cores, at
# least 2 and at most 4 unless given (TEST_JOBS=1: one worker process).
TEST_JOBS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); [ $$n -lt 2 ] && n=2; [ $$n -gt 4 ] && n=4; echo $$n)
test: setup
	$(PY) -m pytest -q -p no:cacheprovider -n $(TEST_JOBS)

# The sweeps marked `exhaustive` (every spec x partitioning x tree, every spec at every CPU
# level, every explicit tree over 3 and 4 owners); `make test` runs a representative subset of
# each. About 13.5 minutes on 2 cores in one process (measured before the sweeps ran in
# TEST_JOBS processes; not measured since).
test-exhaustive: setup
	$(PY) -m pytest -q -p no:cacheprovider -n $(TEST_JOBS) -m exhaustive

# Tests marked `gpu` need an NVIDIA GPU and libcuda.so.1 (scripts/gpu-gates; skipped without).
test-gpu: setup
	@PY=$(PY) scripts/gpu-gates

# The fuzz tests (marked `fuzz`: tests/runtime/test_rt_fuzz.py, every C parser of untrusted
# bytes on seeded mutated inputs; `make test` runs them too) against the runtime built with
# AddressSanitizer and UBSan, SANITIZE_SCALE times as many cases: a report fails its case.
# The sanitizers' runtimes are preloaded into Python (the library is loaded with ctypes),
# Python allocates with malloc so its buffers have ASan's red zones, and leaks are not
# reported (Python keeps its own by design). About 3 minutes on 2 cores. A machine whose
# kernel the sanitizers cannot run on (a probe program fails) is said so, and skipped.
SANITIZE_SCALE ?= 10
test-sanitize: setup
	@probe=$$(mktemp -d); printf 'int main(void) { return 0; }\n' > $$probe/p.c; \
	  if ! (cc -fsanitize=address,undefined -o $$probe/p $$probe/p.c && $$probe/p) >$$probe/log 2>&1; then \
	    echo "test-sanitize: skipped: AddressSanitizer cannot run on this machine ($$(head -c 200 $$probe/log | tr '\n' ' '))"; \
	    rm -rf $$probe; exit 0; fi; rm -rf $$probe; \
	  ASAN=$$(cc -print-file-name=libasan.so); UBSAN=$$(cc -print-file-name=libubsan.so); \
	  LD_PRELOAD="$$ASAN $$UBSAN" PYTHONMALLOC=malloc ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1 \
	  ALPHAC_SANITIZE=1 ALPHAC_FUZZ_SCALE=$(SANITIZE_SCALE) $(PY) -m pytest -q -p no:cacheprovider -m fuzz \
	  tests/runtime/test_rt_fuzz.py

# Idempotent too: the Debian packages, then the virtual environment unless it imports all.
bench-peers:
	@$(call apt_install,$(BENCH_APT_PACKAGES))
	@$(BENCH_VENV)/bin/python -c "import torch, mpi4py.MPI, numpy; assert torch.__version__.startswith('2.13.0')" 2>/dev/null \
	  || ($(PYTHON) -m venv $(BENCH_VENV) \
	      && ($(BENCH_VENV)/bin/pip install -q $(BENCH_TORCH) $(BENCH_PIP_PACKAGES) \
	          || $(BENCH_VENV)/bin/pip install -q --index-url $(BENCH_TORCH_INDEX) $(BENCH_TORCH)) \
	      && $(BENCH_VENV)/bin/pip install -q $(BENCH_PIP_PACKAGES))

# The benchmarks run from $(PY); they start the peers from $(BENCH_VENV) themselves.
bench: setup bench-peers
	$(PY) bench/make_big_data.py
	@for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

# The elementary functions' kernels (JIT-compiled for this host at the baseline level)
# against the real functions (mpmath), 10 000 000
# arguments per function on every core; the evidence is stored in the cache
# (~/.cache/alphac/evidence/) and docs/elementary.md's table rewritten from it. About 6
# minutes on 2 idle cores.
CONFORM_COUNT ?= 10000000
conform: setup
	@mkdir -p out
	$(PY) -m alphac conform --count $(CONFORM_COUNT) --json > out/conform.json
	$(PY) scripts/conform_doc.py out/conform.json docs/elementary.md

# The code's size against its budgets (scripts/size.py): lines per concern (the C runtime,
# the code generator) and files over 500 lines; fails when one is above its ceiling, which
# may only come down. Standard library only: runs before setup. CI runs it first.
size:
	python3 scripts/size.py

# The environment stays (make setup would only make it again); `rm -rf .venv` removes it.
clean:
	rm -rf out build .pytest_cache .hypothesis
