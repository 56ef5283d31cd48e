"""Live mode's native kinds (``live.native``): the Mirror fed as its watches feed it, with the
objects the real v1.36.5 components left (tests/fixtures/native), must judge every native object
as ``tasgate check`` does on the equivalent dump — and never rebuild the state for them."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Mapping
from typing import Any

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from tests.webhook.test_native import BASE, FIXTURES, SCENARIOS
from tests.webhook.test_native import _docs as docs
from webhook.decide.decision import decide
from webhook.decide.policy import Policy
from webhook.decide.reasons import Reason
from webhook.decide.review import Outcome
from webhook.decide.verdicts import Review
from webhook.live import native
from webhook.live.holder import StateHolder
from webhook.live.kinds import kinds
from webhook.live.mirror import Mirror
from webhook.live.native import NativeBook
from webhook.live.native_kinds import native_kinds
from webhook.serve.catch_up import judged_again
from webhook.state.cluster import ClusterState, build_state

DISCOVERY = json.loads((FIXTURES / "discovery.json").read_text())


def mirror_of(objects: list[dict[str, Any]], served: bool = True) -> Mirror:
    """A Mirror whose every watch listed ``objects`` (as the API server splits them by kind)."""
    book = NativeBook()
    names = [k.name for k in [*kinds(), *native_kinds(book)]]
    mirror = Mirror(StateHolder(), names, debounce=0.0, native=book)
    by_kind: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for obj in objects:
        if obj["kind"] != "Event":  # the scheduler's Events of the capture: not watched
            by_kind[watch_kind(obj)].append(obj)
    for name in names:
        if name in native.API_KINDS and not served:
            mirror.mark_absent(name)
        else:
            mirror.replace(name, by_kind[name])
    return mirror


def watch_kind(obj: Mapping[str, Any]) -> str:
    kind = obj["kind"]
    if kind == "Pod":
        return "pods" if obj["spec"].get("nodeName") else native.UNBOUND_PODS
    return {
        "Node": "nodes",
        "Namespace": "namespaces",
        "Workload": native.WORKLOADS,
        "PodGroup": native.POD_GROUPS,
        "Job": native.JOBS,
        "PriorityClass": "priorityclasses",
    }[kind]


async def published(mirror: Mirror) -> ClusterState:
    await mirror.publish_once()
    assert mirror.state is not None
    return mirror.state


def verdicts(state: ClusterState, objects: list[dict[str, Any]]) -> list[tuple[str, Reason, bool, Any]]:
    out = []
    for obj in objects:
        if obj["kind"] not in ("Workload", "PodGroup", "Job", "Pod"):
            continue
        d = decide(Review(obj, obj["metadata"]["namespace"]), state, Policy("test"))
        domains = [v.now.assignment.domains if v.now and v.now.assignment else None for v in d.pod_sets]
        out.append((f"{obj['kind']}/{obj['metadata']['name']}", d.reason, d.allowed, domains))
    return out


@pytest.mark.parametrize("scenario", SCENARIOS)
async def test_live_verdicts_equal_check_on_the_dump(scenario: str) -> None:
    objects = BASE + docs(FIXTURES / scenario)
    live = await published(mirror_of(objects))
    dump = build_state([*objects, DISCOVERY])
    assert live.native.served and live.native.members == dump.native.members
    assert set(live.native.pod_groups) == set(dump.native.pod_groups)
    assert set(live.native.jobs) <= set(dump.native.jobs)
    found = verdicts(live, objects)
    assert found == verdicts(dump, objects)
    judged = {name: reason for name, reason, _, _ in found if name.startswith("PodGroup/")}
    assert judged and Reason.NATIVE_UNKNOWN not in judged.values(), judged


async def test_pending_pods_make_a_never_fitting_pod_group_denied() -> None:
    """The pods wait unbound for their PodGroup: only the unbound pod watch shows them."""
    objects = docs(FIXTURES / "rack-never-fits.yaml")
    pods = [strip_binding(p) for p in objects if p["kind"] == "Pod"]
    (pg,) = [strip_status(p) for p in objects if p["kind"] == "PodGroup"]
    state = await published(mirror_of(BASE + pods))
    d = decide(Review(pg, pg["metadata"]["namespace"]), state, Policy("test"))
    assert not d.allowed and d.reason is Reason.NEVER_FITS, d.warnings
    assert state.native.members[(pg["metadata"]["namespace"], pg["metadata"]["name"])].pending == 7


async def test_native_events_publish_without_a_rebuild() -> None:
    """A Workload, Job or pod event swaps a new index into the last state: same snapshots, same
    nodes, a newer generation; an event that changes nothing the judge reads publishes nothing."""
    objects = docs(FIXTURES / "job-gang.yaml")
    mirror = mirror_of(BASE)
    first = await published(mirror)
    job = next(o for o in objects if o["kind"] == "Job")
    mirror.apply(native.JOBS, "ADDED", job)
    second = await published(mirror)
    assert second is not first and second.nodes is first.nodes and second.generation > first.generation
    assert second.snapshots() == first.snapshots() and not mirror.structure_changed
    status_only = {**job, "status": {"active": 3, "ready": 3}}
    mirror.apply(native.JOBS, "MODIFIED", status_only)
    assert await published(mirror) is second
    mirror.apply(native.JOBS, "DELETED", job)
    assert not (await published(mirror)).native.jobs


async def test_a_pod_moves_from_the_unbound_watch_to_the_bound_one_in_either_order() -> None:
    objects = docs(FIXTURES / "rack-gang.yaml")
    bound = next(p for p in objects if p["kind"] == "Pod")
    unbound = strip_binding(bound)
    key = (bound["metadata"]["namespace"], bound["spec"]["schedulingGroup"]["podGroupName"])
    mirror = mirror_of(BASE)
    mirror.apply(native.UNBOUND_PODS, "ADDED", unbound)
    mirror.apply("pods", "ADDED", bound)  # the bound watch first
    assert mirror.native.members[key].bound == 1 and mirror.native.members[key].pending == 0
    mirror.apply(native.UNBOUND_PODS, "DELETED", unbound)
    assert mirror.native.members[key].bound == 1
    mirror.apply("pods", "DELETED", bound)
    assert key not in mirror.native.members and not mirror.native.records


async def test_a_malformed_pod_group_is_left_out_alone() -> None:
    objects = docs(FIXTURES / "rack-gang.yaml")
    (pg,) = [p for p in objects if p["kind"] == "PodGroup"]
    bad = copy.deepcopy(pg)
    bad["metadata"]["name"] = "broken"
    bad["spec"]["schedulingPolicy"] = {}
    state = await published(mirror_of([*BASE, *objects, bad]))
    assert ("native", "broken") not in state.native.pod_groups
    assert any(r.name == "broken" for r in state.rejected)
    assert (pg["metadata"]["namespace"], pg["metadata"]["name"]) in state.native.pod_groups


async def test_without_the_native_api_jobs_and_unbound_pods_are_not_listed() -> None:
    book = NativeBook()
    listed: list[dict[str, Any]] = []

    async def lister(**kw: Any) -> str:
        listed.append(kw)
        return "listed"

    jobs = next(k for k in native_kinds(book) if k.name == native.JOBS)
    gated = book.gated(lambda api: lister)(None)  # type: ignore[arg-type]
    for kind in sorted(native.API_KINDS):  # no version of the native API is served
        book.absent(kind)
    with pytest.raises(ApiException) as raised:
        await gated(limit=500)
    assert raised.value.status == 404 and not listed and jobs.optional
    book.commit(native.WORKLOADS, {})
    assert await gated(limit=500) == "listed"
    assert await gated(watch=True) == "listed"  # a watch follows its list: never gated


async def test_a_served_api_without_objects_still_reads_served() -> None:
    """An empty native cluster: the list succeeded, which is what discovery.json says in a dump."""
    state = await published(mirror_of(BASE))
    assert state.native.served == build_state([*BASE, DISCOVERY]).native.served is True
    absent = await published(mirror_of(BASE, served=False))
    assert not absent.native.served


def strip_binding(pod: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(pod))
    out["spec"].pop("nodeName", None)
    out["status"] = {"phase": "Pending"}
    return out


def strip_status(obj: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(obj))
    out.pop("status", None)
    return out


async def test_a_review_judged_unknown_is_judged_again_on_the_next_state() -> None:
    """The Job controller's Workload reviewed before the Job reached the state: the review waits
    for the next publish and is judged on it (the real judge, on states with and without the Job)."""
    objects = docs(FIXTURES / "job-gang.yaml")
    job = next(o for o in objects if o["kind"] == "Job")
    (wl,) = [strip_status(o) for o in objects if o["kind"] == "Workload"]
    mirror = mirror_of(BASE)
    holder = mirror.holder
    before = await published(mirror)
    holder.publish(before)

    async def judge(state: ClusterState) -> Outcome:
        d = decide(Review(wl, wl["metadata"]["namespace"]), state, Policy("test"))
        return Outcome(d.allowed, d.reason, decision=d)

    first = await judge(before)
    assert first.reason is Reason.NATIVE_UNKNOWN

    async def job_arrives() -> None:
        await asyncio.sleep(0.1)
        mirror.apply(native.JOBS, "ADDED", job)
        await mirror.publish_once()

    arrival = asyncio.create_task(job_arrives())
    again = await judged_again(holder, before, first, judge, 9.0)
    await arrival
    assert again.reason is Reason.FITS and again.decision is not None
    static = StateHolder()
    static.publish(before)  # a static state is never waited on
    assert await judged_again(static, before, first, judge, 9.0) is first
