#!/usr/bin/env bash
# The topology-picture test renders HTML in headless Chromium (Debian's `chromium` package).
# `make test` runs this first: a no-op when Chromium is there, else it installs it with apt-get
# (as root, or through sudo), and fails loudly when it cannot — the test then fails, never skips.
set -euo pipefail
browser="${TASGATE_CHROMIUM:-chromium}"
if command -v "$browser" >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  echo "ensure-chromium: '$browser' is missing and this user cannot apt-get install it (not root, no" \
    "passwordless sudo): install Debian's chromium package, or set TASGATE_CHROMIUM to a Chromium binary" >&2
  exit 1
fi
command -v apt-get >/dev/null 2>&1 || { echo "ensure-chromium: no apt-get to install chromium with" >&2; exit 1; }
echo "ensure-chromium: installing Debian's chromium (for tests/webhook/test_topology_picture.py)" >&2
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get install -y --no-install-recommends chromium >/dev/null \
  || { "${as_root[@]}" apt-get update >/dev/null && "${as_root[@]}" apt-get install -y --no-install-recommends chromium >/dev/null; } \
  || { echo "ensure-chromium: apt-get install chromium failed" >&2; exit 1; }
command -v chromium >/dev/null 2>&1 || { echo "ensure-chromium: chromium still not on PATH" >&2; exit 1; }
