#!/usr/bin/env bash
# Builds the tasgate container image without a Docker engine, from Debian's packages:
#
#   1. base layer: a minimal Debian rootfs (mmdebstrap --variant=minbase + python3), cached as a
#      tarball keyed by a hash of its whole recipe (suite, package list, mirrors, dpkg filters)
#      and rebuilt when that changes or when it is older than TASGATE_BASE_MAX_AGE_DAYS (7; for
#      Debian's security updates) or TASGATE_REBUILD_BASE=1;
#   2. app layer, always rebuilt: the tasgate wheel with its compiled (Cython) scorer, built from
#      the same sources the Dockerfile copies, and its dependencies, installed with --no-index
#      into the virtualenv /opt/tasgate, plus the non-root user 65532 — as the Dockerfile does;
#   3. packed with umoci (Debian's package) as an OCI image layout, tagged tasgate:<version>, with
#      the Dockerfile's ENTRYPOINT, CMD, EXPOSE and USER.
#
# Output (outside the repository): ${TASGATE_CACHE:-$HOME/.cache/tasgate}/image/oci, ref
# tasgate:<version>. Push it with skopeo (Debian package skopeo), e.g.
#   skopeo copy oci:$HOME/.cache/tasgate/image/oci:tasgate:0.1.0 docker://<registry>/tasgate:0.1.0
# image/test.sh starts it. Needs root (mmdebstrap's root mode, chroot, mounts), network access
# to the Debian mirror this machine's apt sources name (image/debian_mirrors.py reads them; the
# repository names no mirror) and to the package index pip is configured with; installs
# mmdebstrap and umoci from Debian when they are missing.
#
# Usage: image/build.sh                  build
#        image/build.sh --print-config   print the image's contract as JSON and exit (no root, no
#                                        build: tests/webhook/test_image.py compares it with the
#                                        Dockerfile)
#        image/build.sh --print-mirrors  print the base layer's mirror lines, read from this
#                                        machine's apt sources, and exit (no root, no build)
#        image/build.sh --print-digest   print the built image's manifest digest (sha256:..., from the
#                                        layout's index.json) and exit: what the chart's image.digest
#                                        and the kustomize image.env line to take (no root, no build)
#
# The tag is the project version, read from pyproject.toml (one source; the chart's appVersion and
# manifests/base/kustomization.yaml's newTag are kept equal to it by tests/webhook/test_chart.py).
set -euo pipefail

me=build.sh
step="start"
# shellcheck source=image/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# --- The image's contract. tests/webhook/test_image.py checks every line against the Dockerfile,
# --- and image/test.sh checks the built image against it. Change both files together.
SUITE=bookworm           # the Dockerfile's FROM python:<PYTHON_VERSION>-slim-<SUITE>
PYTHON_VERSION=3.11      # bookworm's python3; the wheel's cp311 tag (checked below)
# No python3-venv: `venv --without-pip` needs only the standard library; the installer (pip) runs
# from its wheel, mounted for the install only, so the image holds no pip, setuptools or ensurepip.
PACKAGES=(python3 ca-certificates)
SOURCES=(pyproject.toml setup.py README.md scorer webhook)  # what the Dockerfile COPYs into the build
USER_SETUP='groupadd --gid 65532 tasgate && useradd --uid 65532 --gid 65532 --no-create-home --shell /usr/sbin/nologin tasgate'
IMAGE_USER=65532:65532
PORTS=(8443 9090)
ENTRYPOINT=(tasgate)
CMD=(serve --in-cluster --host=0.0.0.0 --metrics-port=9090 --on-timeout=deny)
VENV=/opt/tasgate
IMAGE_ENV=("PATH=$VENV/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" LANG=C.UTF-8)

VERSION=$(python3 -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb"))["project"]["version"])' \
  "$repo/pyproject.toml") || die "cannot read the version from $repo/pyproject.toml (python3 >= 3.11 has tomllib)"
TAG="tasgate:$VERSION"

print_config() {
  local -a args=()
  add() { local key=$1; shift; args+=("$key" "$#" "$@"); }
  add suite "$SUITE"; add python_version "$PYTHON_VERSION"; add packages "${PACKAGES[@]}"
  add sources "${SOURCES[@]}"; add user_setup "$USER_SETUP"; add user "$IMAGE_USER"
  add ports "${PORTS[@]}"; add entrypoint "${ENTRYPOINT[@]}"; add cmd "${CMD[@]}"
  add venv "$VENV"; add env "${IMAGE_ENV[@]}"; add tag "$TAG"; add layout "$layout"
  python3 -c '
import json, sys
a, out = sys.argv[1:], {}
while a:
    key, n = a[0], int(a[1])
    out[key], a = a[2 : 2 + n], a[2 + n :]
print(json.dumps(out, indent=1))' "${args[@]}"
}

# The base layer's mirrors: this machine's own (a local mirror, a proxy or the public one).
debian_mirrors() {
  local lines
  lines=$(python3 "$repo/image/debian_mirrors.py" "$SUITE") \
    || die "cannot take the Debian mirrors from this machine's apt sources (/etc/apt; message above)"
  mapfile -t MIRRORS <<<"$lines"
}

case ${1:-} in
  "") ;;
  --print-config) print_config; exit 0 ;;
  --print-mirrors) debian_mirrors; printf '%s\n' "${MIRRORS[@]}"; exit 0 ;;
  --print-digest)
    [[ -f $layout/index.json ]] || die "no image layout at $layout: build it first (bash image/build.sh)"
    image_json "$layout" "$TAG" | python3 -c 'import json, sys; print(json.load(sys.stdin)["digest"])'
    exit 0 ;;
  -h|--help) sed -n '2,/^set /{/^#/p}' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) die "unknown argument '$1' (want nothing, --print-config, --print-mirrors, --print-digest or --help)" ;;
esac

work=""
cleanup() { [[ -z $work ]] || remove_tree "$work"; }
trap on_exit EXIT

t_start=$EPOCHREALTIME
step="checking for root"
need_root "mmdebstrap's root mode, chroot and mounts"
step="installing the build tools from Debian"
ensure_tools mmdebstrap:mmdebstrap umoci:umoci unshare:util-linux setpriv:util-linux flock:util-linux \
  chroot:coreutils /usr/share/keyrings/debian-archive-keyring.gpg:debian-archive-keyring
lock_cache
work=$(mktemp -d "$cache_dir/build.XXXXXX")

# --- 1. The base layer: Debian packages only -----------------------------------------------------
step="reading the Debian mirrors from this machine's apt sources"
debian_mirrors
MMDEBSTRAP_ARGS=(
  --variant=minbase "--include=$(IFS=,; echo "${PACKAGES[*]}")"
  # a merged /usr with usr-is-merged, not the usrmerge conversion package (which pulls in perl)
  --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr
  # no documentation but the copyright files, no man pages, no translations (as the slim images)
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*'
  --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/locale/locale.alias'
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright'
  "$SUITE" - "${MIRRORS[@]}"
)
base_key=$(printf '%s\n' "base-recipe-1" "${MMDEBSTRAP_ARGS[@]}" | sha256sum | cut -c1-16)
base_tar="$cache_dir/base/$SUITE-$base_key.tar"
max_age_days=${TASGATE_BASE_MAX_AGE_DAYS:-7}
[[ $max_age_days =~ ^[0-9]+$ ]] || die "TASGATE_BASE_MAX_AGE_DAYS must be a whole number of days, not '$max_age_days'"
mkdir -p "$cache_dir/base"
step="building the base rootfs with mmdebstrap ($SUITE, ${PACKAGES[*]})"
t0=$EPOCHREALTIME
if [[ -f $base_tar && ${TASGATE_REBUILD_BASE:-0} != 1 && -z $(find "$base_tar" -mmin +$((max_age_days * 1440))) ]]; then
  log "base layer: cached $base_tar (recipe $base_key, $(( ($(date +%s) - $(stat -c %Y "$base_tar")) / 3600 )) h old)"
else
  log "base layer: mmdebstrap --variant=minbase $SUITE + ${PACKAGES[*]} (recipe $base_key)"
  # The tarball goes to stdout; the device nodes in /dev are dropped (a runtime provides /dev).
  if ! mmdebstrap --quiet "${MMDEBSTRAP_ARGS[@]}" 2>"$work/mmdebstrap.log" \
      | tar --delete --wildcards './dev/?*' >"$base_tar.tmp"; then
    tail -n 30 "$work/mmdebstrap.log" >&2
    rm -f "$base_tar.tmp"
    die "mmdebstrap failed (log above: $work/mmdebstrap.log; are the mirrors reachable? ${MIRRORS[*]})"
  fi
  mv "$base_tar.tmp" "$base_tar"
  find "$cache_dir/base" -maxdepth 1 -name "$SUITE-*.tar" ! -path "$base_tar" -delete  # superseded recipes
fi
t_base=$(since "$t0")

# --- 2. The wheels: tasgate (compiled scorer) and its dependencies ------------------------------
step="setting up the project virtualenv (make install)"
t0=$EPOCHREALTIME
make -C "$repo" --no-print-directory install >/dev/null || die "'make install' failed (needs python3 >= 3.11 and a C compiler)"
pip=$repo/.venv/bin/pip
step="building the tasgate wheel"
# From a copy of exactly what the Dockerfile copies, so no stale build/ output or compiled
# modules of the working tree end up in the wheel.
mkdir -p "$work/src" "$work/wheels"
(cd "$repo" && tar -cf - --exclude=__pycache__ --exclude='*.pyc' --exclude='*.so' --exclude='*.c' "${SOURCES[@]}") \
  | tar -xf - -C "$work/src"
"$pip" wheel --quiet --disable-pip-version-check --wheel-dir "$work/wheels" "$work/src" >"$work/pip.log" 2>&1 \
  || { tail -n 30 "$work/pip.log" >&2; die "pip wheel failed (log above; is pip's package index reachable?)"; }
# The installer, run from its wheel (as ensurepip does): the image's virtualenv gets no pip.
"$pip" download --quiet --disable-pip-version-check --no-deps --only-binary=:all: --dest "$work/installer" \
  "pip==$("$pip" --version | awk '{print $2}')" >"$work/pip.log" 2>&1 \
  || { tail -n 30 "$work/pip.log" >&2; die "pip download pip failed (log above; is pip's package index reachable?)"; }
shopt -s nullglob
wheel=("$work"/wheels/tasgate-"$VERSION"-*.whl) installer=("$work"/installer/pip-*.whl)
shopt -u nullglob
(( ${#wheel[@]} == 1 )) || die "expected one tasgate-$VERSION wheel in $work/wheels, found ${#wheel[@]}"
(( ${#installer[@]} == 1 )) || die "expected one pip wheel in $work/installer, found ${#installer[@]}"
abi="cp${PYTHON_VERSION/./}"
[[ ${wheel[0]##*/} == *-"$abi"-"$abi"-linux_*.whl ]] \
  || die "the wheel ${wheel[0]##*/} is not for CPython $PYTHON_VERSION ($abi): build it with python$PYTHON_VERSION (.venv)"
python3 -c 'import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
sys.exit(0 if any(n.startswith("scorer/_core") and n.endswith(".so") for n in names) else "no compiled scorer in the wheel")' "${wheel[0]}"
t_wheels=$(since "$t0")

# --- 3. Layout, base layer, app layer, config ----------------------------------------------------
t0=$EPOCHREALTIME
step="creating the OCI layout (umoci init/new/raw add-layer)"
new_layout="$work/oci"
bundle="$work/bundle"
root="$bundle/rootfs"
umoci init --layout "$new_layout"
umoci new --image "$new_layout:$TAG"
umoci raw add-layer --image "$new_layout:$TAG" \
  --history.created_by "mmdebstrap ${MMDEBSTRAP_ARGS[*]:0:2} $SUITE (recipe $base_key)" "$base_tar"
step="unpacking the base layer (umoci unpack)"
umoci unpack --image "$new_layout:$TAG" "$bundle" >/dev/null

step="checking the base's Python"
have=$(in_root "$root" python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
[[ $have == "$PYTHON_VERSION" ]] || die "$SUITE's python3 is $have, the image contract says $PYTHON_VERSION"

step="adding the user ($USER_SETUP)"
in_root "$root" sh -euc "$USER_SETUP"
step="installing tasgate into $VENV"
in_root "$root" python3 -m venv --without-pip "$VENV"
cp "${installer[0]}" "$work/wheels/"
IN_ROOT_BIND="$work/wheels:/tmp/wheels" in_root "$root" env PYTHONPATH="/tmp/wheels/${installer[0]##*/}" \
  "$VENV/bin/python" -m pip install --quiet --no-index --no-cache-dir --disable-pip-version-check \
  --root-user-action=ignore --no-warn-script-location --find-links /tmp/wheels "tasgate==$VERSION"
IN_ROOT_BIND="$work/wheels:/tmp/wheels" in_root "$root" env PYTHONPATH="/tmp/wheels/${installer[0]##*/}" \
  "$VENV/bin/python" -m pip check --disable-pip-version-check >/dev/null \
  || die "pip check: the installed dependencies are inconsistent"
ln -s "$VENV/bin/tasgate" "$root/usr/local/bin/tasgate"  # on the default PATH too
step="checking the installed image: compiled scorer, tasgate --version, as user $IMAGE_USER"
IN_ROOT_USER=$IMAGE_USER IN_ROOT_RO=1 IN_ROOT_ENV="${IMAGE_ENV[*]} HOME=/ PYTHONDONTWRITEBYTECODE=1" \
  in_root "$root" python3 -c "import scorer; assert scorer.IMPLEMENTATION == 'compiled', scorer.IMPLEMENTATION"
version_out=$(IN_ROOT_USER=$IMAGE_USER IN_ROOT_RO=1 IN_ROOT_ENV="${IMAGE_ENV[*]} HOME=/ PYTHONDONTWRITEBYTECODE=1" \
  in_root "$root" "${ENTRYPOINT[@]}" --version) || die "'${ENTRYPOINT[*]} --version' failed in the image"
[[ $version_out == *"$VERSION"* ]] || die "'${ENTRYPOINT[*]} --version' printed '$version_out', not version $VERSION"
dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${Package}\t${Version}\n' >"$work/packages.txt"
rootfs_bytes=$(du -sb "$root" | cut -f1)

step="packing the app layer (umoci repack)"
umoci repack --image "$new_layout:$TAG" --history.created_by "image/build.sh: $USER_SETUP; venv $VENV with ${wheel[0]##*/}" "$bundle"
step="setting the image config (umoci config)"
config_args=(--config.user="$IMAGE_USER" --config.workingdir=/ --config.label=org.opencontainers.image.title=tasgate
  --config.label=org.opencontainers.image.version="$VERSION" --config.label=org.opencontainers.image.licenses=Apache-2.0)
for e in "${IMAGE_ENV[@]}"; do config_args+=(--config.env="$e"); done
for p in "${PORTS[@]}"; do config_args+=(--config.exposedports="$p/tcp"); done
for a in "${ENTRYPOINT[@]}"; do config_args+=(--config.entrypoint="$a"); done
for a in "${CMD[@]}"; do config_args+=(--config.cmd="$a"); done
umoci config --image "$new_layout:$TAG" --no-history "${config_args[@]}"
umoci gc --layout "$new_layout"

step="replacing $layout"
remove_tree "$bundle"
remove_tree "$layout"
mv "$new_layout" "$layout"
mv "$work/packages.txt" "$cache_dir/packages.txt"
t_pack=$(since "$t0")

info=$(image_json "$layout" "$TAG")
python3 - "$info" "$rootfs_bytes" <<'EOF'
import json, sys
info, rootfs = json.loads(sys.argv[1]), int(sys.argv[2])
layers = [layer["size"] for layer in info["manifest"]["layers"]]
mib = lambda n: f"{n / 2**20:.1f} MiB"
print(f"digest   {info['digest']}")
print(f"size     {mib(sum(layers))} compressed ({' + '.join(mib(n) for n in layers)}: base + app), "
      f"{mib(rootfs)} unpacked")
EOF
log "image $TAG at $layout ($(wc -l <"$cache_dir/packages.txt") Debian packages, listed in $cache_dir/packages.txt)"
log "time: base $t_base, wheels $t_wheels, layers+config $t_pack, total $(since "$t_start")"
digest=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["digest"])' "$info")
log "run its tests: bash image/test.sh; push: skopeo copy oci:$layout:$TAG docker://<registry>/$TAG"
log "name it by digest: helm --set image.repository=<registry>/tasgate,image.digest=$digest;"
log "  kustomize: echo \"image=<registry>/tasgate@$digest\" > manifests/image/image.env"
step="done"
