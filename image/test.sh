#!/usr/bin/env bash
# Starts the image that image/build.sh built, without a Docker engine, and checks that it serves:
#
#   - its config (entrypoint, cmd, ports, user, env) is the contract of `image/build.sh --print-config`;
#   - it is unpacked with umoci into a bundle, and the image's entrypoint runs as the image's user
#     (65532), chrooted into the rootfs in private mount and PID namespaces (PID 1, as in a
#     container) with the root filesystem read-only and a tmpfs /tmp (as the Deployment runs it),
#     serving the embedded sample cluster with development certificates on 127.0.0.1 (static
#     mode, not --in-cluster) on free ports;
#   - /healthz and /readyz answer 200 over HTTPS (verified against the dev CA), /metrics 200 on the
#     metrics port, POST /mutate of examples/admission-review.json is allowed, and an audit line is
#     written; the compiled scorer is the one in use inside the image;
#   - SIGTERM stops it with exit status 0; nothing stays mounted.
#
# Every wait is bounded (TASGATE_IMAGE_TEST_TIMEOUT, 60 s); a failure says what and shows the logs.
# Needs root (chroot, mounts). Usage: image/test.sh
set -euo pipefail

me=test.sh
step="start"
# shellcheck source=image/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
timeout_s=${TASGATE_IMAGE_TEST_TIMEOUT:-60}
[[ $timeout_s =~ ^[0-9]+$ ]] || die "TASGATE_IMAGE_TEST_TIMEOUT must be whole seconds, not '$timeout_s'"

work="" server=""
cleanup() {
  if [[ -n $server ]] && kill -0 "$server" 2>/dev/null; then
    # unshare ignores SIGTERM while it waits; its SIGKILL takes the server along (--kill-child)
    kill -KILL "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
  fi
  [[ -z $work ]] || remove_tree "$work"
}
trap on_exit EXIT

t_start=$EPOCHREALTIME
step="checking for root and tools"
need_root "chroot and mounts"
ensure_tools umoci:umoci unshare:util-linux setpriv:util-linux flock:util-linux curl:curl chroot:coreutils
contract=$(bash "$repo/image/build.sh" --print-config)
tag=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["tag"][0])' "$contract")
lock_cache
step="finding the image"
[[ -f $layout/index.json ]] || die "no image layout at $layout: build it first (bash image/build.sh)"

step="checking the image config against the contract"
info=$(image_json "$layout" "$tag") || die "no image $tag in $layout: build it first (bash image/build.sh)"
python3 - "$info" "$contract" <<'EOF'
import json, sys
info, want = json.loads(sys.argv[1]), json.loads(sys.argv[2])
config = info["config"]["config"]
have = {
    "entrypoint": config.get("Entrypoint"),
    "cmd": config.get("Cmd"),
    "ports": sorted(p.split("/")[0] for p in config.get("ExposedPorts", {})),
    "user": [config.get("User")],
    "env": config.get("Env"),
}
bad = [f"{k}: image has {v!r}, the contract says {want[k]!r}" for k, v in have.items()
       if (sorted(want[k]) if k == "ports" else want[k]) != v]
if info["config"].get("os") != "linux" or info["config"].get("architecture") != "amd64":
    bad.append(f"platform {info['config'].get('os')}/{info['config'].get('architecture')}, want linux/amd64")
sys.exit("\n".join(bad) or None)
EOF
read -r digest entrypoint image_env image_user < <(python3 -c '
import json, sys
info = json.loads(sys.argv[1]); c = info["config"]["config"]
print(info["digest"], ",".join(c["Entrypoint"]), ",".join(c["Env"]), c["User"])' "$info")
[[ -n ${image_user:-} ]] || die "cannot read the entrypoint, env and user from the image config"
log "image $tag $digest"

work=$(mktemp -d "$cache_dir/test.XXXXXX")
step="unpacking the image (umoci unpack)"
t0=$EPOCHREALTIME
umoci unpack --image "$layout:$tag" "$work/bundle" >/dev/null
root="$work/bundle/rootfs"
t_unpack=$(since "$t0")
IFS=, read -r -a entrypoint <<<"$entrypoint"
export IN_ROOT_USER=$image_user IN_ROOT_RO=1 IN_ROOT_ENV="${image_env//,/ } HOME=/"

step="checking the compiled scorer inside the image"
in_root "$root" python3 -c "import scorer; assert scorer.IMPLEMENTATION == 'compiled', scorer.IMPLEMENTATION" \
  || die "the image's scorer is not the compiled one (python3 -c 'import scorer; ...' failed above)"

step="starting the server"
read -r port metrics_port < <(python3 -c '
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks: s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))')
IN_ROOT_EXEC=1 in_root "$root" "${entrypoint[@]}" serve --host 127.0.0.1 --port "$port" --metrics-port "$metrics_port" \
  --dev-cert-dir /tmp/certs >"$work/stdout.log" 2>"$work/stderr.log" &
server=$!
t0=$SECONDS t_serve=$EPOCHREALTIME
show_logs() {
  echo "--- server stderr (last 40 lines) ---" >&2; tail -n 40 "$work/stderr.log" >&2 || true
  echo "--- server stdout (last 10 lines) ---" >&2; tail -n 10 "$work/stdout.log" >&2 || true
}
fail() { show_logs; die "$*"; }

# The server is unshare's forked child, PID 1 of its namespace; its host PID reaches its files.
pid=""
until [[ -n $pid ]]; do
  kill -0 "$server" 2>/dev/null || fail "the server exited at once"
  pid=$(ps -o pid= --ppid "$server" | tr -d ' ' || true)
  (( SECONDS - t0 < timeout_s )) || fail "no server process after ${timeout_s}s"
  [[ -n $pid ]] || sleep 0.1
done
ca="/proc/$pid/root/tmp/certs/ca.crt"
url="https://127.0.0.1:$port"

wait_for() {  # wait_for PATH: until it answers 200 over HTTPS, or fail
  local path=$1 code=""
  while :; do
    kill -0 "$pid" 2>/dev/null || fail "the server exited while waiting for $path"
    if [[ -f $ca ]]; then
      code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 --cacert "$ca" "$url$path" || true)
      [[ $code == 200 ]] && return 0
    fi
    (( SECONDS - t0 < timeout_s )) || fail "$url$path did not answer 200 within ${timeout_s}s (last: ${code:-no answer})"
    sleep 0.2
  done
}
step="waiting for /healthz"
wait_for /healthz
step="waiting for /readyz"
wait_for /readyz
t_ready=$(since "$t_serve")
log "serving on $url after $t_ready: /healthz 200, /readyz 200"

step="checking the process: user $image_user, PID 1 of its namespace"
uids=$(awk '/^Uid:/ {print $2, $3, $4, $5}' "/proc/$pid/status")
[[ $uids == "${image_user%%:*} ${image_user%%:*} ${image_user%%:*} ${image_user%%:*}" ]] \
  || fail "the server runs with uids '$uids', not ${image_user%%:*}"
nspid=$(awk '/^NSpid:/ {print $NF}' "/proc/$pid/status")
[[ $nspid == 1 ]] || fail "the server is PID $nspid in its namespace, not 1"

step="checking /metrics on the metrics port"
metrics=$(curl -sS --fail --max-time 10 "http://127.0.0.1:$metrics_port/metrics") \
  || fail "GET http://127.0.0.1:$metrics_port/metrics failed"
grep -q '^tasgate_' <<<"$metrics" || fail "/metrics has no tasgate_ metric"

step="POST /mutate examples/admission-review.json"
answer=$(curl -sS --fail --max-time 20 --cacert "$ca" -H 'Content-Type: application/json' \
  --data-binary @"$repo/examples/admission-review.json" "$url/mutate?timeout=10s") \
  || fail "POST $url/mutate failed"
python3 -c '
import json, sys
review = json.loads(sys.argv[1])["response"]
sys.exit(None if review.get("allowed") is True else f"not allowed: {review}")' "$answer" \
  || fail "/mutate did not allow the sample review: $answer"
grep -q '"allowed":true' <<<"$answer" || fail "the answer lacks \"allowed\":true: $answer"
log "/metrics 200, /mutate allowed"

step="stopping the server (SIGTERM)"
t0=$SECONDS t_stop=$EPOCHREALTIME
kill -TERM "$pid"
while kill -0 "$server" 2>/dev/null; do
  (( SECONDS - t0 < timeout_s )) || fail "the server did not exit within ${timeout_s}s of SIGTERM"
  sleep 0.1
done
rc=0; wait "$server" || rc=$?
server=""
(( rc == 0 )) || fail "the server exited with status $rc after SIGTERM (want 0)"
grep -q 'tasgate.io/audit/v1' "$work/stdout.log" || fail "no audit line on stdout for the /mutate decision"
log "stopped by SIGTERM in $(since "$t_stop"), exit 0, audit line written"

step="cleaning up"
remove_tree "$work"; work=""
log "passed: $tag $digest (unpack $t_unpack, ready $t_ready, total $(since "$t_start"))"
step="done"
