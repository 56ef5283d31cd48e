#!/usr/bin/env bash
# promtool for the monitoring overlay's tests (tests/webhook/test_monitoring.py): the rules must
# pass `promtool check rules` and `promtool test rules`. promtool comes with Debian's `prometheus`
# package; when it is missing this installs it (as root, or through sudo) and fails loudly when
# it cannot: a test that cannot run is a failure, never a skip. `make test` runs it first.
# Set PROMTOOL to use a promtool from elsewhere.
set -euo pipefail

found() { command -v "${PROMTOOL:-promtool}" >/dev/null 2>&1; }
fail() { echo "ensure-promtool.sh: $*" >&2; exit 1; }

found && exit 0
[ -z "${PROMTOOL:-}" ] || fail "PROMTOOL=$PROMTOOL is not an executable"
command -v apt-get >/dev/null 2>&1 \
  || fail "promtool is missing and apt-get is not available: install Prometheus' promtool (or set PROMTOOL)"
if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  fail "promtool is missing; installing Debian's prometheus package needs root or passwordless sudo"
fi
echo "ensure-promtool.sh: installing Debian's prometheus package (for promtool)" >&2
export DEBIAN_FRONTEND=noninteractive
install() { "${as_root[@]}" apt-get install -y --no-install-recommends prometheus >&2; }
install || { "${as_root[@]}" apt-get update >&2 && install; } \
  || fail "apt-get could not install the prometheus package (see above)"
found || fail "the prometheus package is installed but promtool is not on PATH"
