"""The Mirror's watches of the native gang kinds, every served version (``live.native`` keeps them)."""

from __future__ import annotations

from collections.abc import Callable

from kubernetes_asyncio import client

from webhook.live.kinds import Kind, custom_lister
from webhook.live.native import (
    COMPOSITES,
    JOBS,
    POD_GROUPS,
    POD_GROUPS_V1BETA1,
    UNBOUND_PODS,
    UNBOUND_SELECTOR,
    WORKLOADS,
    WORKLOADS_V1BETA1,
    Lister,
    NativeBook,
)
from webhook.model.workloads.native import COMPOSITE, V1ALPHA2, V1ALPHA3, V1BETA1


def native_kinds(book: NativeBook | None) -> list[Kind]:
    """The Mirror's extra watches for the native backend (``book`` gates Jobs and unbound pods;
    None for a one-shot list, `tasgate check --live`, which asks for them only once served)."""
    gated = book.gated if book is not None else _ungated

    def core(api: client.ApiClient) -> Lister:
        return client.CoreV1Api(api).list_pod_for_all_namespaces

    def jobs(api: client.ApiClient) -> Lister:
        return client.BatchV1Api(api).list_job_for_all_namespaces

    return [
        _api_kind(WORKLOADS, V1ALPHA2, "Workload", "workloads"),
        _api_kind(POD_GROUPS, V1ALPHA2, "PodGroup", "podgroups"),
        _api_kind(WORKLOADS_V1BETA1, V1BETA1, "Workload", "workloads"),
        _api_kind(POD_GROUPS_V1BETA1, V1BETA1, "PodGroup", "podgroups"),
        _api_kind(COMPOSITES, V1ALPHA3, COMPOSITE, "compositepodgroups"),
        Kind(JOBS, "batch/v1", "Job", gated(jobs), True),
        Kind(UNBOUND_PODS, "v1", "Pod", gated(core), True, kwargs={"field_selector": UNBOUND_SELECTOR}),
    ]


def _api_kind(name: str, api: str, kind: str, plural: str) -> Kind:
    group, version = api.split("/")
    return Kind(name, api, kind, custom_lister(group, version, plural), True)


def _ungated(make: Callable[[client.ApiClient], Lister]) -> Callable[[client.ApiClient], Lister]:
    return make
