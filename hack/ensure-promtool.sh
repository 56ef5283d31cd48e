#!/usr/bin/env bash
# promtool and prometheus for the monitoring overlay's checks: `make test` runs `promtool check
# rules` and `promtool test rules` (tests/webhook/test_monitoring.py); `make e2e` has a real
# Prometheus scrape tasgate and answer the dashboard's queries (e2e/prometheus.py starts its own
# process, on a free port, with its own config and data directory). Both come with Debian's
# `prometheus` package (Debian has no package with promtool alone); when either is missing this
# installs it (as root, or through passwordless sudo) and fails loudly when it cannot: a check
# that cannot run is a failure, never a skip. Set PROMTOOL / PROMETHEUS to use binaries from
# elsewhere.
#
# Only the binaries: the package's postinst enables prometheus.service and starts it, which on a
# systemd host leaves a Prometheus running on :9090 after `make test`. While apt installs it, a
# policy-rc.d (the hook invoke-rc.d and deb-systemd-invoke ask before starting anything) that
# denies every start is in place, unless the host has its own; afterwards the service is
# disabled, and stopped should the host's own policy have let it start.
set -euo pipefail

fail() { echo "ensure-promtool.sh: $*" >&2; exit 1; }
found() { command -v "${PROMTOOL:-promtool}" >/dev/null 2>&1 && command -v "${PROMETHEUS:-prometheus}" >/dev/null 2>&1; }
# The host's files this reads or writes, under TASGATE_HOST_ROOT (empty: /; a test sets it).
HOST_ROOT=${TASGATE_HOST_ROOT:-}
POLICY_RC_D=$HOST_ROOT/usr/sbin/policy-rc.d
SYSTEMD_RUN=$HOST_ROOT/run/systemd/system
INIT_SCRIPT=$HOST_ROOT/etc/init.d/prometheus

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

deny_starts() {
  [ -e "$POLICY_RC_D" ] && return 0  # the host's own policy: left as it is
  printf '#!/bin/sh\n# hack/ensure-promtool.sh: no service starts while it installs prometheus.\nexit 101\n' \
    | "${as_root[@]}" tee "$POLICY_RC_D" >/dev/null
  "${as_root[@]}" chmod 755 "$POLICY_RC_D"
  trap '"${as_root[@]}" rm -f "$POLICY_RC_D"' EXIT
}

quiet_service() {
  if [ -d "$SYSTEMD_RUN" ] && command -v systemctl >/dev/null 2>&1; then
    "${as_root[@]}" systemctl disable --now prometheus.service >&2 || true
    return 0
  fi
  if command -v systemctl >/dev/null 2>&1; then  # no systemd running: not at its next boot either
    "${as_root[@]}" systemctl --root="${HOST_ROOT:-/}" disable prometheus.service >&2 || true
  fi
  if [ -x "$INIT_SCRIPT" ] && command -v update-rc.d >/dev/null 2>&1; then
    "${as_root[@]}" update-rc.d prometheus disable >&2 || true
    "${as_root[@]}" "$INIT_SCRIPT" stop >&2 || true
  fi
}

echo "ensure-promtool.sh: installing Debian's prometheus package for promtool and prometheus (its service is not started)" >&2
export DEBIAN_FRONTEND=noninteractive
install() { "${as_root[@]}" apt-get install -y --no-install-recommends prometheus >&2; }
deny_starts
install || { "${as_root[@]}" apt-get update >&2 && install; } \
  || fail "apt-get could not install the prometheus package (see above)"
quiet_service
found || fail "the prometheus package is installed but promtool or prometheus is not on PATH"
