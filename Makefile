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

# promtool and prometheus (Debian's prometheus package) check the monitoring overlay, and the
# topology-picture test renders in headless Chromium: each installed from Debian when missing,
# a loud failure when it cannot be (hack/ensure-promtool.sh, the chromium target).
test: $(STAMP) chromium
	bash hack/ensure-promtool.sh
	$(PY) -m pytest -q

.PHONY: chromium
chromium:
	bash tests/tools/ensure-chromium.sh

lint: $(STAMP)
	$(VENV)/bin/ruff check scorer webhook tests bench e2e
	$(VENV)/bin/ruff format --check scorer webhook tests bench e2e
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache

# The scorer's own figures, then tasgate beside Kueue's Go code (bench/kueue_peer, built once into
# ~/.cache/tasgate) on identical inputs: placement and snapshot-build ratios, never a timed assertion;
# then every other benchmark, and bench/summary.json with the README's performance table from it.
bench: $(STAMP)
	$(PY) bench/bench_scorer.py --out bench/latest.json
	bash bench/kueue_peer/build.sh
	$(PY) bench/bench_peer.py --with-50k --out bench/peer.json
	$(MAKE) bench-live bench-threads bench-review bench-track
	$(PY) bench/summary.py --write-readme

# Live state at cluster scale: the real Mirror and decision path under replayed pod churn.
bench-live: $(STAMP)
	$(PY) bench/bench_live.py --out bench/live.json

# Do decisions run in parallel (nogil engine)? Decisions/s with 1 and 2 threads, side by side.
.PHONY: bench-threads
bench-threads: $(STAMP)
	$(PY) bench/bench_threads.py --out bench/threads.json

# What a review costs beyond its placement: in-process profile by layer, then the real app and a no-op
# aiohttp responder on the same TLS stack, each in its own process, at concurrency 1/8/32.
.PHONY: bench-review
bench-review: $(STAMP)
	$(PY) bench/bench_review.py --out bench/review.json

# Lifecycle tracking at scale: the real Ledger over cloned captured gangs (pod event, round, assess).
.PHONY: bench-track
bench-track: $(STAMP)
	$(PY) bench/bench_track.py --out bench/track.json

# The end-to-end suite: real kube-apiserver + etcd + kubectl, built once from pinned Go modules into
# ~/.cache/tasgate (outside the repo), then tasgate in live mode against them.
binaries:
	bash e2e/build-binaries.sh

e2e: $(STAMP) binaries chromium
	bash hack/ensure-promtool.sh
	bash bench/kueue_peer/build.sh
	$(PY) -m pytest -q -p no:cacheprovider tests/e2e

# kube-controller-manager, kwok and the scheduler-plugins (Coscheduling) scheduler around the same
# control plane, with the real Kueue: gangs followed after admission (tests/e2e_cluster). CI runs it.
.PHONY: e2e-cluster
e2e-cluster: $(STAMP) binaries
	bash e2e/build-binaries.sh cluster
	$(PY) -m pytest -q -p no:cacheprovider tests/e2e_cluster

# kube-controller-manager, kwok and the upstream kube-scheduler v1.36.5 with native gang + topology
# scheduling (Workload/PodGroup, four feature gates): tasgate's verdicts and placements against what
# the real scheduler does, one table row per workload (tests/e2e_native). See docs/e2e.md.
.PHONY: e2e-native
e2e-native: $(STAMP) binaries
	bash e2e/build-binaries.sh native
	$(PY) -m pytest -q -s -p no:cacheprovider tests/e2e_native

# Kubernetes v1.37.0's native gang APIs (v1beta1 Workload/PodGroup, v1alpha3 CompositePodGroup) on
# its own control plane and scheduler (docs/native-v137.md): the v1.37 proof table
# (test_native_table_v137.py, rows in e2e/native_rows_v137.py), its logic, the smoke test. In CI;
# the v1.37 binaries are a cold build of about 22 minutes on 2 cores (.ci/run starts it early).
.PHONY: e2e-native-v137
e2e-native-v137: $(STAMP) binaries
	bash e2e/build-binaries.sh native native137
	$(PY) -m pytest -q -s -p no:cacheprovider tests/e2e_native137

# Opt-in, not in CI: 5,000 Nodes and 50,000 bound Pods on the real API server, tasgate in live mode;
# prints time to ready, RSS, review latency (at rest, under churn) and rack-loss-to-verdict time.
# TASGATE_SCALE_NODES / _PODS shrink it. See e2e/README.md.
.PHONY: e2e-scale
e2e-scale: $(STAMP) binaries
	$(PY) -m pytest -q -s -p no:cacheprovider tests/e2e_scale

# The container image without a Docker engine (as root: Debian's mmdebstrap and umoci): built into
# ~/.cache/tasgate/image/oci (outside the repo), then started chrooted and probed. See image/build.sh.
.PHONY: image
# A local cluster in one command (e2e/demo.py): the e2e control plane, 8 kwok GPU nodes (2 blocks x 2
# racks x 2 hosts), Kueue v0.19.2 with TAS, Coscheduling and tasgate behind its webhooks; four Jobs
# applied with kubectl, then tasgate status; up until Ctrl-C. The first run builds the e2e binaries
# (e2e/build-binaries.sh, once). `$(PY) -m e2e.demo --no-wait` stops after the status instead.
.PHONY: demo
demo: $(STAMP)
	$(PY) -m e2e.demo

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
