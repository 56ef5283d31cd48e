#!/usr/bin/env bash
# Build kueue-gates: tasgate's Kueue peer (bench/kueue_peer: Kueue's own TAS cache, snapshot and
# FindTopologyAssignmentsForFlavor, driven from JSON) with Kueue's feature gates set from
# --feature-gates, so tests/e2e/test_kueue_gates_placement.py can place on Kueue's code with a
# gate flipped.
#
# Usage: e2e/tools/kueue_gates/build.sh      (prints the binary's path on its last line)
#
# It reuses the peer, never copies it: bench/kueue_peer/build.sh makes (and checks against the
# module cache) the private copy of sigs.k8s.io/kueue with the peer's one added file; this script
# then compiles main.go (beside it) against that copy, with the peer's go.mod and go.sum (the
# same module graph: main.go imports nothing the peer's build list lacks), in a temporary
# directory, into ${TASGATE_CACHE:-$HOME/.cache/tasgate}/bin/kueue-gates-<version>/kueue-gates,
# never into the repository. Idempotent: a stamp names the SHA-256 of every input and the Go
# version. About 2 s once the peer is built (Kueue's packages come from Go's build cache); about
# 6 minutes with an empty build cache (measured on 2 cores: 3 min of CPU).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../.." && pwd)
peer="$repo/bench/kueue_peer"
step="start"
trap 'rc=$?; if (( rc != 0 )); then echo "kueue_gates/build.sh: FAILED (exit $rc) during: $step" >&2; fi' EXIT
die() { echo "kueue_gates/build.sh: error: $*" >&2; exit 1; }

step="building the peer's module copy (bench/kueue_peer/build.sh)"
bash "$peer/build.sh" >/dev/null

step="locating the Go toolchain"
go=${GO:-$(command -v go || true)}
[[ -n $go ]] || go=/usr/local/go/bin/go
[[ -x $go ]] || die "no Go toolchain: 'go' is not on PATH and /usr/local/go/bin/go does not exist (or set GO=)"
go_version=$("$go" env GOVERSION) || die "'$go env GOVERSION' failed"
export GOTOOLCHAIN=local
export GOFLAGS="${GOFLAGS:-} -mod=readonly"

kueue_version=$(sed -n -E 's#^[[:space:]]*(require[[:space:]]+)?sigs\.k8s\.io/kueue[[:space:]]+(v[^[:space:]]+).*#\2#p' "$peer/go.mod" | head -n1)
[[ -n $kueue_version ]] || die "sigs.k8s.io/kueue is not required in $peer/go.mod"
cache_root=${TASGATE_CACHE:-$HOME/.cache/tasgate}
src="$cache_root/src/kueue-$kueue_version-peer"
[[ -f $src/pkg/cache/scheduler/zz_tasgate_peer.go ]] || die "$src has no peer file: bench/kueue_peer/build.sh did not make it"
out="$cache_root/bin/kueue-gates-$kueue_version"
bin="$out/kueue-gates"
overlay="$peer/_overlay/pkg/cache/scheduler/zz_tasgate_peer.go"
stamp_text="kueue=$kueue_version go=$go_version inputs=$(cat "$peer/go.mod" "$peer/go.sum" "$overlay" "$here/main.go" "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1)"

mkdir -p "$out"
exec 9>"$out/.lock"
flock -n 9 || { echo "another build holds $out/.lock; waiting for it" >&2; flock 9; }
if [[ -x $bin && -f $bin.stamp && $(<"$bin.stamp") == "$stamp_text" ]]; then
  echo "== kueue-gates: cached ($stamp_text)" >&2
  echo "$bin"
  exit 0
fi
t0=$(date +%s)

step="writing the temporary module"
tmp=$(mktemp -d)
trap 'rc=$?; rm -rf "$tmp"; if (( rc != 0 )); then echo "kueue_gates/build.sh: FAILED (exit $rc) during: $step" >&2; fi' EXIT
cp "$here/main.go" "$peer/go.sum" "$tmp/"
{ cat "$peer/go.mod"; printf '\nreplace sigs.k8s.io/kueue => %s\n' "$src"; } > "$tmp/go.mod"

step="compiling kueue-gates"
echo "== kueue-gates: go build against $src (Kueue $kueue_version + the peer's file)" >&2
rm -f "$bin.tmp"
(cd "$tmp" && "$go" build -trimpath -ldflags="-s -w" -o "$bin.tmp" .) || die "'go build' failed"

step="checking kueue-gates runs"
[[ -z $("$bin.tmp" --feature-gates=TASProfileMixed=false </dev/null) ]] || die "$bin.tmp printed output for an empty input"
mv -f "$bin.tmp" "$bin"
printf '%s\n' "$stamp_text" > "$bin.stamp"
echo "== kueue-gates: built in $(( $(date +%s) - t0 ))s, $(du -h "$bin" | cut -f1)" >&2
echo "$bin"
