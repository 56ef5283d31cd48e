"""Which Kubernetes the native-scheduling harness runs: v1.36.5 (the default) or v1.37.0.

``TASGATE_NATIVE_K8S`` picks it (``v1.36.5`` when unset, so ``make e2e-native`` and the table stay
as they were; ``TASGATE_NATIVE_K8S=v1.37.0`` runs the same harness on v1.37). Each version is a
``NativeK8s`` profile: the wrapper module its binaries are built from (the version is read from that
go.mod, the single source of truth build-binaries.sh reads too), the feature gates and served API
versions the native gang APIs need there, and the few names that moved between the two.

v1.36.5: ``scheduling.k8s.io/v1alpha2`` Workload and PodGroup; gates GenericWorkload,
GangScheduling, TopologyAwareWorkloadScheduling, WorkloadWithJob; the scheduler's PodGroup
condition is ``PodGroupScheduled``; a PodGroup names its template in
``spec.podGroupTemplateRef.workload.{workloadName,podGroupTemplateName}``; the Job controller makes
a gang of an Indexed Job with ``parallelism == completions > 1``.

v1.37.0 (docs/native-v137.md): Workload and PodGroup in ``scheduling.k8s.io/v1beta1`` (beta,
still off by default: ``--runtime-config``), CompositePodGroup in ``scheduling.k8s.io/v1alpha3``
(which also serves Workload and PodGroup); ``v1alpha2`` is gone. The GangScheduling gate is gone
(gang scheduling comes with GenericWorkload); new gates CompositePodGroup and
PodGroupPreemptionPolicy. The condition is ``PodGroupInitiallyScheduled``, the template reference
``spec.workloadRef.{workloadName,templateName}``, and a Job is a gang only when it says so in
``spec.scheduling.schedulingPolicy.gang`` (basic otherwise).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from e2e.binaries import TOOLS_DIR, ControlPlaneError, required_version

NATIVE_K8S_ENV = "TASGATE_NATIVE_K8S"
KUBE_MODULE = "k8s.io/kubernetes"


@dataclass(frozen=True)
class NativeK8s:
    """One Kubernetes version of the native harness and what it needs to serve the gang APIs."""

    minor: int
    tools: str  # e2e/tools/<tools>/go.mod pins k8s.io/kubernetes for this profile
    build_target: str  # `bash e2e/build-binaries.sh <build_target>` builds its binaries
    feature_gates: tuple[str, ...]
    scheduling_api: str  # the group/version of Workload and PodGroup the harness writes
    served_apis: tuple[str, ...]  # --runtime-config entries (alpha/beta versions are off by default)
    composite_api: str | None  # the group/version serving CompositePodGroup (None: no such kind)
    scheduled_condition: str  # the PodGroup condition type the scheduler writes
    job_gang_opt_in: bool  # a Job is a gang only with spec.scheduling.schedulingPolicy.gang
    # --vmodule=scheduling_queue=N: 4 logs PreEnqueue's verdicts; v1.37 holds a pod whose group is not
    # there yet out of the queue without PreEnqueue (incompletePodGroupPods) and says so only at 5.
    queue_verbosity: int

    @property
    def version(self) -> str:
        """The k8s.io/kubernetes version the profile's wrapper module pins (e.g. ``v1.37.0``)."""
        return required_version(TOOLS_DIR / self.tools / "go.mod", KUBE_MODULE)

    @property
    def feature_gates_flag(self) -> str:
        return "--feature-gates=" + ",".join(f"{gate}=true" for gate in self.feature_gates)

    @property
    def runtime_config_flag(self) -> str:
        return "--runtime-config=" + ",".join(f"{api}=true" for api in self.served_apis)

    @property
    def apiserver_args(self) -> tuple[str, str]:
        return (self.feature_gates_flag, self.runtime_config_flag)

    def template_ref(self, workload: str, template: str) -> dict[str, object]:
        """A PodGroup's ``spec`` entry naming the Workload template it was made from."""
        if self.minor >= 37:
            return {"workloadRef": {"workloadName": workload, "templateName": template}}
        ref = {"workloadName": workload, "podGroupTemplateName": template}
        return {"podGroupTemplateRef": {"workload": ref}}


V1_36 = NativeK8s(
    minor=36,
    tools="kube",
    build_target="native",
    feature_gates=("GenericWorkload", "GangScheduling", "TopologyAwareWorkloadScheduling", "WorkloadWithJob"),
    scheduling_api="scheduling.k8s.io/v1alpha2",
    served_apis=("scheduling.k8s.io/v1alpha2",),
    composite_api=None,
    scheduled_condition="PodGroupScheduled",
    job_gang_opt_in=False,
    queue_verbosity=4,
)
V1_37 = NativeK8s(
    minor=37,
    tools="kube137",
    build_target="native137",
    feature_gates=(
        "GenericWorkload",
        "TopologyAwareWorkloadScheduling",
        "WorkloadWithJob",
        "CompositePodGroup",
        "PodGroupPreemptionPolicy",
    ),
    scheduling_api="scheduling.k8s.io/v1beta1",
    served_apis=("scheduling.k8s.io/v1beta1", "scheduling.k8s.io/v1alpha3"),
    composite_api="scheduling.k8s.io/v1alpha3",
    scheduled_condition="PodGroupInitiallyScheduled",
    job_gang_opt_in=True,
    queue_verbosity=5,
)
PROFILES = (V1_36, V1_37)
# Every condition type a scheduler of some profile writes on a PodGroup (a PodGroup carries one).
SCHEDULED_CONDITIONS = tuple(p.scheduled_condition for p in PROFILES)


def native_k8s(version: str | None = None) -> NativeK8s:
    """The profile for ``version`` (``v1.37.0``, ``1.37``, ``v1.36.5`` ...), else ``$TASGATE_NATIVE_K8S``,
    else v1.36.5. A version naming a minor with a profile but another patch than its wrapper module
    pins is an error: the harness runs exactly the binaries build-binaries.sh builds."""
    wanted = (version or os.environ.get(NATIVE_K8S_ENV) or "").strip()
    if not wanted:
        return V1_36
    parts = wanted.removeprefix("v").split(".")
    try:
        major, minor = int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        raise ControlPlaneError(
            f"{NATIVE_K8S_ENV}={wanted!r}: want a Kubernetes version such as v1.37.0"
        ) from None
    for profile in PROFILES:
        if (major, minor) == (1, profile.minor):
            pinned = profile.version
            if len(parts) > 2 and f"v{wanted.removeprefix('v')}" != pinned:
                raise ControlPlaneError(
                    f"{NATIVE_K8S_ENV}={wanted}: the harness pins {pinned} for 1.{minor} "
                    f"(e2e/tools/{profile.tools}/go.mod)"
                )
            return profile
    known = ", ".join(p.version for p in PROFILES)
    raise ControlPlaneError(f"{NATIVE_K8S_ENV}={wanted}: no native profile for it (known: {known})")


def profile_cache_dirs(profile: NativeK8s, root: Path) -> dict[str, Path]:
    """Binary name -> the cache directory build-binaries.sh's target for ``profile`` fills (kwok
    aside: it is the same for every profile). Same names as the script computes."""
    kube = profile.version
    etcd = required_version(TOOLS_DIR / "etcd" / "go.mod", "go.etcd.io/etcd/server/v3")
    return {
        "kube-apiserver": root / f"kube-{kube}_etcd-{etcd}",
        "kube-controller-manager": root / f"kube-controller-manager-{kube}",
        "kube-scheduler": root / f"kube-scheduler-{kube}",
    }
