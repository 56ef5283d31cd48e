#!/usr/bin/env bash
# Build the real control-plane binaries the end-to-end suite runs: kube-apiserver, kubectl, etcd.
#
# They are compiled from Go modules at the versions pinned in e2e/tools/{kube,etcd}/go.mod (the
# wrapper modules; see e2e/README.md for why they exist) and cached OUTSIDE the repository in
#   ${TASGATE_CACHE:-$HOME/.cache/tasgate}/bin/kube-<version>_etcd-<version>/
# so the ~300 MB of binaries are never committed and a second run costs nothing. e2e/controlplane.py
# computes the same directory from the same go.mod files, so the two can never disagree.
#
# Idempotent: a binary whose stamp file names the exact module@version is left alone. Each binary is
# linked to a temporary name and renamed into place, so an interrupted build never leaves a
# truncated executable that would pass the "already built" check. Concurrent runs serialise on a lock.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools="$repo/e2e/tools"
step="start"
trap 'rc=$?; if (( rc != 0 )); then echo "build-binaries.sh: FAILED (exit $rc) during: $step" >&2; fi' EXIT

die() { echo "build-binaries.sh: error: $*" >&2; exit 1; }

# --- toolchain ------------------------------------------------------------------------------------
step="locating the Go toolchain"
go=${GO:-$(command -v go || true)}
[[ -n $go ]] || go=/usr/local/go/bin/go
if [[ ! -x $go ]]; then
  if [[ -n ${GO:-} ]]; then die "GO=$GO is not an executable Go toolchain"; fi
  die "no Go toolchain: 'go' is not on PATH and /usr/local/go/bin/go does not exist (install Go >= the go line of e2e/tools/*/go.mod, or set GO=/path/to/go)"
fi
go_version=$("$go" env GOVERSION) || die "'$go env GOVERSION' failed"
# Never let the go command fetch a different toolchain behind our back: too old must be an error.
export GOTOOLCHAIN=local
export GOFLAGS="${GOFLAGS:-} -mod=readonly"
ncpu=$(nproc 2>/dev/null || echo 2)
export GOMAXPROCS=${GOMAXPROCS:-$ncpu}

# --- versions (single source of truth: the wrapper go.mod files) ----------------------------------
module_version() {  # module_version <go.mod> <module path>
  sed -n -E "s#^[[:space:]]*(require[[:space:]]+)?$2[[:space:]]+(v[^[:space:]]+).*#\2#p" "$1" | head -n1
}
kube_version=$(module_version "$tools/kube/go.mod" 'k8s\.io/kubernetes')
etcd_version=$(module_version "$tools/etcd/go.mod" 'go\.etcd\.io/etcd/server/v3')
[[ -n $kube_version ]] || die "k8s.io/kubernetes is not required in $tools/kube/go.mod"
[[ -n $etcd_version ]] || die "go.etcd.io/etcd/server/v3 is not required in $tools/etcd/go.mod"
[[ $kube_version =~ ^v1\.([0-9]+)\. ]] || die "unexpected k8s.io/kubernetes version $kube_version"
kube_minor=${BASH_REMATCH[1]}

cache_root=${TASGATE_CACHE:-$HOME/.cache/tasgate}
out="$cache_root/bin/kube-${kube_version}_etcd-${etcd_version}"
mkdir -p "$out"
exec 9>"$out/.lock"
flock -n 9 || { echo "another build-binaries.sh holds $out/.lock; waiting for it"; flock 9; }

echo "build-binaries.sh: $go_version, GOMAXPROCS=$GOMAXPROCS"
echo "  k8s.io/kubernetes         $kube_version  -> $out/kube-apiserver, $out/kubectl"
echo "  go.etcd.io/etcd/server/v3 $etcd_version  -> $out/etcd"

# The k8s build sets these through hack/lib/version.sh; without them both binaries report
# v0.0.0-master and kubectl prints version-skew warnings against its own server.
kube_ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kube_ldflags+=" -X $pkg.gitVersion=$kube_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$kube_minor"
  kube_ldflags+=" -X $pkg.gitTreeState=clean"
done

total_start=$(date +%s)
built=()

build() {  # build <module dir> <binary name> <package> <module@version> <ldflags>
  local dir=$1 name=$2 pkg=$3 stamp_text=$4 ldflags=$5
  local bin="$out/$name" stamp="$out/$name.stamp"
  if [[ -x $bin && -f $stamp && $(<"$stamp") == "$stamp_text" ]]; then
    echo "== $name: cached ($stamp_text) at $bin"
    return
  fi
  step="downloading modules for $name ($dir)"
  echo "== $name: downloading modules listed in $dir/go.sum (GOPROXY=$("$go" env GOPROXY))"
  local t0; t0=$(date +%s)
  (cd "$dir" && "$go" mod download) || die "'go mod download' failed in $dir (is the Go module proxy reachable?)"
  local t1; t1=$(date +%s)
  step="compiling $name"
  echo "== $name: go build $pkg (modules took $((t1 - t0))s)"
  rm -f "$bin.tmp"
  (cd "$dir" && "$go" build -p "$ncpu" -trimpath -ldflags="$ldflags" -o "$bin.tmp" "$pkg") \
    || die "'go build $pkg' failed in $dir"
  step="checking $name runs"
  "$bin.tmp" --version >/dev/null 2>&1 || "$bin.tmp" version --client >/dev/null 2>&1 \
    || die "$bin.tmp was built but does not run"
  mv -f "$bin.tmp" "$bin"
  printf '%s\n' "$stamp_text" > "$stamp"
  local t2; t2=$(date +%s)
  echo "== $name: built in $((t2 - t0))s (download $((t1 - t0))s, compile+link $((t2 - t1))s), $(du -h "$bin" | cut -f1)"
  built+=("$name $((t2 - t0))s")
}

# kube-apiserver first: kubectl then reuses most of the compiled k8s.io packages from the build cache.
build "$tools/kube" kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "k8s.io/kubernetes@$kube_version" "$kube_ldflags"
build "$tools/kube" kubectl k8s.io/kubernetes/cmd/kubectl "k8s.io/kubernetes@$kube_version" "$kube_ldflags"
build "$tools/etcd" etcd go.etcd.io/etcd/server/v3 "go.etcd.io/etcd/server/v3@$etcd_version" "-s -w"

step="writing the version marker"
# The marker controlplane.py checks: it is written last, so its presence means all three exist.
printf 'kubernetes=%s\netcd=%s\ngo=%s\n' "$kube_version" "$etcd_version" "$go_version" > "$out/VERSIONS.tmp"
mv -f "$out/VERSIONS.tmp" "$out/VERSIONS"
step="done"
echo "build-binaries.sh: ${#built[@]} built${built:+ (${built[*]})}, total $(( $(date +%s) - total_start ))s; binaries in $out"
