"""Native Kubernetes v1.36 gang + topology scheduling around a ControlPlane (``make e2e-native``).

Kubernetes v1.36 schedules gangs itself: ``scheduling.k8s.io/v1alpha2`` Workloads (static
``podGroupTemplates``) and PodGroups (the runtime group a Pod names in ``spec.schedulingGroup``),
placed by the kube-scheduler's PodGroup cycle. tasgate's native mode predicts that cycle, so this
module runs the real one: the same control plane as every suite (``e2e/controlplane.py``) with the
four feature gates on and the alpha API served, plus

- **kube-controller-manager** v1.36.5 with the gates: its Job controller creates a Workload and a
  PodGroup for an Indexed Job with ``parallelism == completions > 1`` (``WorkloadWithJob``), and
  the podgroup-protection controller keeps a PodGroup while its pods exist;
- **kwok** v0.8.0 playing the kubelets (``e2e/cluster.py``'s stages: bound pods run, Job pods are
  never completed);
- the **upstream kube-scheduler** v1.36.5 (``bash e2e/build-binaries.sh native``) with the gates and
  its default plugins: with ``GangScheduling`` and ``TopologyAwareWorkloadScheduling`` on, the
  v1.36.5 defaults (pkg/scheduler/apis/config/v1/default_plugins.go) already add GangScheduling,
  TopologyPlacementGenerator and PodGroupPodsCount to the default profile, so the configuration only
  turns leader election off, names the kubeconfig and shortens the backoff (a must-wait group is
  retried within seconds of capacity freeing, not after up to 10 s).

The placement it makes is the scheduler's own, no plugin weights changed: that is what a cluster
running v1.36.5 with these gates does and what tasgate must predict. Missing binaries raise
``BinariesMissingError`` naming the build command; nothing is skipped.
"""

from __future__ import annotations

import atexit
import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from e2e.cluster import (
    CONTROLLERS,
    Cluster,
    ClusterBinaries,
    ClusterError,
    cluster_cache_dirs,
    kwok_stages_yaml,
)
from e2e.controlplane import (
    BUILD_SCRIPT,
    VERSIONS_MARKER,
    BinariesMissingError,
    ControlPlane,
    cache_bin_root,
    display_path,
    pinned_versions,
)
from e2e.native_cache import scheduler_cache

FEATURE_GATES = ("GenericWorkload", "GangScheduling", "TopologyAwareWorkloadScheduling", "WorkloadWithJob")
FEATURE_GATES_FLAG = "--feature-gates=" + ",".join(f"{gate}=true" for gate in FEATURE_GATES)
SCHEDULING_API = "scheduling.k8s.io/v1alpha2"
APISERVER_ARGS = (FEATURE_GATES_FLAG, f"--runtime-config={SCHEDULING_API}=true")
NATIVE_CONTROLLERS = (*CONTROLLERS, "podgroup-protection-controller")
NATIVE_BIN_ENV = "TASGATE_E2E_NATIVE_BIN"  # one directory holding kwok, kcm and kube-scheduler
POD_GROUPS = "podgroups.scheduling.k8s.io"
WORKLOADS = "workloads.scheduling.k8s.io"
# The scheduler's defaults are 1 s and 10 s; a group that waits for capacity is retried on the
# pod-deleted event, but a backoff still running delays it. 1 s keeps a must-wait row short.
POD_MAX_BACKOFF_SECONDS = 1


@dataclass(frozen=True)
class NativeBinaries:
    kwok: Path
    kube_controller_manager: Path
    kube_scheduler: Path


def native_cache_dirs() -> dict[str, Path]:
    """Binary name -> build-binaries.sh's cache directory for it (``native`` component)."""
    dirs = cluster_cache_dirs()
    return {
        "kwok": dirs["kwok"],
        "kube-controller-manager": dirs["kube-controller-manager"],
        "kube-scheduler": cache_bin_root() / f"kube-scheduler-{pinned_versions()[0]}",
    }


def find_native_binaries() -> NativeBinaries:
    """kwok, kube-controller-manager and the upstream kube-scheduler, from the cache or the override."""
    override = os.environ.get(NATIVE_BIN_ENV)
    dirs = native_cache_dirs()
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
            f"native scheduling binaries missing: {', '.join(missing)}. Build them with "
            f"`bash {display_path(BUILD_SCRIPT)} native` (about 30 s with a warm Go build cache, "
            f"minutes cold), or set {NATIVE_BIN_ENV} to a directory holding all three."
        )
    return NativeBinaries(
        dirs["kwok"] / "kwok",
        dirs["kube-controller-manager"] / "kube-controller-manager",
        dirs["kube-scheduler"] / "kube-scheduler",
    )


def native_control_plane(**kwargs: Any) -> ControlPlane:
    """A ControlPlane whose API server has the four gates and serves scheduling.k8s.io/v1alpha2."""
    extra = list(kwargs.pop("apiserver_args", ()))
    return ControlPlane(apiserver_args=[*APISERVER_ARGS, *extra], **kwargs)


def scheduler_configuration(kubeconfig: Path) -> dict[str, Any]:
    """The default profile as v1.36.5 builds it with the gates on; only the backoff is shortened."""
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "podInitialBackoffSeconds": 1,
        "podMaxBackoffSeconds": POD_MAX_BACKOFF_SECONDS,
        "profiles": [{"schedulerName": "default-scheduler"}],
    }


class NativeCluster(Cluster):
    """kwok, kube-controller-manager (Job → Workload + PodGroup) and the upstream kube-scheduler.

    Reuses ``Cluster``'s process handling, nodes and kwok wiring; what differs is the scheduler, the
    gates and that no CRD or PodGroup controller is involved (PodGroup is a built-in API here).
    """

    def __init__(self, cp: ControlPlane, *, binaries: NativeBinaries | None = None) -> None:
        self.native = binaries or find_native_binaries()  # fail before any process starts
        # The scheduler-plugins controller slot is never started by this class (see start()).
        unused = Path(os.devnull)
        parts = ClusterBinaries(self.native.kwok, self.native.kube_controller_manager, unused, unused)
        super().__init__(cp, binaries=parts)

    def __enter__(self) -> NativeCluster:
        self.start()
        return self

    def start(self) -> None:
        """kwok, kube-controller-manager, then the scheduler; raise with a log tail if one dies."""
        if not self.cp.running():
            raise ClusterError("the control plane is not running")
        self.dir.mkdir(parents=True, exist_ok=True)
        self._register_atexit()
        try:
            stages = self.dir / "kwok-stages.yaml"
            stages.write_text(kwok_stages_yaml())
            self._launch("kwok", self._kwok_argv(stages))
            self._launch("kube-controller-manager", self._kcm_argv())
            self._launch("kube-scheduler", self.scheduler_argv())
            time.sleep(1.0)
            self.check_alive()
        except BaseException:
            self.stop()
            raise

    def _register_atexit(self) -> None:
        if not self._atexit:
            atexit.register(self.stop)
            self._atexit = True

    @property
    def scheduler_config(self) -> Path:
        return self.dir / "scheduler-config.yaml"

    def scheduler_argv(self) -> list[str]:
        self.scheduler_config.write_text(
            yaml.safe_dump(scheduler_configuration(self.cp.kubeconfig), sort_keys=False)
        )
        return [
            str(self.native.kube_scheduler),
            f"--config={self.scheduler_config}",
            "--secure-port=0",
            # v=2 logs one "Unable to schedule a pod group" / "Successfully scheduled a pod group"
            # line per PodGroup cycle: how the suite counts the cycles a never-fit group went through.
            "--v=2",
            # scheduling_queue at 4 adds its "Status after running PreEnqueue plugin" line: a gang
            # GangScheduling keeps out of the queue ("waiting for minCount pods ... to appear") gets
            # no cycle, no condition and no event, and that line is the scheduler's only word on it.
            "--vmodule=scheduling_queue=4",
            FEATURE_GATES_FLAG,
        ]

    def scheduler_cache(self) -> dict[str, str]:
        """The pods the scheduler's cache holds ("namespace/name" -> node), from its own dump."""
        return scheduler_cache(self.pid("kube-scheduler"), self.log_path("kube-scheduler"))

    def _kcm_argv(self) -> list[str]:
        argv = [a for a in super()._kcm_argv() if not a.startswith("--controllers=")]
        return [*argv, f"--controllers={','.join(NATIVE_CONTROLLERS)}", FEATURE_GATES_FLAG]

    def effective_scheduler_config(self) -> str:
        """What the scheduler makes of our configuration (``--write-config-to``: defaults filled in)."""
        out = self.dir / "scheduler-effective-config.yaml"
        argv = [*self.scheduler_argv(), f"--write-config-to={out}"]
        run = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        if run.returncode != 0 or not out.exists():
            raise ClusterError(f"{' '.join(argv)} exited {run.returncode}: {run.stderr[-2000:]}")
        return out.read_text()


def pod_group_conditions(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list((obj.get("status") or {}).get("conditions") or [])


def scheduled_condition(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """The PodGroupScheduled condition the scheduler writes on a PodGroup (None before its first cycle)."""
    for condition in pod_group_conditions(obj):
        if condition.get("type") == "PodGroupScheduled":
            return condition
    return None


def kinds_for_state() -> Sequence[str]:
    """The kinds a ``--state`` dump of a native cluster holds (docs/cli.md's list plus the native API)."""
    return ("nodes,pods,namespaces,limitranges,priorityclasses", f"{POD_GROUPS},{WORKLOADS},jobs")


if __name__ == "__main__":  # python -m e2e.native: the scheduler configuration as v1.36.5 fills it in
    with native_control_plane() as plane, NativeCluster(plane) as native:
        print(native.effective_scheduler_config(), end="")
