"""Admission checks read as Kueue v0.19.2 reads them (issue 37.1, 37.2): a flavor behind a
ProvisioningRequest check, or a queue behind MultiKueue, is placed on capacity today's nodes do
not show, so today's nodes are a figure, never a denial; ``onFlavors`` that exclude the flavor
keep today's judgement; what no new node changes is still denied."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tests.webhook.conftest import GPU, policy
from tests.webhook.quota_world import (
    KUEUE,
    busy,
    cluster_queue,
    flavors_and_topology,
    gang,
    judge,
    local_queue,
    rack,
    resources,
    state,
)
from webhook.state.admission_checks import (
    MULTIKUEUE_CONTROLLER,
    PROVISIONING_CONTROLLER,
    CheckRule,
    parse_check_rules,
)
from webhook.state.cluster import ClusterState

NONE = policy([])
TWO = flavors_and_topology({"first": "a", "second": "b"})


def check(name: str, controller: str, config: str | None = None, active: bool = True) -> dict[str, Any]:
    spec: dict[str, Any] = {"controllerName": controller}
    if config:
        spec["parameters"] = {
            "apiGroup": "kueue.x-k8s.io",
            "kind": "ProvisioningRequestConfig",
            "name": config,
        }
    status = {"conditions": [{"type": "Active", "status": "True" if active else "False"}]}
    return {
        "apiVersion": KUEUE,
        "kind": "AdmissionCheck",
        "metadata": {"name": name},
        "spec": spec,
        "status": status,
    }


def prov_config(name: str) -> dict[str, Any]:
    spec = {"provisioningClassName": "queued-provisioning.gke.io", "managedResources": [GPU]}
    return {
        "apiVersion": KUEUE,
        "kind": "ProvisioningRequestConfig",
        "metadata": {"name": name},
        "spec": spec,
    }


def queue_with(
    rules: list[dict[str, Any]], flavors: tuple[str, ...] = ("first",), gpus: int = 512
) -> dict[str, Any]:
    cq = cluster_queue("cq", [(f, resources(gpus)) for f in flavors])
    cq["spec"]["admissionChecksStrategy"] = {"admissionChecks": rules}
    return cq


def provisioned_world(*extra: Any, rules: list[dict[str, Any]] | None = None) -> ClusterState:
    """One rack of 4 eight-GPU hosts in pool "a", behind a ProvisioningRequest check."""
    cq = queue_with(rules if rules is not None else [{"name": "prov"}])
    return state(
        TWO,
        rack("a"),
        cq,
        local_queue("q", "cq"),
        check("prov", PROVISIONING_CONTROLLER, "gpu-config"),
        prov_config("gpu-config"),
        *extra,
    )


def test_a_gang_larger_than_any_rack_today_is_admitted_behind_a_provisioning_check() -> None:
    d = judge(gang(10), provisioned_world(), NONE)
    assert (d.allowed, d.reason) == (True, "provisioning")
    text = " ".join(d.warnings)
    assert 'check "prov", ProvisioningRequestConfig "gpu-config"' in text
    assert "hold 4 of 10 pods in one rack even when empty" in text


def test_the_same_gang_without_the_check_is_denied() -> None:
    world = state(TWO, rack("a"), cluster_queue("cq", [("first", resources(512))]), local_queue("q", "cq"))
    d = judge(gang(10), world, NONE)
    assert (d.allowed, d.reason) == (False, "never-fits")


def test_a_check_limited_by_on_flavors_to_another_flavor_keeps_todays_judgement() -> None:
    world = provisioned_world(rules=[{"name": "prov", "onFlavors": ["second"]}])
    d = judge(gang(10), world, NONE)
    assert (d.allowed, d.reason) == (False, "never-fits")


def test_a_gang_that_fits_today_still_waits_for_provisioning_and_says_so() -> None:
    d = judge(gang(2), provisioned_world(), NONE)
    assert (d.allowed, d.reason) == (True, "provisioning")
    assert not any("even when empty" in w for w in d.warnings)


def test_a_busy_rack_today_is_a_figure_not_a_wait() -> None:
    d = judge(gang(4), provisioned_world(*[busy(f"a-h{h}") for h in range(2)]), NONE)
    assert (d.allowed, d.reason) == (True, "provisioning")
    assert any("has room for 2 of 4 pods now (2 short)" in w for w in d.warnings)


def test_what_no_new_node_changes_is_still_denied() -> None:
    over_quota = state(
        TWO,
        rack("a"),
        queue_with([{"name": "prov"}], gpus=16),
        local_queue("q", "cq"),
        check("prov", PROVISIONING_CONTROLLER, "gpu-config"),
        prov_config("gpu-config"),
    )
    assert judge(gang(10), over_quota, NONE).reason == "over-quota"
    unknown_level = judge(gang(2, level="zone"), provisioned_world(), NONE)
    assert (unknown_level.allowed, unknown_level.reason) == (False, "invalid")


def test_multikueue_is_never_denied_on_the_managers_nodes() -> None:
    cq = queue_with([{"name": "mk"}])
    world = state(TWO, rack("a"), cq, local_queue("q", "cq"), check("mk", MULTIKUEUE_CONTROLLER))
    d = judge(gang(10), world, NONE)
    assert (d.allowed, d.reason) == (True, "multikueue")
    assert any("worker cluster" in w for w in d.warnings)


def test_a_check_that_does_not_exist_yet_delays_and_says_the_queue_is_inactive() -> None:
    cq = queue_with([{"name": "later"}])
    d = judge(gang(10), state(TWO, rack("a"), cq, local_queue("q", "cq")), NONE)
    assert (d.allowed, d.reason) == (True, "kueue-config")
    assert any('admission check "later", which does not exist' in w for w in d.warnings)


def test_another_controllers_check_does_not_delay() -> None:
    cq = queue_with([{"name": "custom"}])
    world = state(TWO, rack("a"), cq, local_queue("q", "cq"), check("custom", "example.com/approval"))
    assert judge(gang(10), world, NONE).reason == "never-fits"


def test_a_provisioning_flavor_is_chosen_when_the_first_flavor_never_holds_the_gang() -> None:
    cq = queue_with([{"name": "prov", "onFlavors": ["second"]}], flavors=("first", "second"))
    world = state(
        TWO,
        rack("a"),
        rack("b"),
        cq,
        local_queue("q", "cq"),
        check("prov", PROVISIONING_CONTROLLER, "gpu-config"),
        prov_config("gpu-config"),
    )
    d = judge(gang(10), world, NONE)
    assert (d.allowed, d.reason, d.pod_sets[0].flavor) == (True, "provisioning", "second")


def test_check_rules_read_v1beta2_strategy_and_v1beta1_list() -> None:
    spec = {
        "admissionChecksStrategy": {"admissionChecks": [{"name": "a", "onFlavors": ["f"]}, {"name": "b"}]}
    }
    assert parse_check_rules("cq", spec) == (CheckRule("a", ("f",)), CheckRule("b"))
    assert parse_check_rules("cq", {"admissionChecks": ["x"]}) == (CheckRule("x"),)
    assert parse_check_rules("cq", {}) == ()


def test_a_gang_using_no_managed_resource_is_judged_on_todays_nodes() -> None:
    """managedResources [nvidia.com/gpu] and a CPU-only gang: Kueue's check turns Ready with "no
    ProvisioningRequest needed", and the gang is placed on today's nodes: never fits is denied."""
    cpu_gang = gang(10, gpus=0)
    cpu_gang["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "60"}}
    assert judge(cpu_gang, provisioned_world(), NONE).reason == "never-fits"


def test_a_pool_scaled_to_zero_is_no_denial() -> None:
    """No node carries the Topology's levels today (an autoscaled pool at zero, a MultiKueue
    manager without GPU nodes): the level is known to the Topology, the nodes come later."""
    cq = queue_with([{"name": "prov"}])
    checks = [check("prov", PROVISIONING_CONTROLLER, "gpu-config"), prov_config("gpu-config")]
    d = judge(gang(10), state(TWO, cq, local_queue("q", "cq"), *checks), NONE)
    assert (d.allowed, d.reason) == (True, "provisioning"), d.message
    multi = queue_with([{"name": "mk"}])
    d = judge(gang(10), state(TWO, multi, local_queue("q", "cq"), check("mk", MULTIKUEUE_CONTROLLER)), NONE)
    assert (d.allowed, d.reason) == (True, "multikueue"), d.message
    assert (
        judge(gang(2, level="zone"), state(TWO, cq, local_queue("q", "cq"), *checks), NONE).reason
        == "invalid"
    )


def worker(hosts: int, prefix: str) -> ClusterState:
    """A MultiKueue worker: its own Kueue objects (no check) and one rack of ``hosts`` nodes."""
    queue = cluster_queue("cq", [("first", resources(512))])
    return state(TWO, rack("a", hosts=hosts, prefix=prefix), queue, local_queue("q", "cq"))


def manager(**workers: ClusterState) -> ClusterState:
    found = state(
        TWO, queue_with([{"name": "mk"}]), local_queue("q", "cq"), check("mk", MULTIKUEUE_CONTROLLER)
    )
    return replace(found, workers=workers)


def test_a_multikueue_gang_is_judged_on_each_worker_and_told_which_hold_it() -> None:
    d = judge(gang(10), manager(small=worker(4, "s"), big=worker(16, "b")), NONE)
    assert (d.allowed, d.reason) == (True, "multikueue")
    (note,) = [w for w in d.warnings if w.startswith("MultiKueue")]
    assert "worker clusters that hold it now: big" in note and "small: refused (never-fits)" in note


def test_a_multikueue_gang_no_worker_can_ever_hold_is_denied_naming_each_worker() -> None:
    d = judge(gang(10), manager(one=worker(4, "o"), two=worker(6, "t")), NONE)
    assert (d.allowed, d.reason) == (False, "never-fits")
    assert d.message.startswith("no MultiKueue worker cluster can ever run it. one: PodSet")
    assert "two: PodSet" in d.message


def test_a_worker_tasgate_cannot_judge_never_adds_to_a_denial() -> None:
    unknown = state(TWO, rack("a", prefix="u"))  # no queue there: not checked
    d = judge(gang(10), manager(small=worker(4, "s"), unknown=unknown), NONE)
    assert d.allowed and d.reason == "multikueue"


def test_a_malformed_check_rule_leaves_its_clusterqueue_out_alone() -> None:
    """onFlavors that is not a list: the ClusterQueue is left out (its workloads read not checked),
    never an exception out of the state build."""
    world = provisioned_world(rules=[{"name": "prov", "onFlavors": 5}])
    assert [r.kind for r in world.rejected] == ["ClusterQueue"]
    d = judge(gang(10), world, NONE)
    assert (d.allowed, d.reason) == (True, "object-rejected")
