#!/usr/bin/env bash
# promtool and prometheus for the monitoring overlay's checks: `make test` runs `promtool check
# rules` and `promtool test rules` (tests/webhook/test_monitoring.py); `make e2e` has a real
# Prometheus scrape tasgate and answer the dashboard's queries (e2e/prometheus.py). Both come
# with Debian's `prometheus` package; when either is missing this installs it (as root, or
# through passwordless sudo) and fails loudly when it cannot: a check that cannot run is a
# failure, never a skip. Set PROMTOOL / PROMETHEUS to use binaries from elsewhere.
set -euo pipefail

fail() { echo "ensure-promtool.sh: $*" >&2; exit 1; }
found() { command -v "${PROMTOOL:-promtool}" >/dev/null 2>&1 && command -v "${PROMETHEUS:-prometheus}" >/dev/null 2>&1; }

found && exit 0
for var in PROMTOOL PROMETHEUS; do
  if [ -n "${!var:-}" ] && ! command -v "${!var}" >/dev/null 2>&1; then
    fail "$var=${!var} is not an executable"
  fi
done
command -v apt-get >/dev/null 2>&1 \
  || fail "promtool or prometheus is missing and apt-get is not available: install Prometheus (or set PROMTOOL and PROMETHEUS)"
if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  fail "promtool or prometheus is missing; installing Debian's prometheus package needs root or passwordless sudo"
fi
echo "ensure-promtool.sh: installing Debian's prometheus package (promtool, prometheus)" >&2
export DEBIAN_FRONTEND=noninteractive
install() { "${as_root[@]}" apt-get install -y --no-install-recommends prometheus >&2; }
install || { "${as_root[@]}" apt-get update >&2 && install; } \
  || fail "apt-get could not install the prometheus package (see above)"
found || fail "the prometheus package is installed but promtool or prometheus is not on PATH"
