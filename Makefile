# Every target sets itself up: a fresh clone needs only python3 (3.11+), a C compiler and make.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: all install test lint bench bench-live check run e2e binaries clean

all: test

$(STAMP): pyproject.toml setup.py $(wildcard scorer/*.pyx scorer/*.pxd)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	$(PY) -c "import scorer; assert scorer.IMPLEMENTATION == 'compiled', scorer.IMPLEMENTATION"
	touch $(STAMP)

install: $(STAMP)

# The topology-picture test renders in headless Chromium: installed from Debian when missing (fails loudly if it cannot).
test: $(STAMP) chromium
	$(PY) -m pytest -q

.PHONY: chromium
chromium:
	bash tests/tools/ensure-chromium.sh

lint: $(STAMP)
	$(VENV)/bin/ruff check scorer webhook tests bench e2e
	$(VENV)/bin/ruff format --check scorer webhook tests bench e2e
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache

bench: $(STAMP)
	$(PY) bench/bench_scorer.py --out bench/latest.json

# Live state at cluster scale: the real Mirror and decision path under replayed pod churn.
bench-live: $(STAMP)
	$(PY) bench/bench_live.py --out bench/live.json

# The end-to-end suite: real kube-apiserver + etcd + kubectl, built once from pinned Go modules into
# ~/.cache/tasgate (outside the repo), then tasgate in live mode against them.
binaries:
	bash e2e/build-binaries.sh

e2e: $(STAMP) binaries chromium
	$(PY) -m pytest -q -p no:cacheprovider tests/e2e

# Opt-in, not in CI: kube-controller-manager, kwok and the scheduler-plugins (Coscheduling) scheduler
# around the same control plane; groundwork for following gangs after admission. See e2e/README.md.
.PHONY: e2e-cluster
e2e-cluster: $(STAMP) binaries
	bash e2e/build-binaries.sh cluster
	$(PY) -m pytest -q -p no:cacheprovider tests/e2e_cluster

# The container image without a Docker engine (as root: Debian's mmdebstrap and umoci): built into
# ~/.cache/tasgate/image/oci (outside the repo), then started chrooted and probed. See image/build.sh.
.PHONY: image
image: $(STAMP)
	bash image/build.sh && bash image/test.sh

# One example is refused on purpose: exit status 1 (a denial) is the expected outcome here.
check: $(STAMP)
	$(VENV)/bin/tasgate check -f examples/ || [ $$? -eq 1 ]

# Serves the embedded sample cluster on https://127.0.0.1:8443 with development certificates.
run: $(STAMP)
	$(VENV)/bin/tasgate serve --dev-cert-dir .dev-certs

clean:
	rm -rf $(VENV) .dev-certs build *.egg-info scorer/*.so scorer/*.c .pytest_cache .mypy_cache .ruff_cache
