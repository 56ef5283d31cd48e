"""``make demo`` (``python -m e2e.demo``): a local cluster with Kueue TAS and tasgate, in one command.

It starts the e2e harness's parts, each reused as the suites run them: the control plane
(kube-apiserver + etcd, e2e/controlplane.py), kube-controller-manager, kwok and the Coscheduling
scheduler with the scheduler-plugins controller (e2e/cluster.py), 8 kwok nodes of 8 GPUs in
2 blocks x 2 racks x 2 hosts, the real Kueue v0.19.2 (e2e/kueue.py) with the sample cluster's
Topology, ResourceFlavor, ClusterQueue and LocalQueues (e2e/demo_world.py), and ``tasgate serve``
in live mode behind both of its production webhook configurations (e2e/fidelity.py). Then it
applies four Jobs with the real kubectl and prints what kubectl answered (a denial with its
numbers, two admitted gangs that kwok runs, a must-wait warning; e2e/demo_steps.py), prints
``tasgate status -A``, and keeps the cluster up, with the kubeconfig path and tasgate's
``/topology`` URL printed, until Ctrl-C (or SIGTERM) stops everything and removes its files.

``--no-wait`` stops after the status instead (scripts, CI). The binaries come from
e2e/build-binaries.sh's cache; when they are missing the first run builds them with that script
(about 25 minutes on 2 cores, once), unless ``--no-build`` (then it exits 2 saying how to build).

Exit status: 0 after Ctrl-C / SIGTERM while up or after ``--no-wait``; 1 when a part fails or an
outcome is not the one the demo shows; 2 when binaries are missing under ``--no-build``; 130 when
interrupted before it printed the status.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from contextlib import ExitStack
from types import FrameType

import yaml

from e2e.cluster import Cluster, find_cluster_binaries
from e2e.controlplane import (
    BUILD_SCRIPT,
    BinariesMissingError,
    ControlPlane,
    ControlPlaneError,
    KubectlError,
    cache_bin_root,
    display_path,
    find_binaries,
)
from e2e.demo_steps import DemoCluster, DemoError, poll, say
from e2e.demo_world import (
    BLOCKS,
    HOSTS,
    NODE_ALLOCATABLE,
    RACKS,
    STEPS,
    kueue_objects,
    node_labels,
    node_names,
)
from e2e.fidelity import TasgateServer, tasgate_webhook_configurations
from e2e.kueue import Kueue, find_kueue, pinned_kueue_version

BUILD_ARGS = ("kube", "kueue", "cluster")  # what the demo runs; not helm or native
COLD_BUILD = "about 25 minutes on 2 cores, once"  # docs/e2e.md, "make demo"
READY_TIMEOUT = 60.0


class _Clock:
    start = time.monotonic()  # reset once the binaries are there: the stamps time the cluster alone


def stamp(text: str) -> None:
    say(f"[{time.monotonic() - _Clock.start:5.1f}s] {text}")


def ensure_binaries(build: bool) -> None:
    """The binaries the demo runs; missing ones built by build-binaries.sh (its output to stderr)."""
    try:
        find_binaries(), find_kueue(), find_cluster_binaries()
        return
    except BinariesMissingError:
        if not build:
            raise
    command = f"bash {display_path(BUILD_SCRIPT)} {' '.join(BUILD_ARGS)}"
    say(f"First run: building the e2e binaries with `{command}`")
    say(f"({COLD_BUILD}; cached in {cache_bin_root()} afterwards). Its progress goes to stderr.")
    built = subprocess.run(["bash", str(BUILD_SCRIPT), *BUILD_ARGS], stdout=sys.stderr, check=False)
    if built.returncode != 0:
        raise DemoError(f"build-binaries.sh exited {built.returncode} (its error is above)")
    find_binaries(), find_kueue(), find_cluster_binaries()


def start(stack: ExitStack) -> DemoCluster:
    """Every part up, in dependency order; each stopped by ``stack`` (newest first) however we leave."""
    cp = stack.enter_context(ControlPlane())
    stamp(f"control plane up: kube-apiserver {cp.server}, etcd {cp.etcd_url}")
    cluster = stack.enter_context(Cluster(cp))
    stamp("kube-controller-manager, kwok, Coscheduling scheduler and scheduler-plugins controller up")
    names = node_names()
    for name in names:
        cluster.add_node(name, NODE_ALLOCATABLE, node_labels(name))
    cluster.wait_nodes_ready(names)
    stamp(f"{len(names)} kwok nodes Ready: {BLOCKS} blocks x {RACKS} racks x {HOSTS} hosts, 8 GPUs each")
    kueue = stack.enter_context(Kueue(cp))
    cp.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(kueue_objects()))
    tasgate = TasgateServer(cp, cp.dir / "tasgate")
    stack.callback(tasgate.stop)
    demo = DemoCluster(cp, cluster, kueue, tasgate)
    poll("Kueue to activate ClusterQueue tas-cluster-queue", demo.cluster_queue_active, READY_TIMEOUT)
    stamp(
        f"Kueue {pinned_kueue_version()} up: Topology default, ResourceFlavor tas-flavor, "
        "ClusterQueue tas-cluster-queue, LocalQueue default/tas-user-queue"
    )
    poll("tasgate to sync and report ready", tasgate.ready, READY_TIMEOUT)
    hooks = tasgate_webhook_configurations(tasgate.port, tasgate.ca_bundle())
    cp.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(hooks))
    poll("the API server to call both of tasgate's webhooks", demo.webhooks_answer, READY_TIMEOUT)
    stamp(f"tasgate serve (live, default policy) behind its webhooks on https://localhost:{tasgate.port}")
    return demo


def show(demo: DemoCluster, wait: bool) -> None:
    """The steps, ``tasgate status -A``, where things are; then, with ``wait``, up until a signal."""
    for step in STEPS:
        demo.apply(step)
    say(f"\n$ tasgate status -A\n{demo.status().rstrip()}")
    demo.farewell(wait)
    if not wait:
        stamp("--no-wait: stopping the cluster")
        return
    try:
        while True:
            demo.check_alive()
            time.sleep(1.0)  # not a condition: how often a dead part is noticed while idle
    except KeyboardInterrupt:
        stamp("stopping the cluster")


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """The first Ctrl-C or SIGTERM stops the demo; later ones are ignored so shutdown completes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-wait", action="store_true", help="stop after the status (for scripts and CI)")
    parser.add_argument("--no-build", action="store_true", help="fail instead of building missing binaries")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        ensure_binaries(not args.no_build)
        _Clock.start = time.monotonic()
        with ExitStack() as stack:
            show(start(stack), wait=not args.no_wait)
        stamp("stopped")
        return 0
    except BinariesMissingError as exc:
        command = f"bash {display_path(BUILD_SCRIPT)} {' '.join(BUILD_ARGS)}"
        print(f"tasgate demo: {exc}\nThe demo needs all it builds: `{command}`.", file=sys.stderr)
        return 2
    except (DemoError, ControlPlaneError, KubectlError, AssertionError) as exc:  # harness waits assert
        print(f"tasgate demo: FAILED: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("tasgate demo: interrupted before it was done; stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
