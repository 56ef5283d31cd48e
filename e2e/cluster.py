"""The rest of a cluster around a running ControlPlane: kube-controller-manager, kwok, a gang scheduler.

Where gangs are followed after admission (``make e2e-cluster``, tests/e2e_cluster). Each component is a
plain process with the control plane's admin kubeconfig, wired the way CLUSTER_E2E.md (in shared/ beside
the checkout) found to work:

- **kube-controller-manager** v1.36.5 (``e2e/tools/kube``) with only the job, garbage-collector,
  node-lifecycle and namespace controllers: Jobs create Pods, owners' deletions cascade, the
  not-ready taint comes off Ready Nodes, namespaces finish deleting. No leader election, no HTTPS.
- **kwok** v0.8.0 (``e2e/tools/kwok``) managing every Node, with the stages node-initialize,
  node-heartbeat-with-lease, pod-ready and pod-delete from the kwok module's ``kustomize/stage``.
  ``pod-complete`` is left out on purpose, so Job Pods stay Running. ``--cidr`` keeps Pod IPs out of
  the harness's service range.
- **scheduler-plugins** v0.34.7's kube-scheduler (``e2e/tools/scheduler``) with Coscheduling in two
  profiles (``default-scheduler`` and ``scheduler-plugins-scheduler``, identical, because profiles
  must share a queue sort plugin), after the PodGroup CRD from ../shared/crds is installed. Pods
  join a gang with the label ``scheduling.x-k8s.io/pod-group: <PodGroup>``.
- the **scheduler-plugins controller** v0.34.7 (same module, ``cmd/controller``), after the
  ElasticQuota CRD is installed too (it reconciles both kinds and does not start without either).
  It writes what a real cluster shows in PodGroup ``status``: ``phase`` ("" → ``Pending`` →
  ``Scheduling`` once minMember pods exist → ``Running`` once minMember run; ``Finished``,
  ``Failed``), ``running``/``succeeded``/``failed`` counts, ``occupiedBy`` and
  ``scheduleStartTime``. v0.34.7 has no ``scheduled`` count and no ``PreScheduling``/``Scheduled``
  phases (older releases did). Leader election off, metrics and health servers off (``0``).

Usage::

    with ControlPlane() as cp, Cluster(cp) as cluster:
        cluster.add_node("n0")
        ...

Logs go to ``<cp.dir>/cluster/<name>.log`` (kube-controller-manager, kwok, kube-scheduler,
scheduler-plugins-controller). ``stop()`` (also ``__exit__`` and ``atexit``) stops them in reverse
start order. Missing binaries raise
``BinariesMissingError`` naming ``bash e2e/build-binaries.sh cluster``; nothing is skipped.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from e2e.controlplane import (
    BUILD_SCRIPT,
    TOOLS_DIR,
    VERSIONS_MARKER,
    BinariesMissingError,
    ControlPlane,
    ControlPlaneError,
    ServerProcess,
    cache_bin_root,
    display_path,
    pinned_versions,
    required_version,
)
from e2e.kueue import SHARED_CRDS, go_command, install_crds

KWOK_MODULE = "sigs.k8s.io/kwok"
SCHEDULER_MODULE = "sigs.k8s.io/scheduler-plugins"
CLUSTER_BIN_ENV = "TASGATE_E2E_CLUSTER_BIN"  # one directory holding all four binaries, trusted as is
KWOK_STAGES = (
    "kustomize/stage/node/fast/node-initialize.yaml",
    "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "kustomize/stage/pod/fast/pod-ready.yaml",
    "kustomize/stage/pod/fast/pod-delete.yaml",
)
KWOK_POD_CIDR = "10.244.0.1/16"  # the default 10.0.0.1/24 overlaps SERVICE_CLUSTER_IP_RANGE
CONTROLLERS = (
    "job-controller",
    "garbage-collector-controller",
    "node-lifecycle-controller",
    "namespace-controller",
)
PODGROUP_CRD = "scheduling.x-k8s.io_podgroups.yaml"
ELASTICQUOTA_CRD = "scheduling.x-k8s.io_elasticquotas.yaml"  # the controller watches it as well
# The controller's client defaults (qps 5, burst 10) throttle it to a patch pair every ~0.4 s;
# a test gang's pod events then take seconds to show in the PodGroup's status.
CONTROLLER_QPS, CONTROLLER_BURST = 50, 100
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
SCHEDULER_PROFILES = ("default-scheduler", "scheduler-plugins-scheduler")
PERMIT_WAITING_TIME_SECONDS = 10
DEFAULT_NODE_ALLOCATABLE: Mapping[str, str] = {"cpu": "2", "memory": "8Gi", "pods": "110"}
_START_GRACE = 1.0  # a component that exits on bad flags or config does so well within this


class ClusterError(ControlPlaneError):
    """A cluster component could not be started or died."""


# --- binaries -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterBinaries:
    kwok: Path
    kube_controller_manager: Path
    kube_scheduler: Path
    pod_group_controller: Path


def pinned_cluster_versions() -> dict[str, str]:
    """Versions from the wrapper go.mod files, the ones build-binaries.sh names its cache dirs after."""
    return {
        "kwok": required_version(TOOLS_DIR / "kwok" / "go.mod", KWOK_MODULE),
        "kubernetes": pinned_versions()[0],
        "scheduler-plugins": required_version(TOOLS_DIR / "scheduler" / "go.mod", SCHEDULER_MODULE),
    }


def cluster_cache_dirs() -> dict[str, Path]:
    """Binary name -> build-binaries.sh's cache directory for it (``cluster`` component)."""
    versions = pinned_cluster_versions()
    root = cache_bin_root()
    return {
        "kwok": root / f"kwok-{versions['kwok']}",
        "kube-controller-manager": root / f"kube-controller-manager-{versions['kubernetes']}",
        "kube-scheduler": root / f"scheduler-plugins-{versions['scheduler-plugins']}",
        "scheduler-plugins-controller": root / f"scheduler-plugins-{versions['scheduler-plugins']}",
    }


def find_cluster_binaries() -> ClusterBinaries:
    """kwok, kube-controller-manager, kube-scheduler and scheduler-plugins-controller from
    ``$TASGATE_E2E_CLUSTER_BIN`` or the cache."""
    override = os.environ.get(CLUSTER_BIN_ENV)
    dirs = cluster_cache_dirs()
    if override:
        dirs = dict.fromkeys(dirs, Path(override).expanduser())
    missing = []
    for name, directory in dirs.items():
        if not os.access(directory / name, os.X_OK):
            missing.append(str(directory / name))
        elif not override and not (directory / VERSIONS_MARKER).is_file():
            missing.append(f"{directory / VERSIONS_MARKER} (build-binaries.sh did not finish)")
    if missing:
        raise BinariesMissingError(
            f"cluster binaries missing: {', '.join(missing)}. Build them with "
            f"`bash {display_path(BUILD_SCRIPT)} cluster` (cold build: about 5 min on 2 cores; cached "
            f"afterwards), or set {CLUSTER_BIN_ENV} to a directory holding all four."
        )
    return ClusterBinaries(
        dirs["kwok"] / "kwok",
        dirs["kube-controller-manager"] / "kube-controller-manager",
        dirs["kube-scheduler"] / "kube-scheduler",
        dirs["scheduler-plugins-controller"] / "scheduler-plugins-controller",
    )


@functools.cache
def kwok_source_dir() -> Path:
    """The kwok module's directory in the Go module cache (offline once build-binaries.sh fetched it)."""
    version = pinned_cluster_versions()["kwok"]
    argv = [go_command(), "mod", "download", "-json", f"{KWOK_MODULE}@{version}"]
    cwd = TOOLS_DIR / "kwok"
    env = dict(os.environ, GOTOOLCHAIN="local")
    try:
        result = subprocess.run(
            argv, cwd=cwd, capture_output=True, text=True, env=env, timeout=600, check=False
        )
        info = json.loads(result.stdout or "{}")
    except (OSError, subprocess.TimeoutExpired, json.JSONDecodeError) as exc:
        raise ClusterError(f"{' '.join(argv)} (in {cwd}) failed: {exc}") from exc
    if result.returncode != 0 or info.get("Error") or not info.get("Dir"):
        detail = info.get("Error") or result.stderr.strip()
        raise ClusterError(f"{' '.join(argv)} (in {cwd}) exited {result.returncode}: {detail}")
    return Path(info["Dir"])


def kwok_stages_yaml(source: Path | None = None) -> str:
    """The four stages as one multi-document YAML (kwok's ``--config``; the Stage CRD is not needed)."""
    source = source or kwok_source_dir()
    docs = []
    for relative in KWOK_STAGES:
        path = source / relative
        try:
            docs.append(path.read_text().strip())
        except OSError as exc:
            raise ClusterError(f"kwok stage {path} cannot be read: {exc}") from exc
    return "\n---\n".join(docs) + "\n"


def scheduler_configuration(kubeconfig: Path) -> dict[str, Any]:
    """KubeSchedulerConfiguration with Coscheduling (queue sort and multiPoint) in every profile."""
    profile_plugins = {
        "multiPoint": {"enabled": [{"name": "Coscheduling"}]},
        "queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]},
    }
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "profiles": [
            {
                "schedulerName": name,
                "plugins": profile_plugins,
                "pluginConfig": [
                    {
                        "name": "Coscheduling",
                        "args": {"permitWaitingTimeSeconds": PERMIT_WAITING_TIME_SECONDS},
                    }
                ],
            }
            for name in SCHEDULER_PROFILES
        ],
    }


# --- the components -------------------------------------------------------------------------------


class Cluster:
    """kube-controller-manager, kwok, the Coscheduling scheduler and the PodGroup controller against
    ``cp`` (which must run)."""

    def __init__(self, cp: ControlPlane, *, binaries: ClusterBinaries | None = None) -> None:
        self.cp = cp
        self.binaries = binaries or find_cluster_binaries()  # fail before any process starts
        self._processes: list[ServerProcess] = []
        self._atexit = False

    @property
    def dir(self) -> Path:
        return self.cp.dir / "cluster"

    def log_path(self, name: str) -> Path:
        return self.dir / f"{name}.log"

    def __enter__(self) -> Cluster:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> None:
        """kwok, kube-controller-manager, the CRDs, the scheduler, then the PodGroup controller."""
        if not self.cp.running():
            raise ClusterError("the control plane is not running")
        self.dir.mkdir(parents=True, exist_ok=True)
        if not self._atexit:
            atexit.register(self.stop)
            self._atexit = True
        try:
            stages = self.dir / "kwok-stages.yaml"
            stages.write_text(kwok_stages_yaml())
            self._launch("kwok", self._kwok_argv(stages))
            self._launch("kube-controller-manager", self._kcm_argv())
            install_crds(self.cp, [SHARED_CRDS / PODGROUP_CRD, SHARED_CRDS / ELASTICQUOTA_CRD])
            config = self.dir / "scheduler-config.yaml"
            config.write_text(yaml.safe_dump(scheduler_configuration(self.cp.kubeconfig), sort_keys=False))
            self._launch(
                "kube-scheduler", [str(self.binaries.kube_scheduler), f"--config={config}", "--secure-port=0"]
            )
            self._launch("scheduler-plugins-controller", self._controller_argv())
            time.sleep(_START_GRACE)
            self.check_alive()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """SIGTERM each component (SIGKILL after 15 s), newest first; safe to call twice."""
        while self._processes:
            self._processes.pop().stop()

    def running(self) -> dict[str, bool]:
        return {process.name: process.running() for process in self._processes}

    def pid(self, name: str) -> int:
        """The process id of the running component ``name``."""
        for process in self._processes:
            if process.name == name and process.pid is not None and process.running():
                return process.pid
        raise ClusterError(f"{name} is not running")

    def check_alive(self) -> None:
        """Raise ``ClusterError`` with the log tail of the first component that exited."""
        for process in self._processes:
            code = process.exit_code()
            if code is not None:
                raise ClusterError(
                    f"{process.name} exited with {code}; last lines of {process.log_path}:\n{process.tail()}"
                )

    def _launch(self, name: str, argv: Sequence[str]) -> None:
        process = ServerProcess(name, self.log_path(name))
        env = dict(os.environ, KUBECONFIG=str(self.cp.kubeconfig), NO_PROXY="127.0.0.1,localhost")
        env["no_proxy"] = env["NO_PROXY"]
        process.start(argv, env)
        self._processes.append(process)

    def _kwok_argv(self, stages: Path) -> list[str]:
        return [
            str(self.binaries.kwok),
            f"--kubeconfig={self.cp.kubeconfig}",
            f"--config={stages}",  # always explicit: the default ~/.kwok/kwok.yaml is read if it exists
            "--manage-all-nodes=true",
            "--node-lease-duration-seconds=40",
            f"--cidr={KWOK_POD_CIDR}",
        ]

    def _kcm_argv(self) -> list[str]:
        return [
            str(self.binaries.kube_controller_manager),
            f"--kubeconfig={self.cp.kubeconfig}",
            "--leader-elect=false",
            "--use-service-account-credentials=false",
            "--secure-port=0",
            f"--service-account-private-key-file={self.cp.dir / 'pki' / 'sa.key'}",
            f"--root-ca-file={self.cp.ca_path}",
            f"--controllers={','.join(CONTROLLERS)}",
        ]

    def _controller_argv(self) -> list[str]:
        return [
            str(self.binaries.pod_group_controller),
            f"--kubeconfig={self.cp.kubeconfig}",
            "--metricsAddr=0",  # controller-runtime: "0" serves no metrics (default :8080)
            "--probeAddr=0",  # and no health probes (default :8081)
            f"--qps={CONTROLLER_QPS}",
            f"--burst={CONTROLLER_BURST}",
        ]  # leader election is off unless --enableLeaderElection

    # -- objects --

    def add_node(
        self,
        name: str,
        allocatable: Mapping[str, str] = DEFAULT_NODE_ALLOCATABLE,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        """Create a Node for kwok to run (capacity = allocatable, extra ``labels`` such as topology
        levels and a flavor's node labels); kwok makes it Ready."""
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {"kubernetes.io/hostname": name, "type": "kwok", **(labels or {})},
                "annotations": {"kwok.x-k8s.io/node": "fake"},
            },
            "status": {"capacity": dict(allocatable), "allocatable": dict(allocatable)},
        }
        self.cp.kubectl("create", "-f", "-", input=json.dumps(node))

    def wait_nodes_ready(self, names: Sequence[str], timeout: float = 60.0) -> None:
        """Until every named Node is Ready and has lost the not-ready taint (what a scheduler needs)."""
        deadline = time.monotonic() + timeout
        while True:
            self.check_alive()
            pending = []
            for node in self.cp.kubectl_json("get", "nodes")["items"]:
                if node["metadata"]["name"] not in names:
                    continue
                ready = any(
                    c.get("type") == "Ready" and c.get("status") == "True"
                    for c in node.get("status", {}).get("conditions", [])
                )
                tainted = any(
                    t.get("key") == "node.kubernetes.io/not-ready" for t in node["spec"].get("taints", [])
                )
                if not ready or tainted:
                    pending.append(f"{node['metadata']['name']} (ready={ready}, not-ready taint={tainted})")
            seen = {n["metadata"]["name"] for n in self.cp.kubectl_json("get", "nodes")["items"]}
            pending += [f"{name} (absent)" for name in names if name not in seen]
            if not pending:
                return
            if time.monotonic() > deadline:
                raise ClusterError(f"nodes not Ready after {timeout:g}s: {', '.join(pending)}")
            time.sleep(0.2)


def pod_group(name: str, namespace: str, min_member: int) -> dict[str, Any]:
    """A scheduling.x-k8s.io/v1alpha1 PodGroup."""
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"minMember": min_member},
    }


if __name__ == "__main__":  # python -m e2e.cluster: a control plane with 2 kwok nodes until Ctrl-C
    with ControlPlane(keep=True) as cp, Cluster(cp) as cluster:
        cluster.add_node("kwok-0")
        cluster.add_node("kwok-1")
        cluster.wait_nodes_ready(["kwok-0", "kwok-1"])
        print(f"export KUBECONFIG={cp.kubeconfig}  # logs in {cluster.dir}; Ctrl-C stops", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
