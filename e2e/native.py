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

``TASGATE_NATIVE_K8S=v1.37.0`` runs the same harness on Kubernetes v1.37.0 instead (``bash
e2e/build-binaries.sh native137``; e2e/native_k8s.py has what differs: the gates, the served
``scheduling.k8s.io/v1beta1`` and ``v1alpha3``, the condition name). The module-level names below
are the selected profile's (v1.36.5 when the variable is unset); every function and class also
takes ``k8s=`` to run one explicitly (tests/e2e_native/test_v137_smoke.py always runs v1.37.0).
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
    Binaries,
    BinariesMissingError,
    ControlPlane,
    cache_bin_root,
    display_path,
    find_binaries,
)
from e2e.native_cache import scheduler_cache
from e2e.native_k8s import SCHEDULED_CONDITIONS, V1_36, NativeK8s, native_k8s, profile_cache_dirs

K8S = native_k8s()  # $TASGATE_NATIVE_K8S, v1.36.5 when unset
FEATURE_GATES = K8S.feature_gates
FEATURE_GATES_FLAG = K8S.feature_gates_flag
SCHEDULING_API = K8S.scheduling_api
APISERVER_ARGS = K8S.apiserver_args
NATIVE_CONTROLLERS = (*CONTROLLERS, "podgroup-protection-controller")
NATIVE_BIN_ENV = "TASGATE_E2E_NATIVE_BIN"  # one directory holding kwok, kcm and kube-scheduler
POD_GROUPS = "podgroups.scheduling.k8s.io"
WORKLOADS = "workloads.scheduling.k8s.io"
COMPOSITE_POD_GROUPS = "compositepodgroups.scheduling.k8s.io"  # v1.37 (scheduling.k8s.io/v1alpha3)
# The scheduler's defaults are 1 s and 10 s; a group that waits for capacity is retried on the
# pod-deleted event, but a backoff still running delays it. 1 s keeps a must-wait row short.
POD_MAX_BACKOFF_SECONDS = 1


@dataclass(frozen=True)
class NativeBinaries:
    kwok: Path
    kube_controller_manager: Path
    kube_scheduler: Path


def native_cache_dirs(k8s: NativeK8s = K8S) -> dict[str, Path]:
    """Binary name -> build-binaries.sh's cache directory for it (``native`` / ``native137``)."""
    dirs = profile_cache_dirs(k8s, cache_bin_root())
    return {
        "kwok": cluster_cache_dirs()["kwok"],
        "kube-controller-manager": dirs["kube-controller-manager"],
        "kube-scheduler": dirs["kube-scheduler"],
    }


def find_native_binaries(k8s: NativeK8s = K8S) -> NativeBinaries:
    """kwok, kube-controller-manager and the upstream kube-scheduler, from the cache or the override."""
    override = os.environ.get(NATIVE_BIN_ENV)
    dirs = native_cache_dirs(k8s)
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
            f"`bash {display_path(BUILD_SCRIPT)} {k8s.build_target}` (about 30 s with a warm Go build "
            f"cache, minutes cold), or set {NATIVE_BIN_ENV} to a directory holding all three."
        )
    return NativeBinaries(
        dirs["kwok"] / "kwok",
        dirs["kube-controller-manager"] / "kube-controller-manager",
        dirs["kube-scheduler"] / "kube-scheduler",
    )


def find_control_plane_binaries(k8s: NativeK8s = K8S) -> Binaries:
    """kube-apiserver, kubectl and etcd of ``k8s``: v1.36.5's are the suite's usual ones
    (``find_binaries``, ``$TASGATE_E2E_BIN`` aware); another profile's come from the cache directory
    its build-binaries.sh target fills, VERSIONS marker included."""
    if k8s == V1_36:
        return find_binaries()
    directory = profile_cache_dirs(k8s, cache_bin_root())["kube-apiserver"]
    names = ("kube-apiserver", "kubectl", "etcd")
    missing = [str(directory / n) for n in names if not os.access(directory / n, os.X_OK)]
    if not missing and not (directory / VERSIONS_MARKER).is_file():
        missing.append(f"{directory / VERSIONS_MARKER} (build-binaries.sh did not finish)")
    if missing:
        raise BinariesMissingError(
            f"Kubernetes {k8s.version} control-plane binaries missing: {', '.join(missing)}. Build them "
            f"with `bash {display_path(BUILD_SCRIPT)} {k8s.build_target}` (tens of minutes cold on 2 cores)."
        )
    return Binaries(directory, directory / "kube-apiserver", directory / "kubectl", directory / "etcd")


def native_control_plane(k8s: NativeK8s = K8S, **kwargs: Any) -> ControlPlane:
    """A ControlPlane of ``k8s``'s version whose API server has its gates and serves its native
    scheduling APIs (v1.36.5: scheduling.k8s.io/v1alpha2; v1.37.0: v1beta1 and v1alpha3)."""
    extra = list(kwargs.pop("apiserver_args", ()))
    binaries = kwargs.pop("binaries", None) or find_control_plane_binaries(k8s)
    return ControlPlane(apiserver_args=[*k8s.apiserver_args, *extra], binaries=binaries, **kwargs)


def scheduler_configuration(kubeconfig: Path) -> dict[str, Any]:
    """The default profile as the scheduler builds it with the gates on; only the backoff is shortened."""
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

    def __init__(
        self, cp: ControlPlane, *, binaries: NativeBinaries | None = None, k8s: NativeK8s = K8S
    ) -> None:
        self.k8s = k8s
        self.native = binaries or find_native_binaries(k8s)  # fail before any process starts
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
            # v1.37 (queue_verbosity 5) also logs each pod it parks until its PodGroup exists.
            f"--vmodule=scheduling_queue={self.k8s.queue_verbosity}",
            self.k8s.feature_gates_flag,
        ]

    def scheduler_cache(self) -> dict[str, str]:
        """The pods the scheduler's cache holds ("namespace/name" -> node), from its own dump."""
        return scheduler_cache(self.pid("kube-scheduler"), self.log_path("kube-scheduler"))

    def _kcm_argv(self) -> list[str]:
        argv = [a for a in super()._kcm_argv() if not a.startswith("--controllers=")]
        return [*argv, f"--controllers={','.join(NATIVE_CONTROLLERS)}", self.k8s.feature_gates_flag]

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
    """The condition the scheduler writes on a PodGroup after a cycle (None before its first):
    ``PodGroupScheduled`` in v1.36, ``PodGroupInitiallyScheduled`` in v1.37."""
    for condition in pod_group_conditions(obj):
        if condition.get("type") in SCHEDULED_CONDITIONS:
            return condition
    return None


def kinds_for_state(k8s: NativeK8s = K8S) -> Sequence[str]:
    """The kinds a ``--state`` dump of a native cluster holds (docs/cli.md's list plus the native
    API; v1.37 adds CompositePodGroups)."""
    native = f"{POD_GROUPS},{WORKLOADS},jobs"
    if k8s.composite_api is not None:
        native = f"{POD_GROUPS},{COMPOSITE_POD_GROUPS},{WORKLOADS},jobs"
    return ("nodes,pods,namespaces,limitranges,priorityclasses", native)


if __name__ == "__main__":  # python -m e2e.native: the scheduler configuration as v1.36.5 fills it in
    with native_control_plane() as plane, NativeCluster(plane) as native:
        print(native.effective_scheduler_config(), end="")
