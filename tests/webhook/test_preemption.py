"""Preemption as Kueue v0.19.2's classical search does it (issue 18.3): a gang Kueue admits by
evicting lower-priority Workloads of its ClusterQueue is allowed with a warning naming them,
never denied; under ``withinClusterQueue: Never`` it waits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.webhook.conftest import GPU, HOST, policy
from tests.webhook.quota_world import (
    KUEUE,
    admitted,
    cluster_queue,
    flavors_and_topology,
    gang,
    hosts_now,
    judge,
    local_queue,
    rack,
    resources,
    state,
)
from webhook.decide.kueue.preemption import Preemption, ordered, victims_warning, without
from webhook.state.cluster import ClusterState
from webhook.state.priorities import PriorityClasses, charged_priority, workload_priority
from webhook.state.quota_usage import QuotaCharge, quota_charge

NONE = policy([])


def victim(name: str, hosts: list[str], priority: int | None, reserved: str = "2026-01-01T00:00:00Z") -> Any:
    """An admitted TAS Workload of ``cq`` with one 8-GPU pod on each of ``hosts``."""
    spec: dict[str, Any] = {
        "podSets": [
            {
                "name": "main",
                "count": len(hosts),
                "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {GPU: "8"}}}]}},
            }
        ]
    }
    if priority is not None:
        spec["priority"] = priority
    return {
        "apiVersion": KUEUE,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "other", "uid": f"uid-{name}"},
        "spec": spec,
        "status": {
            "conditions": [{"type": "QuotaReserved", "status": "True", "lastTransitionTime": reserved}],
            "admission": {
                "clusterQueue": "cq",
                "podSetAssignments": [
                    {
                        "name": "main",
                        "count": len(hosts),
                        "flavors": {GPU: "gpu"},
                        "resourceUsage": {GPU: str(8 * len(hosts))},
                        "topologyAssignment": {
                            "levels": [HOST],
                            "domains": [{"values": [h], "count": 1} for h in hosts],
                        },
                    }
                ],
            },
        },
    }


def wpc(name: str, value: int) -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": name}, "value": value}


def world(*extra: Any, within: str | None = "LowerPriority", gpus: int = 32) -> ClusterState:
    cq = cluster_queue("cq", [("gpu", resources(gpus))])
    if within is not None:
        cq["spec"]["preemption"] = {"withinClusterQueue": within}
    return state(flavors_and_topology({"gpu": "gpu"}), rack("gpu"), cq, local_queue("q", "cq"), *extra)


def high(pods: int = 2) -> dict[str, Any]:
    obj = gang(pods)
    obj["metadata"].setdefault("labels", {})["kueue.x-k8s.io/priority-class"] = "high"
    return obj


FULL = (
    victim("old", ["gpu-h0", "gpu-h1"], 0, "2026-01-01T00:00:00Z"),
    victim("new", ["gpu-h2", "gpu-h3"], 0, "2026-01-02T00:00:00Z"),
)


def test_a_high_priority_gang_preempts_the_newest_low_priority_workload() -> None:
    d = judge(high(), world(*FULL, wpc("high", 100)), NONE)
    assert (d.allowed, d.reason) == (True, "admitted-after-preemption"), d.warnings
    assert 'ClusterQueue "cq": other/new' in d.warnings[0] and "other/old" not in d.warnings[0]
    assert hosts_now(d) == {"gpu-h2": 1, "gpu-h3": 1}  # the freed hosts
    assert d.audit["reason"] == "admitted-after-preemption"


def test_never_waits() -> None:
    d = judge(high(), world(*FULL, wpc("high", 100), within=None), NONE)
    assert (d.allowed, d.reason) == (True, "waits")
    d = judge(high(), world(*FULL, wpc("high", 100), within="Never"), NONE)
    assert (d.allowed, d.reason) == (True, "waits")


def test_equal_priority_is_not_preempted_even_newer_equal() -> None:
    for within in ("LowerPriority", "LowerOrNewerEqualPriority"):
        d = judge(gang(2), world(*FULL, within=within), NONE)  # priority 0 against 0
        assert (d.allowed, d.reason) == (True, "waits"), within


def test_an_unknown_priority_class_is_not_predicted() -> None:
    d = judge(high(), world(*FULL), NONE)  # "high" does not exist: Kueue makes no Workload
    assert d.reason == "waits"


def test_only_as_many_as_needed_fill_back() -> None:
    # Four 1-host workloads; a 2-pod gang needs two hosts in the rack: the two newest go.
    small = [victim(f"w{i}", [f"gpu-h{i}"], 0, f"2026-01-0{i + 1}T00:00:00Z") for i in range(4)]
    d = judge(high(), world(*small, wpc("high", 100)), NONE)
    assert d.reason == "admitted-after-preemption"
    assert "other/w3, other/w2" in d.warnings[0] and "w1" not in d.warnings[0]


def test_lower_priority_goes_before_newer() -> None:
    mixed = (
        victim("low", ["gpu-h0", "gpu-h1"], -5, "2026-01-01T00:00:00Z"),
        victim("mid", ["gpu-h2", "gpu-h3"], 10, "2026-01-02T00:00:00Z"),
    )
    d = judge(high(), world(*mixed, wpc("high", 100)), NONE)
    assert "other/low" in d.warnings[0] and "other/mid" not in d.warnings[0]
    assert hosts_now(d) == {"gpu-h0": 1, "gpu-h1": 1}


def test_a_gang_that_never_fits_is_still_denied_and_one_that_fits_is_not_touched() -> None:
    d = judge(high(5), world(*FULL, wpc("high", 100), gpus=64), NONE)
    assert (d.allowed, d.reason) == (False, "never-fits")
    d = judge(high(2), world(FULL[0], wpc("high", 100)), NONE)
    assert d.reason == "fits"


def test_priority_resolution_follows_extract_priority() -> None:
    classes = PriorityClasses({"w": 7}, {"p": (3, False), "d1": (5, True), "d2": (2, True)})
    obj: dict[str, Any] = {"metadata": {"labels": {"kueue.x-k8s.io/priority-class": "w"}}}
    assert workload_priority(obj, [{"spec": {"priorityClassName": "p"}}], classes) == 7
    assert workload_priority({"metadata": {}}, [{"spec": {"priorityClassName": "p"}}], classes) == 3
    assert workload_priority({"metadata": {}}, [{"spec": {}}], classes) == 2  # lowest global default
    assert workload_priority({"metadata": {}}, [{"spec": {}}], PriorityClasses()) == 0
    assert workload_priority({"metadata": {}}, [{"spec": {"priorityClassName": "x"}}], classes) is None


def test_candidates_ordering() -> None:
    def c(name: str, pri: int, at: str, evicted: bool = False) -> QuotaCharge:
        return QuotaCharge(("n", name), "cq", (), pri, name, at, evicted)

    found = ordered([c("a", 1, "1"), c("b", 0, "1"), c("c", 0, "2"), c("d", 9, "0", True), c("e", 0, "")])
    assert [x.workload[1] for x in found] == ["d", "e", "c", "b", "a"]


def test_the_warning_fits_the_api_servers_limit() -> None:
    many = tuple(("namespace", f"workload-{i:03}") for i in range(40))
    text = victims_warning(Preemption(many, "cq", ClusterState(), None))
    assert len(text) <= 256 and text.endswith("more")


def test_quota_in_use_held_by_a_lower_priority_workload_is_taken() -> None:
    used = admitted("first", "cq", {GPU: "32"}, "gpu")  # quota only, no node capacity; priority 0
    d = judge(high(), world(used, wpc("high", 100)), NONE)
    assert d.reason == "admitted-after-preemption" and "other/first" in d.warnings[0]
    d = judge(high(), world(used, wpc("high", 100), within="Never"), NONE)
    assert d.reason == "waits" and any("insufficient unused quota" in w for w in d.warnings)


def test_a_stored_workload_carries_its_priority_as_kueue_wrote_it() -> None:
    # Kueue v0.19.2 wrote this Workload (e2e/capture_kueue_objects.py): spec.priority 0.
    path = Path(__file__).parent / "manifests" / "kueue_stored" / "job-workload.yaml"
    stored = yaml.safe_load(path.read_text())
    assert charged_priority(stored)[0] == 0 and charged_priority(stored)[2] == "2026-01-01T00:00:00Z"
    stored["spec"]["priority"] = 1000
    charge = quota_charge(stored)
    assert charge is not None and charge.priority == 1000 and not charge.evicted


def test_evicting_frees_the_built_snapshots_as_a_fresh_build_would() -> None:
    full, fresh = world(*FULL), world(FULL[0])
    for s in (full, fresh):
        s.prepare()
    after = without(full, [("other", "new")])
    (key,) = after.snapshots()
    assert list(after.snapshots()[key].now.free) == list(fresh.snapshots()[key].now.free)
    assert list(after.snapshots()[key].now.free) != list(full.snapshots()[key].now.free)
    assert after.charges == fresh.charges
