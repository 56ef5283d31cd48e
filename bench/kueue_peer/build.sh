#!/usr/bin/env bash
# Build tasgate's Kueue peer: Kueue's own TAS cache, snapshot and FindTopologyAssignmentsForFlavor,
# driven from JSON (bench/kueue_peer.py writes the input; bench/bench_peer.py and
# tests/e2e/test_kueue_peer.py run it).
#
# Usage: bench/kueue_peer/build.sh      (prints the binary's path on its last line)
#
# The functions the peer needs are unexported, so it cannot import them from the read-only module
# cache. Instead this script
#   1. copies sigs.k8s.io/kueue@<version> (the version required in bench/kueue_peer/go.mod) from the
#      module cache to ${TASGATE_CACHE:-$HOME/.cache/tasgate}/src/kueue-<version>-peer/, writable;
#   2. drops ONE added file, _overlay/pkg/cache/scheduler/zz_tasgate_peer.go, into its
#      pkg/cache/scheduler/ (no Kueue file is edited; the copy is checked against the module's
#      own hash first);
#   3. builds bench/kueue_peer (package main) with a temporary -modfile: go.mod plus
#      `replace sigs.k8s.io/kueue => <that copy>`, and go.sum beside it;
#   4. links to a temporary name, runs it once on an empty input, and renames it into
#      ${TASGATE_CACHE:-$HOME/.cache/tasgate}/bin/kueue-peer-<version>/kueue-peer.
# Idempotent: the stamp file names the SHA-256 of every input (go.mod, go.sum, main.go, the added
# file, this script) and the Go version; a matching stamp means nothing is rebuilt. Same
# conventions as e2e/build-binaries.sh (lock per output dir, fails loudly with the step).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
step="start"
trap 'rc=$?; if (( rc != 0 )); then echo "kueue_peer/build.sh: FAILED (exit $rc) during: $step" >&2; fi' EXIT
die() { echo "kueue_peer/build.sh: error: $*" >&2; exit 1; }

step="locating the Go toolchain"
go=${GO:-$(command -v go || true)}
[[ -n $go ]] || go=/usr/local/go/bin/go
[[ -x $go ]] || die "no Go toolchain: 'go' is not on PATH and /usr/local/go/bin/go does not exist (or set GO=)"
go_version=$("$go" env GOVERSION) || die "'$go env GOVERSION' failed"
export GOTOOLCHAIN=local
export GOFLAGS="${GOFLAGS:-} -mod=readonly"

kueue_version=$(sed -n -E 's#^[[:space:]]*(require[[:space:]]+)?sigs\.k8s\.io/kueue[[:space:]]+(v[^[:space:]]+).*#\2#p' "$here/go.mod" | head -n1)
[[ -n $kueue_version ]] || die "sigs.k8s.io/kueue is not required in $here/go.mod"
overlay="$here/_overlay/pkg/cache/scheduler/zz_tasgate_peer.go"
[[ -f $overlay ]] || die "missing $overlay"

cache_root=${TASGATE_CACHE:-$HOME/.cache/tasgate}
out="$cache_root/bin/kueue-peer-$kueue_version"
src="$cache_root/src/kueue-$kueue_version-peer"
bin="$out/kueue-peer"
stamp_text="kueue=$kueue_version go=$go_version inputs=$(cat "$here/go.mod" "$here/go.sum" "$here/main.go" "$overlay" "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1)"

mkdir -p "$out"
exec 9>"$out/.lock"
flock -n 9 || { echo "another build holds $out/.lock; waiting for it" >&2; flock 9; }
if [[ -x $bin && -f $bin.stamp && $(<"$bin.stamp") == "$stamp_text" ]]; then
  echo "== kueue-peer: cached ($stamp_text)" >&2
  echo "$bin"
  exit 0
fi
t0=$(date +%s)

step="locating sigs.k8s.io/kueue@$kueue_version in the module cache"
info=$(cd "$here" && "$go" mod download -json "sigs.k8s.io/kueue@$kueue_version") \
  || die "'go mod download -json sigs.k8s.io/kueue@$kueue_version' failed (is the module proxy reachable?)"
mod_dir=$(sed -n -E 's/^[[:space:]]*"Dir": "(.*)",?$/\1/p' <<<"$info")
mod_sum=$(sed -n -E 's/^[[:space:]]*"Sum": "(.*)",?$/\1/p' <<<"$info")
[[ -d $mod_dir && -n $mod_sum ]] || die "no module directory or sum for sigs.k8s.io/kueue@$kueue_version"
grep -qF "sigs.k8s.io/kueue $kueue_version $mod_sum" "$here/go.sum" \
  || die "the module cache's sigs.k8s.io/kueue@$kueue_version ($mod_sum) is not the one go.sum pins"

step="copying the module source to $src"
if [[ ! -f $src/.copied || $(<"$src/.copied") != "$mod_sum" ]]; then
  rm -rf "$src.tmp"
  mkdir -p "$(dirname "$src")"
  cp -R "$mod_dir" "$src.tmp"
  chmod -R u+w "$src.tmp"
  printf '%s\n' "$mod_sum" > "$src.tmp/.copied"
  rm -rf "$src"
  mv "$src.tmp" "$src"
fi
[[ ! -e $src/pkg/cache/scheduler/zz_tasgate_peer.go ]] || rm -f "$src/pkg/cache/scheduler/zz_tasgate_peer.go"
# The copy must still be Kueue's own files, byte for byte, before the one file is added.
step="checking the copy against the module cache"
diff -rq "$mod_dir" "$src" -x .copied >/dev/null || die "$src differs from $mod_dir; delete it and rerun"
cp "$overlay" "$src/pkg/cache/scheduler/zz_tasgate_peer.go"

step="writing the temporary modfile"
tmp=$(mktemp -d)
trap 'rc=$?; rm -rf "$tmp"; if (( rc != 0 )); then echo "kueue_peer/build.sh: FAILED (exit $rc) during: $step" >&2; fi' EXIT
cp "$here/go.mod" "$tmp/peer.mod"
cp "$here/go.sum" "$tmp/peer.sum"
printf '\nreplace sigs.k8s.io/kueue => %s\n' "$src" >> "$tmp/peer.mod"

step="compiling kueue-peer"
echo "== kueue-peer: go build against $src (Kueue $kueue_version + zz_tasgate_peer.go)" >&2
rm -f "$bin.tmp"
(cd "$here" && "$go" build -modfile="$tmp/peer.mod" -trimpath -ldflags="-s -w" -o "$bin.tmp" .) \
  || die "'go build' failed in $here"

step="checking kueue-peer runs"
[[ -z $("$bin.tmp" </dev/null) ]] || die "$bin.tmp printed output for an empty input"
mv -f "$bin.tmp" "$bin"
printf '%s\n' "$stamp_text" > "$bin.stamp"
echo "== kueue-peer: built in $(( $(date +%s) - t0 ))s, $(du -h "$bin" | cut -f1)" >&2
echo "$bin"
