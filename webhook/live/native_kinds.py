"""The Mirror's watches of the native v1.36 gang kinds (``live.native`` keeps what they deliver)."""

from __future__ import annotations

from collections.abc import Callable

from kubernetes_asyncio import client

from webhook.live.kinds import Kind, custom_lister
from webhook.live.native import (
    JOBS,
    POD_GROUPS,
    UNBOUND_PODS,
    UNBOUND_SELECTOR,
    WORKLOADS,
    Lister,
    NativeBook,
)
from webhook.model.workloads.native import NATIVE_API


def native_kinds(book: NativeBook | None) -> list[Kind]:
    """The Mirror's extra watches for the native backend (``book`` gates Jobs and unbound pods;
    None for a one-shot list, `tasgate check --live`, which asks for them only once served)."""
    group, version = NATIVE_API.split("/")
    gated = book.gated if book is not None else _ungated

    def core(api: client.ApiClient) -> Lister:
        return client.CoreV1Api(api).list_pod_for_all_namespaces

    def jobs(api: client.ApiClient) -> Lister:
        return client.BatchV1Api(api).list_job_for_all_namespaces

    return [
        Kind(WORKLOADS, NATIVE_API, "Workload", custom_lister(group, version, "workloads"), True),
        Kind(POD_GROUPS, NATIVE_API, "PodGroup", custom_lister(group, version, "podgroups"), True),
        Kind(JOBS, "batch/v1", "Job", gated(jobs), True),
        Kind(UNBOUND_PODS, "v1", "Pod", gated(core), True, kwargs={"field_selector": UNBOUND_SELECTOR}),
    ]


def _ungated(make: Callable[[client.ApiClient], Lister]) -> Callable[[client.ApiClient], Lister]:
    return make
