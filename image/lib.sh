# Shared by image/build.sh and image/test.sh (sourced, not run). Bash, set -euo pipefail by the caller.
#
# The caller sets `me` (its name, for messages) and `step` (what it is doing, for the failure line).

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Outside the repository, never committed; the e2e binaries live next to it in .../tasgate/bin.
cache_dir="${TASGATE_CACHE:-$HOME/.cache/tasgate}/image"
layout="$cache_dir/oci"                # the OCI image layout that build.sh writes and test.sh runs

since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.1fs", b - a}'; }  # since $EPOCHREALTIME-stamp
log() { printf '== %s: %s\n' "$me" "$*" >&2; }
die() { printf '%s: error: %s\n' "$me" "$*" >&2; exit 1; }

# Prints "FAILED (exit N) during: <step>" on any failure, then runs the caller's cleanup.
on_exit() {
  local rc=$?
  trap - EXIT
  if declare -F cleanup >/dev/null; then cleanup || rc=1; fi
  if (( rc != 0 )); then printf '%s: FAILED (exit %d) during: %s\n' "$me" "$rc" "$step" >&2; fi
  exit "$rc"
}

need_root() {
  (( EUID == 0 )) || die "must run as root ($1); CI runs as root. Try: sudo bash $0"
}

# ensure_tools TOOL:PACKAGE ... — installs the Debian packages of the tools that are missing.
ensure_tools() {
  local pair tool pkg candidate missing=() pkgs=() unavailable=()
  for pair in "$@"; do
    tool=${pair%%:*} pkg=${pair#*:}
    if [[ $tool == /* ]]; then [[ -e $tool ]] && continue; else command -v "$tool" >/dev/null && continue; fi
    missing+=("$tool") pkgs+=("$pkg")
  done
  (( ${#pkgs[@]} )) || return 0
  command -v apt-get >/dev/null \
    || die "missing ${missing[*]} and no apt-get to install them (Debian packages: ${pkgs[*]})"
  candidates() {
    unavailable=()
    for pkg in "${pkgs[@]}"; do
      candidate=$(apt-cache policy "$pkg" 2>/dev/null | awk '/Candidate:/ {print $2}')
      [[ -n $candidate && $candidate != "(none)" ]] || unavailable+=("$pkg")
    done
  }
  candidates
  if (( ${#unavailable[@]} )); then
    log "apt-get update (no installation candidate yet for: ${unavailable[*]})"
    apt-get update -qq || die "apt-get update failed; cannot install ${pkgs[*]} (for ${missing[*]})"
    candidates
  fi
  (( ${#unavailable[@]} == 0 )) \
    || die "Debian has no installation candidate for: ${unavailable[*]} (needed for: ${missing[*]}); see 'apt-cache policy ${unavailable[*]}' — they are in bookworm main"
  log "installing from Debian: ${pkgs[*]} (for ${missing[*]})"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null \
    || die "apt-get install ${pkgs[*]} failed (needed for: ${missing[*]})"
  for pair in "$@"; do
    tool=${pair%%:*}
    if [[ $tool == /* ]]; then [[ -e $tool ]]; else command -v "$tool" >/dev/null; fi \
      || die "'$tool' is still missing after installing Debian package '${pair#*:}'"
  done
}

# One build or test at a time per cache directory (the layout is replaced by a build).
lock_cache() {
  mkdir -p "$cache_dir"
  exec 9>"$cache_dir/.lock"
  flock -w 900 9 || die "another image build/test holds $cache_dir/.lock for over 15 minutes"
}

# in_root ROOTFS COMMAND... — runs COMMAND chrooted into ROOTFS, in private mount and PID
# namespaces: /proc, a /dev with null, zero, full, random and urandom, and an empty tmpfs /tmp
# exist only while it runs, so nothing of them reaches an image layer and nothing stays mounted
# whatever happens (the namespace dies with its last process). Environment knobs:
#   IN_ROOT_USER=UID:GID   run as that user (chroot --userspec), with no_new_privs
#   IN_ROOT_RO=1           the root filesystem read-only (as readOnlyRootFilesystem: true)
#   IN_ROOT_BIND=SRC:DST   bind SRC (host, read-only) at DST (inside, under /tmp)
#   IN_ROOT_ENV="K=V ..."  the environment (default: a plain PATH, HOME=/root, LANG=C.UTF-8)
#   IN_ROOT_EXEC=1         exec unshare (for `in_root ... &`: then $! is unshare's PID, and its
#                          one child is the command; SIGKILL of unshare kills the command too)
# The command's PID inside is 1, like a container's entrypoint.
in_root() {
  local root=$1; shift
  [[ -x $root/usr/bin/env ]] || die "in_root: $root is not a root filesystem (no /usr/bin/env)"
  local -a how=()
  [[ ${IN_ROOT_EXEC:-0} != 1 ]] || how=(exec)
  "${how[@]}" unshare --mount --pid --fork --kill-child --propagation private -- bash -euo pipefail -c '
    root=$1; shift
    if [[ ${IN_ROOT_RO:-0} == 1 ]]; then
      mount --bind "$root" "$root"
      mount -o remount,bind,ro "$root"
    fi
    mount -t proc -o nosuid,nodev,noexec proc "$root/proc"
    mount -t tmpfs -o mode=755,size=1m,nosuid tmpfs "$root/dev"
    for node in null zero full random urandom; do
      : > "$root/dev/$node"
      mount --bind "/dev/$node" "$root/dev/$node"
    done
    ln -s /proc/self/fd "$root/dev/fd"
    mount -t tmpfs -o mode=1777,size=256m,nosuid,nodev tmpfs "$root/tmp"
    if [[ -n ${IN_ROOT_BIND:-} ]]; then
      src=${IN_ROOT_BIND%%:*} dst=${IN_ROOT_BIND#*:}
      mkdir -p "$root$dst"
      mount --bind "$src" "$root$dst"
      mount -o remount,bind,ro "$root$dst"
    fi
    read -r -a env <<<"${IN_ROOT_ENV:-PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8}"
    if [[ -n ${IN_ROOT_USER:-} ]]; then
      exec setpriv --no-new-privs chroot --userspec="$IN_ROOT_USER" --groups="${IN_ROOT_USER#*:}" "$root" /usr/bin/env -i "${env[@]}" "$@"
    fi
    exec chroot "$root" /usr/bin/env -i "${env[@]}" "$@"
  ' in_root "$root" "$@"
}

# Refuses to delete a directory that still has something mounted below it (a bind of /dev would
# otherwise be followed into the host), then deletes it without leaving the filesystem.
remove_tree() {
  local dir=$1
  [[ -e $dir ]] || return 0
  if awk -v d="$(realpath "$dir")" '$5 == d || index($5, d "/") == 1 {found=1} END {exit !found}' /proc/self/mountinfo; then
    printf '%s: error: not removing %s: something is still mounted below it:\n' "$me" "$dir" >&2
    awk -v d="$(realpath "$dir")" '$5 == d || index($5, d "/") == 1 {print "  " $5}' /proc/self/mountinfo >&2
    return 1
  fi
  rm -rf --one-file-system "$dir"
}

# The manifest and config of REF in LAYOUT, as one JSON document (python3, no other tool).
image_json() {
  python3 - "$1" "$2" <<'EOF'
import json, sys
from pathlib import Path
layout, ref = Path(sys.argv[1]), sys.argv[2]
blob = lambda d: layout / "blobs" / d.replace(":", "/", 1)
index = json.loads((layout / "index.json").read_text())
hits = [m for m in index["manifests"] if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == ref]
if len(hits) != 1:
    sys.exit(f"{layout}: {len(hits)} manifests tagged {ref!r} (want exactly 1)")
manifest = json.loads(blob(hits[0]["digest"]).read_text())
config = json.loads(blob(manifest["config"]["digest"]).read_text())
print(json.dumps({"digest": hits[0]["digest"], "manifest": manifest, "config": config}))
EOF
}
