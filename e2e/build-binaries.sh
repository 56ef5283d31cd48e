#!/usr/bin/env bash
# Build the real binaries the end-to-end suite runs: kube-apiserver, kubectl, etcd, the Kueue manager and helm.
#
# Usage: build-binaries.sh [kube] [kueue] [helm] [cluster] [native] [native137]
#                                      (no argument: kube, kueue and helm, what make e2e needs)
#   kube    = kube-apiserver, kubectl, etcd
#   kueue   = kueue (sigs.k8s.io/kueue/cmd/kueue)
#   helm    = helm (helm.sh/helm/v3/cmd/helm: charts/tasgate's lint, template and install tests)
#   cluster = kwok, kube-controller-manager, scheduler-plugins' kube-scheduler and controller
#             (opt-in; make e2e-cluster)
#   native  = kwok, kube-controller-manager and the upstream kube-scheduler of k8s.io/kubernetes
#             (cmd/kube-scheduler: native Workload/PodGroup gang + topology scheduling; make e2e-native)
#   native137 = the same native set at k8s.io/kubernetes v1.37.0 (e2e/tools/kube137): kube-apiserver,
#             kubectl, kube-controller-manager, kube-scheduler, plus kwok and the pinned etcd
#             (TASGATE_NATIVE_K8S=v1.37.0 make e2e-native; tests/e2e_native/test_v137_smoke.py)
#
# They are compiled from Go modules at the versions pinned in e2e/tools/{kube,etcd,kueue,helm}/go.mod (the
# wrapper modules; see e2e/README.md for why they exist) and cached OUTSIDE the repository in
#   ${TASGATE_CACHE:-$HOME/.cache/tasgate}/bin/kube-<version>_etcd-<version>/   kube-apiserver kubectl etcd
#   ${TASGATE_CACHE:-$HOME/.cache/tasgate}/bin/kueue-<version>/                 kueue
#   ${TASGATE_CACHE:-$HOME/.cache/tasgate}/bin/helm-<version>/                  helm
#   ${TASGATE_CACHE:-$HOME/.cache/tasgate}/bin/kwok-<version>/                  kwok
#   ${TASGATE_CACHE:-$HOME/.cache/tasgate}/bin/kube-controller-manager-<version>/ kube-controller-manager
#   ${TASGATE_CACHE:-$HOME/.cache/tasgate}/bin/scheduler-plugins-<version>/     kube-scheduler
#                                                              scheduler-plugins-controller
#   ${TASGATE_CACHE:-$HOME/.cache/tasgate}/bin/kube-scheduler-<version>/         kube-scheduler (upstream)
# (native137 fills the same three kinds of directory for e2e/tools/kube137's version: kube-v1.37.0_etcd-<etcd>/,
#  kube-controller-manager-v1.37.0/ and kube-scheduler-v1.37.0/; its etcd is e2e/tools/etcd's, copied
#  from the v1.36 directory when that one is already built with the same stamp)
# so the ~400 MB of binaries are never committed and a second run costs nothing. e2e/controlplane.py
# and e2e/kueue.py compute the same directories from the same go.mod files, so they can never
# disagree. Kueue has a directory of its own because its version moves independently of Kubernetes'.
#
# Idempotent: a binary whose stamp file names the exact module@version is left alone. Each binary is
# linked to a temporary name and renamed into place, so an interrupted build never leaves a
# truncated executable that would pass the "already built" check. Each output directory gets its
# VERSIONS marker last. Concurrent runs serialise on one lock per output directory.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools="$repo/e2e/tools"
step="start"
trap 'rc=$?; if (( rc != 0 )); then echo "build-binaries.sh: FAILED (exit $rc) during: $step" >&2; fi' EXIT

die() { echo "build-binaries.sh: error: $*" >&2; exit 1; }

want_kube=0 want_kueue=0 want_helm=0 want_cluster=0 want_native=0 want_native137=0
(( $# > 0 )) || set -- kube kueue helm
for arg in "$@"; do
  case $arg in
    kube) want_kube=1 ;;
    kueue) want_kueue=1 ;;
    helm) want_helm=1 ;;
    cluster) want_cluster=1 ;;
    native) want_native=1 ;;
    native137) want_native137=1 ;;
    -h|--help) sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$arg' (want: kube, kueue, helm, cluster, native, native137)" ;;
  esac
done

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
kueue_version=$(module_version "$tools/kueue/go.mod" 'sigs\.k8s\.io/kueue')
helm_version=$(module_version "$tools/helm/go.mod" 'helm\.sh/helm/v3')
kwok_version=$(module_version "$tools/kwok/go.mod" 'sigs\.k8s\.io/kwok')
sched_version=$(module_version "$tools/scheduler/go.mod" 'sigs\.k8s\.io/scheduler-plugins')
if (( want_cluster || want_native || want_native137 )); then
  [[ -n $kwok_version ]] || die "sigs.k8s.io/kwok is not required in $tools/kwok/go.mod"
fi
if (( want_native137 )); then
  kube137_version=$(module_version "$tools/kube137/go.mod" 'k8s\.io/kubernetes')
  [[ -n $kube137_version ]] || die "k8s.io/kubernetes is not required in $tools/kube137/go.mod"
  [[ $kube137_version =~ ^v1\.([0-9]+)\. ]] || die "unexpected k8s.io/kubernetes version $kube137_version in $tools/kube137/go.mod"
  kube137_minor=${BASH_REMATCH[1]}
fi
if (( want_cluster )); then
  [[ -n $kwok_version ]] || die "sigs.k8s.io/kwok is not required in $tools/kwok/go.mod"
  [[ -n $sched_version ]] || die "sigs.k8s.io/scheduler-plugins is not required in $tools/scheduler/go.mod"
fi
[[ -n $kube_version ]] || die "k8s.io/kubernetes is not required in $tools/kube/go.mod"
[[ -n $etcd_version ]] || die "go.etcd.io/etcd/server/v3 is not required in $tools/etcd/go.mod"
[[ -n $kueue_version ]] || die "sigs.k8s.io/kueue is not required in $tools/kueue/go.mod"
[[ -n $helm_version ]] || die "helm.sh/helm/v3 is not required in $tools/helm/go.mod"
[[ $kube_version =~ ^v1\.([0-9]+)\. ]] || die "unexpected k8s.io/kubernetes version $kube_version"
kube_minor=${BASH_REMATCH[1]}

cache_root=${TASGATE_CACHE:-$HOME/.cache/tasgate}
kube_out="$cache_root/bin/kube-${kube_version}_etcd-${etcd_version}"
kueue_out="$cache_root/bin/kueue-${kueue_version}"
helm_out="$cache_root/bin/helm-${helm_version}"
kwok_out="$cache_root/bin/kwok-${kwok_version}"
kcm_out="$cache_root/bin/kube-controller-manager-${kube_version}"
sched_out="$cache_root/bin/scheduler-plugins-${sched_version}"
native_out="$cache_root/bin/kube-scheduler-${kube_version}"
if (( want_native137 )); then
  kube137_out="$cache_root/bin/kube-${kube137_version}_etcd-${etcd_version}"
  kcm137_out="$cache_root/bin/kube-controller-manager-${kube137_version}"
  native137_out="$cache_root/bin/kube-scheduler-${kube137_version}"
fi

echo "build-binaries.sh: $go_version, GOMAXPROCS=$GOMAXPROCS"
if (( want_kube )); then
  echo "  k8s.io/kubernetes         $kube_version  -> $kube_out/kube-apiserver, $kube_out/kubectl"
  echo "  go.etcd.io/etcd/server/v3 $etcd_version  -> $kube_out/etcd"
fi
if (( want_kueue )); then
  echo "  sigs.k8s.io/kueue         $kueue_version  -> $kueue_out/kueue"
fi
if (( want_helm )); then
  echo "  helm.sh/helm/v3           $helm_version  -> $helm_out/helm"
fi

if (( want_cluster )); then
  echo "  sigs.k8s.io/kwok          $kwok_version  -> $kwok_out/kwok"
  echo "  k8s.io/kubernetes         $kube_version  -> $kcm_out/kube-controller-manager"
  echo "  sigs.k8s.io/scheduler-plugins $sched_version -> $sched_out/kube-scheduler, $sched_out/scheduler-plugins-controller"
fi
if (( want_native )); then
  echo "  sigs.k8s.io/kwok          $kwok_version  -> $kwok_out/kwok"
  echo "  k8s.io/kubernetes         $kube_version  -> $kcm_out/kube-controller-manager, $native_out/kube-scheduler"
fi
if (( want_native137 )); then
  echo "  sigs.k8s.io/kwok          $kwok_version  -> $kwok_out/kwok"
  echo "  k8s.io/kubernetes         $kube137_version  -> $kube137_out/kube-apiserver, $kube137_out/kubectl,"
  echo "                                       $kcm137_out/kube-controller-manager, $native137_out/kube-scheduler"
  echo "  go.etcd.io/etcd/server/v3 $etcd_version  -> $kube137_out/etcd"
fi

lock() {  # lock <fd> <output dir>: create the dir and hold its lock on fd for the rest of the section
  mkdir -p "$2"
  eval "exec $1>\"\$2/.lock\""
  flock -n "$1" || { echo "another build-binaries.sh holds $2/.lock; waiting for it"; flock "$1"; }
}

# The k8s build sets these through hack/lib/version.sh; without them both binaries report
# v0.0.0-master and kubectl prints version-skew warnings against its own server.
kube_ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kube_ldflags+=" -X $pkg.gitVersion=$kube_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$kube_minor"
  kube_ldflags+=" -X $pkg.gitTreeState=clean"
done

total_start=$(date +%s)
built=()

# build <output dir> <module dir> <binary name> <package> <module@version> <ldflags> <run-check args...>
# The run check executes the fresh binary with those arguments and must exit 0 (or $check_exit,
# set on the call, for a binary whose --help exits 2). It must never start a server (kueue with
# stray arguments would connect to whatever ~/.kube/config names).
build() {
  local out=$1 dir=$2 name=$3 pkg=$4 stamp_text=$5 ldflags=$6
  shift 6
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
  local rc=0
  "$bin.tmp" "$@" >/dev/null 2>&1 || rc=$?
  (( rc == ${check_exit:-0} )) || die "$bin.tmp was built but '$name $*' exits $rc, not ${check_exit:-0}"
  mv -f "$bin.tmp" "$bin"
  printf '%s\n' "$stamp_text" > "$stamp"
  local t2; t2=$(date +%s)
  echo "== $name: built in $((t2 - t0))s (download $((t1 - t0))s, compile+link $((t2 - t1))s), $(du -h "$bin" | cut -f1)"
  built+=("$name $((t2 - t0))s")
}

if (( want_kube )); then
  lock 9 "$kube_out"
  # kube-apiserver first: kubectl then reuses most of the compiled k8s.io packages from the build cache.
  build "$kube_out" "$tools/kube" kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver \
    "k8s.io/kubernetes@$kube_version" "$kube_ldflags" --version
  build "$kube_out" "$tools/kube" kubectl k8s.io/kubernetes/cmd/kubectl \
    "k8s.io/kubernetes@$kube_version" "$kube_ldflags" version --client
  build "$kube_out" "$tools/etcd" etcd go.etcd.io/etcd/server/v3 \
    "go.etcd.io/etcd/server/v3@$etcd_version" "-s -w" --version

  step="writing the version marker in $kube_out"
  # The marker controlplane.py checks: it is written last, so its presence means all three exist.
  printf 'kubernetes=%s\netcd=%s\ngo=%s\n' "$kube_version" "$etcd_version" "$go_version" > "$kube_out/VERSIONS.tmp"
  mv -f "$kube_out/VERSIONS.tmp" "$kube_out/VERSIONS"
  exec 9>&-  # release the lock: a concurrent kube build need not wait for Kueue
fi

if (( want_kueue )); then
  lock 8 "$kueue_out"
  # Kueue's Makefile sets these three through -X (pkg/version); without them the binary logs
  # gitVersion v0.0.0-main and its client's User-Agent is kueue/v0.0.0 ... abcd012. The commit and
  # date come from the module proxy's .info file (the tag's commit), so the build stays reproducible.
  step="reading sigs.k8s.io/kueue@$kueue_version's module info"
  kueue_info=$(cd "$tools/kueue" && "$go" mod download -json "sigs.k8s.io/kueue@$kueue_version") \
    || die "'go mod download -json sigs.k8s.io/kueue@$kueue_version' failed in $tools/kueue"
  kueue_info_file=$(sed -n -E 's/^[[:space:]]*"Info": "(.*)",?$/\1/p' <<<"$kueue_info")
  kueue_commit="" kueue_date=""
  if [[ -f $kueue_info_file ]]; then
    kueue_commit=$(sed -n -E 's/.*"Hash":"([0-9a-f]{40})".*/\1/p' "$kueue_info_file")
    kueue_date=$(sed -n -E 's/.*"Time":"([^"]+)".*/\1/p' "$kueue_info_file")
  fi
  kueue_pkg=sigs.k8s.io/kueue/pkg/version
  kueue_ldflags="-s -w -X $kueue_pkg.GitVersion=$kueue_version"
  [[ -z $kueue_commit ]] || kueue_ldflags+=" -X $kueue_pkg.GitCommit=$kueue_commit"
  [[ -z $kueue_date ]] || kueue_ldflags+=" -X $kueue_pkg.BuildDate=$kueue_date"
  # --help exits 0 without touching any cluster (kueue has no --version flag).
  build "$kueue_out" "$tools/kueue" kueue sigs.k8s.io/kueue/cmd/kueue \
    "sigs.k8s.io/kueue@$kueue_version" "$kueue_ldflags" --help

  step="writing the version marker in $kueue_out"
  # The marker e2e/kueue.py checks, written last like the kube one.
  printf 'kueue=%s\ncommit=%s\ngo=%s\n' "$kueue_version" "${kueue_commit:-unknown}" "$go_version" \
    > "$kueue_out/VERSIONS.tmp"
  mv -f "$kueue_out/VERSIONS.tmp" "$kueue_out/VERSIONS"
  exec 8>&-
fi

if (( want_helm )); then
  lock 4 "$helm_out"
  # Helm's Makefile sets its version through -X (without it `helm version` says v3.22, no patch) and
  # the Kubernetes version `helm template` and `helm lint` assume without a cluster (the default
  # Capabilities.KubeVersion), derived from the k8s.io/client-go it builds against: v0.N -> 1.N.
  step="reading helm.sh/helm/v3@$helm_version's module info"
  helm_client_go=$(module_version "$tools/helm/go.mod" 'k8s\.io/client-go')
  [[ $helm_client_go =~ ^v0\.([0-9]+)\. ]] || die "unexpected k8s.io/client-go version '$helm_client_go' in $tools/helm/go.mod"
  helm_kube_minor=${BASH_REMATCH[1]}
  helm_info=$(cd "$tools/helm" && "$go" mod download -json "helm.sh/helm/v3@$helm_version") \
    || die "'go mod download -json helm.sh/helm/v3@$helm_version' failed in $tools/helm"
  helm_info_file=$(sed -n -E 's/^[[:space:]]*"Info": "(.*)",?$/\1/p' <<<"$helm_info")
  helm_commit=""
  [[ ! -f $helm_info_file ]] || helm_commit=$(sed -n -E 's/.*"Hash":"([0-9a-f]{40})".*/\1/p' "$helm_info_file")
  helm_pkg=helm.sh/helm/v3
  helm_ldflags="-s -w -X $helm_pkg/internal/version.version=$helm_version -X $helm_pkg/internal/version.metadata="
  helm_ldflags+=" -X $helm_pkg/internal/version.gitTreeState=clean"
  [[ -z $helm_commit ]] || helm_ldflags+=" -X $helm_pkg/internal/version.gitCommit=$helm_commit"
  for pkg in "$helm_pkg/pkg/lint/rules" "$helm_pkg/pkg/chartutil"; do
    helm_ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$helm_kube_minor"
  done
  build "$helm_out" "$tools/helm" helm helm.sh/helm/v3/cmd/helm "helm.sh/helm/v3@$helm_version" "$helm_ldflags" version
  step="writing the version marker in $helm_out"
  # The marker e2e/helm.py checks, written last like the others.
  printf 'helm=%s\ncommit=%s\ngo=%s\n' "$helm_version" "${helm_commit:-unknown}" "$go_version" > "$helm_out/VERSIONS.tmp"
  mv -f "$helm_out/VERSIONS.tmp" "$helm_out/VERSIONS"
  exec 4>&-
fi

build_kwok() {
  lock 7 "$kwok_out"
  # kwok's release script sets consts.Version; without it the binary still reports 0.8.0 from source,
  # so this only keeps a future bump honest.
  build "$kwok_out" "$tools/kwok" kwok sigs.k8s.io/kwok/cmd/kwok \
    "sigs.k8s.io/kwok@$kwok_version" "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${kwok_version#v}" --version
  printf 'kwok=%s\ngo=%s\n' "$kwok_version" "$go_version" > "$kwok_out/VERSIONS.tmp"
  mv -f "$kwok_out/VERSIONS.tmp" "$kwok_out/VERSIONS"
  exec 7>&-
}

build_kcm() {
  lock 6 "$kcm_out"
  # Same module and ldflags as kube-apiserver (e2e/tools/kube lists it as a tool).
  build "$kcm_out" "$tools/kube" kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager \
    "k8s.io/kubernetes@$kube_version" "$kube_ldflags" --version
  printf 'kubernetes=%s\ngo=%s\n' "$kube_version" "$go_version" > "$kcm_out/VERSIONS.tmp"
  mv -f "$kcm_out/VERSIONS.tmp" "$kcm_out/VERSIONS"
  exec 6>&-
}

if (( want_cluster || want_native )); then
  build_kwok
  build_kcm
fi

if (( want_cluster )); then
  lock 5 "$sched_out"
  # Without -X gitVersion the binary reports v0.0.0-master+$Format:%H$. scheduler-plugins' Makefile
  # sets it to its own tag, but a v0.34.7 there makes component-base's compatibility check exit
  # ("emulation version 0.34 is not between [1.31, 0.34.0]"), so it gets the version of the
  # k8s.io/kubernetes it is compiled from (the replace target in e2e/tools/scheduler/go.mod).
  sched_kube_version=$(sed -n -E 's#^[[:space:]]*k8s\.io/kubernetes => k8s\.io/kubernetes (v1\.[0-9]+\.[0-9]+)$#\1#p' "$tools/scheduler/go.mod")
  [[ -n $sched_kube_version ]] || die "no 'k8s.io/kubernetes => k8s.io/kubernetes v1.x.y' replace in $tools/scheduler/go.mod"
  build "$sched_out" "$tools/scheduler" kube-scheduler sigs.k8s.io/scheduler-plugins/cmd/scheduler \
    "sigs.k8s.io/scheduler-plugins@$sched_version k8s.io/kubernetes@$sched_kube_version" \
    "-s -w -X k8s.io/component-base/version.gitVersion=$sched_kube_version" --version
  # The PodGroup/ElasticQuota controller (it writes PodGroup status: phase, scheduled, running ...).
  # Same module, so it reuses the scheduler's compiled packages. It has no --version flag; --help
  # prints the flags and exits 2 (pflag's ErrHelp under ExitOnError) before reading any kubeconfig.
  check_exit=2 build "$sched_out" "$tools/scheduler" scheduler-plugins-controller sigs.k8s.io/scheduler-plugins/cmd/controller \
    "sigs.k8s.io/scheduler-plugins@$sched_version k8s.io/kubernetes@$sched_kube_version" "-s -w" --help
  printf 'scheduler-plugins=%s\ngo=%s\n' "$sched_version" "$go_version" > "$sched_out/VERSIONS.tmp"
  mv -f "$sched_out/VERSIONS.tmp" "$sched_out/VERSIONS"
  exec 5>&-
fi

if (( want_native )); then
  lock 3 "$native_out"
  # The upstream scheduler, from the same wrapper module and ldflags as kube-apiserver (every package
  # cmd/kube-scheduler needs is already in e2e/tools/kube/go.sum): its PodGroup cycle and the
  # topology-aware workload placement are what tasgate's native mode predicts.
  build "$native_out" "$tools/kube" kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler \
    "k8s.io/kubernetes@$kube_version" "$kube_ldflags" --version
  step="writing the version marker in $native_out"
  printf 'kubernetes=%s\ngo=%s\n' "$kube_version" "$go_version" > "$native_out/VERSIONS.tmp"
  mv -f "$native_out/VERSIONS.tmp" "$native_out/VERSIONS"
  exec 3>&-
fi

if (( want_native137 )); then
  # The native gang APIs at v1.37 (docs/native-v137.md). Same build() and ldflags recipe as the
  # v1.36 targets, from the kube137 wrapper module (its own go.sum: the two versions' graphs never
  # meet in MVS). kube-apiserver first: the other three reuse most of its compiled packages.
  (( want_cluster || want_native )) || build_kwok
  kube137_ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    kube137_ldflags+=" -X $pkg.gitVersion=$kube137_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$kube137_minor"
    kube137_ldflags+=" -X $pkg.gitTreeState=clean"
  done
  lock 9 "$kube137_out"
  build "$kube137_out" "$tools/kube137" kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver \
    "k8s.io/kubernetes@$kube137_version" "$kube137_ldflags" --version
  build "$kube137_out" "$tools/kube137" kubectl k8s.io/kubernetes/cmd/kubectl \
    "k8s.io/kubernetes@$kube137_version" "$kube137_ldflags" version --client
  # etcd: v1.37.0 itself tests against etcd 3.7.0 (hack/lib/etcd.sh) but its client (go.etcd.io/etcd/client/v3
  # v3.7.0) speaks to the 3.6 server the v1.36 table runs; reuse that exact binary (same stamp) when
  # it is built, else build it from e2e/tools/etcd as the kube target does.
  etcd_stamp="go.etcd.io/etcd/server/v3@$etcd_version"
  if [[ ! -x $kube137_out/etcd || ! -f $kube137_out/etcd.stamp || $(<"$kube137_out/etcd.stamp") != "$etcd_stamp" ]] \
      && [[ -x $kube_out/etcd && -f $kube_out/etcd.stamp && $(<"$kube_out/etcd.stamp") == "$etcd_stamp" ]]; then
    step="copying etcd from $kube_out"
    cp -f "$kube_out/etcd" "$kube137_out/etcd.tmp"
    mv -f "$kube137_out/etcd.tmp" "$kube137_out/etcd"
    printf '%s\n' "$etcd_stamp" > "$kube137_out/etcd.stamp"
    echo "== etcd: copied ($etcd_stamp) from $kube_out"
  fi
  build "$kube137_out" "$tools/etcd" etcd go.etcd.io/etcd/server/v3 "$etcd_stamp" "-s -w" --version
  step="writing the version marker in $kube137_out"
  printf 'kubernetes=%s\netcd=%s\ngo=%s\n' "$kube137_version" "$etcd_version" "$go_version" > "$kube137_out/VERSIONS.tmp"
  mv -f "$kube137_out/VERSIONS.tmp" "$kube137_out/VERSIONS"
  exec 9>&-

  lock 6 "$kcm137_out"
  build "$kcm137_out" "$tools/kube137" kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager \
    "k8s.io/kubernetes@$kube137_version" "$kube137_ldflags" --version
  printf 'kubernetes=%s\ngo=%s\n' "$kube137_version" "$go_version" > "$kcm137_out/VERSIONS.tmp"
  mv -f "$kcm137_out/VERSIONS.tmp" "$kcm137_out/VERSIONS"
  exec 6>&-

  lock 3 "$native137_out"
  build "$native137_out" "$tools/kube137" kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler \
    "k8s.io/kubernetes@$kube137_version" "$kube137_ldflags" --version
  step="writing the version marker in $native137_out"
  printf 'kubernetes=%s\ngo=%s\n' "$kube137_version" "$go_version" > "$native137_out/VERSIONS.tmp"
  mv -f "$native137_out/VERSIONS.tmp" "$native137_out/VERSIONS"
  exec 3>&-
fi

step="done"
where=()
(( want_kube )) && where+=("$kube_out")
(( want_kueue )) && where+=("$kueue_out")
(( want_helm )) && where+=("$helm_out")
(( want_cluster )) && where+=("$kwok_out" "$kcm_out" "$sched_out")
(( want_native )) && where+=("$kwok_out" "$kcm_out" "$native_out")
if (( want_native137 )); then
  (( want_cluster || want_native )) || where+=("$kwok_out")
  where+=("$kube137_out" "$kcm137_out" "$native137_out")
fi
echo "build-binaries.sh: ${#built[@]} built${built:+ (${built[*]})}, total $(( $(date +%s) - total_start ))s; binaries in ${where[*]}"
