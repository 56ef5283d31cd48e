"""What live mode watches: each kind, how to list it, and whether its absence is tolerated.

One list (``kinds``) says it for the Mirror, for ``tasgate check --live`` (which lists the same
kinds once) and for the dump commands the docs print (``cli.dump``), so the offline verdict and
the webhook's are made on the same kinds of objects.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubernetes_asyncio import client

from webhook.decide.gangs import GANG_BACKENDS
from webhook.state.kueue_manager import SELECTOR as KUEUE_SELECTOR

LIVE_POD_SELECTOR = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
KUEUE = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta2"
# The kinds that only say whether each gang backend's PodGroup CRD is served (`decide.gangs`).
GANG_CRD_KINDS = frozenset(b.served_kind for b in GANG_BACKENDS.values())
DEPLOYMENTS, CONFIG_MAPS = "deployments", "configmaps"  # Kueue's own, by label (`KUEUE_SELECTOR`)
TRAINER_GROUP, TRAINER_VERSION = "trainer.kubeflow.org", "v1alpha1"
TRAINER = f"{TRAINER_GROUP}/{TRAINER_VERSION}"

Lister = Callable[..., Awaitable[Any]]


@dataclass(frozen=True)
class Kind:
    """One watched resource: how to list it and whether its absence is tolerated."""

    name: str
    api_version: str
    kind: str
    lister: Callable[[client.ApiClient], Lister]
    optional: bool = False
    kwargs: Mapping[str, str] = field(default_factory=dict)
    # A 403 reads as "not served" too: for kinds only a report needs (the Kueue release), which a
    # narrower RBAC than tasgate's own may withhold without keeping a replica unready.
    forbidden_ok: bool = False


def custom_lister(group: str, version: str, plural: str) -> Callable[[client.ApiClient], Lister]:
    """The cluster-wide list (and watch) call of one custom resource."""

    def make(api: client.ApiClient) -> Lister:
        objects = client.CustomObjectsApi(api)

        async def call(**kw: Any) -> Any:
            return await objects.list_cluster_custom_object(group, version, plural, **kw)

        return call

    return make


def kinds() -> list[Kind]:
    """Every kind the live state watches; Kueue's at `KUEUE_VERSION`, the version tasgate reads."""
    custom = custom_lister

    def core(method: str) -> Callable[[client.ApiClient], Lister]:
        return lambda api: getattr(client.CoreV1Api(api), method)

    def trainer(plural: str) -> Callable[[client.ApiClient], Lister]:
        return custom(TRAINER_GROUP, TRAINER_VERSION, plural)

    def node(method: str) -> Callable[[client.ApiClient], Lister]:
        return lambda api: getattr(client.NodeV1Api(api), method)

    def scheduling(method: str) -> Callable[[client.ApiClient], Lister]:
        return lambda api: getattr(client.SchedulingV1Api(api), method)

    def apps(method: str) -> Callable[[client.ApiClient], Lister]:
        return lambda api: getattr(client.AppsV1Api(api), method)

    kueue_only = {"label_selector": KUEUE_SELECTOR}

    kueue = f"{KUEUE}/{KUEUE_VERSION}"
    return [
        Kind("nodes", "v1", "Node", core("list_node")),
        Kind(
            "pods",
            "v1",
            "Pod",
            core("list_pod_for_all_namespaces"),
            kwargs={"field_selector": LIVE_POD_SELECTOR},
        ),
        Kind("namespaces", "v1", "Namespace", core("list_namespace")),
        Kind("topologies", kueue, "Topology", custom(KUEUE, KUEUE_VERSION, "topologies"), True),
        Kind(
            "resourceflavors", kueue, "ResourceFlavor", custom(KUEUE, KUEUE_VERSION, "resourceflavors"), True
        ),
        Kind("clusterqueues", kueue, "ClusterQueue", custom(KUEUE, KUEUE_VERSION, "clusterqueues"), True),
        Kind("localqueues", kueue, "LocalQueue", custom(KUEUE, KUEUE_VERSION, "localqueues"), True),
        # The cohort tree a ClusterQueue borrows in (parents, quotas, lending and borrowing limits).
        Kind("cohorts", kueue, "Cohort", custom(KUEUE, KUEUE_VERSION, "cohorts"), True),
        # Admission checks that make Kueue place a flavor's topology later (ProvisioningRequest)
        # or on another cluster (MultiKueue): `state.admission_checks`.
        Kind(
            "admissionchecks", kueue, "AdmissionCheck", custom(KUEUE, KUEUE_VERSION, "admissionchecks"), True
        ),
        Kind(
            "multikueueconfigs",
            kueue,
            "MultiKueueConfig",
            custom(KUEUE, KUEUE_VERSION, "multikueueconfigs"),
            True,
        ),
        Kind(
            "provisioningrequestconfigs",
            kueue,
            "ProvisioningRequestConfig",
            custom(KUEUE, KUEUE_VERSION, "provisioningrequestconfigs"),
            True,
        ),
        # Admitted TAS Workloads' assignments are usage from the moment Kueue admits them.
        Kind("workloads", kueue, "Workload", custom(KUEUE, KUEUE_VERSION, "workloads"), True),
        # Priorities Kueue gives a new Workload, and so whom it would preempt for it.
        Kind(
            "workloadpriorityclasses",
            kueue,
            "WorkloadPriorityClass",
            custom(KUEUE, KUEUE_VERSION, "workloadpriorityclasses"),
            True,
        ),
        Kind("priorityclasses", "scheduling.k8s.io/v1", "PriorityClass", scheduling("list_priority_class")),
        # What Kueue applies to pod specs before it counts them.
        Kind("limitranges", "v1", "LimitRange", core("list_limit_range_for_all_namespaces")),
        Kind("runtimeclasses", "node.k8s.io/v1", "RuntimeClass", node("list_runtime_class")),
        # A TrainJob's PodSets live in its runtime.
        Kind("trainingruntimes", TRAINER, "TrainingRuntime", trainer("trainingruntimes"), True),
        Kind(
            "clustertrainingruntimes",
            TRAINER,
            "ClusterTrainingRuntime",
            trainer("clustertrainingruntimes"),
            True,
        ),
        # Whether each gang backend's PodGroup CRD is served (`decide.gangs`): labels that name a
        # PodGroup that cannot exist leave pods unscheduled forever.
        *(
            Kind(b.served_kind, b.api_version, "PodGroup", custom(b.group, b.version, "podgroups"), True)
            for b in GANG_BACKENDS.values()
        ),
        # The Kueue release and feature gates the verdicts are for (`state.kueue_release`): its
        # controller Deployment and Configuration ConfigMap, by the label Kueue's manifests set.
        Kind(
            DEPLOYMENTS,
            "apps/v1",
            "Deployment",
            apps("list_deployment_for_all_namespaces"),
            True,
            kueue_only,
            forbidden_ok=True,
        ),
        Kind(
            CONFIG_MAPS,
            "v1",
            "ConfigMap",
            core("list_config_map_for_all_namespaces"),
            True,
            kueue_only,
            forbidden_ok=True,
        ),
    ]
