"""Host ports keep a native group's pods one per node (NodePorts), found against the real
v1.36.5 scheduler (tests/e2e_native rows ``hostnet-rack-3x2``, ``hostnet-rack-4x2-never``).

Pods with ``hostNetwork: true`` and a declared ``containerPort`` (the API server defaults it into
``hostPort``) cannot share a node. Judged on resources alone, 3 pods of 2 GPUs went to r2 (the
fullest rack, 12 GPUs free on two hosts) where the scheduler, one pod per host, could only use
r1 or r3; and 4 such pods, which no rack of 3 hosts ever holds, were admitted. Fed with the
captured cluster of tests/fixtures/native.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.webhook.test_native import BASE, _submitted
from webhook.decide.decision import decide
from webhook.decide.native.ports import host_ports, one_per_node
from webhook.decide.policy import Policy
from webhook.decide.reasons import Reason
from webhook.decide.verdicts import Decision, Review
from webhook.state.cluster import build_state

GPU = "nvidia.com/gpu"
PORT = {"containerPort": 29500, "name": "nccl"}


def _rack_gang(pods: int, network: bool) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The captured rack gang as ``pods`` pods of 2 GPUs, on the host network (port 29500) or not."""
    gang, unbound, _ = _submitted("rack-gang.yaml")
    gang = copy.deepcopy(gang)
    members = [copy.deepcopy(unbound[0]) for _ in range(pods)]
    for i, p in enumerate(members):
        p["metadata"]["name"] = f"member-{i}"
        (c,) = p["spec"]["containers"]
        c["resources"] = {"requests": {"cpu": "8", "memory": "64Gi", GPU: "2"}, "limits": {GPU: "2"}}
        if network:
            p["spec"]["hostNetwork"] = True
            c["ports"] = [{**PORT, "hostPort": 29500}]  # as the API server stores it
    for obj in gang:
        specs = [obj["spec"]] if obj["kind"] == "PodGroup" else obj["spec"]["podGroupTemplates"]
        for s in specs:
            s["schedulingPolicy"] = {"gang": {"minCount": pods}}
    (group,) = [o for o in gang if o["kind"] == "PodGroup"]
    return gang + members, group


def _judge(obj: dict[str, Any], objects: list[dict[str, Any]]) -> Decision:
    return decide(Review(obj, obj["metadata"]["namespace"]), build_state(objects), Policy("test"))


def _domain(decision: Decision) -> list[tuple[tuple[str, ...], int]]:
    (verdict,) = decision.pod_sets
    assert verdict.now is not None and verdict.now.assignment is not None
    return [(d.values, d.count) for d in verdict.now.assignment.domains]


def test_host_network_pods_take_one_host_each() -> None:
    objects, group = _rack_gang(3, network=True)
    decision = _judge(group, BASE + objects)
    assert decision.reason is Reason.FITS, decision.message
    assert _domain(decision) == [(("r1",), 3)]
    plain, group = _rack_gang(3, network=False)
    assert _domain(_judge(group, BASE + plain)) == [(("r2",), 3)]


def test_more_host_network_pods_than_hosts_in_any_rack_never_fit() -> None:
    objects, group = _rack_gang(4, network=True)
    decision = _judge(group, BASE + objects)
    assert not decision.allowed and decision.reason is Reason.NEVER_FITS
    assert "holds at most 3 of the 4 pods" in decision.message


@pytest.mark.parametrize(
    ("spec", "binds"),
    [
        ({"containers": [{"name": "a", "ports": [{"containerPort": 80, "hostPort": 8080}]}]}, True),
        ({"containers": [{"name": "a", "ports": [{"containerPort": 80}]}]}, False),
        # hostNetwork: the API server defaults each containerPort into hostPort (a template too)
        ({"hostNetwork": True, "containers": [{"name": "a", "ports": [PORT]}]}, True),
        ({"hostNetwork": True, "containers": [{"name": "a"}]}, False),
        # a sidecar's ports count (restartable init container), a plain init container's do not
        (
            {
                "containers": [{"name": "a"}],
                "initContainers": [{"name": "s", "restartPolicy": "Always", "ports": [{"hostPort": 9}]}],
            },
            True,
        ),
        (
            {"containers": [{"name": "a"}], "initContainers": [{"name": "i", "ports": [{"hostPort": 9}]}]},
            False,
        ),
    ],
)
def test_which_pods_bind_host_ports(spec: dict[str, Any], binds: bool) -> None:
    assert bool(host_ports(spec)) is binds


def test_only_a_port_every_pod_binds_keeps_them_apart() -> None:
    """Pods binding different ports can share a node: no cap (never a false denial)."""

    def pod(*ports: int) -> dict[str, Any]:
        return {"containers": [{"name": "a", "ports": [{"containerPort": p, "hostPort": p} for p in ports]}]}

    assert one_per_node([pod(29500, 8080), pod(29500)])
    assert not one_per_node([pod(29500), pod(29501)])
    assert not one_per_node([pod(29500), {"containers": [{"name": "a"}]}])
    # the same port over UDP is another port
    udp = {"containers": [{"name": "a", "ports": [{"hostPort": 29500, "protocol": "UDP"}]}]}
    assert not one_per_node([pod(29500), udp])


def test_mixed_sizes_with_one_host_network_pod_are_not_capped() -> None:
    """A group of two shapes where only one pod is on the host network: 3 pods of 2 GPUs fit r2
    (two hosts), as without the port."""
    objects, group = _rack_gang(3, network=False)
    first = next(o for o in objects if o["kind"] == "Pod")
    first["spec"]["hostNetwork"] = True
    first["spec"]["containers"][0]["ports"] = [{**PORT, "hostPort": 29500}]
    first["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "9"
    decision = _judge(group, BASE + objects)
    assert decision.reason is Reason.FITS and _domain(decision) == [(("r2",), 3)]


def test_policy_tightest_level_sizes_host_network_pods_one_per_node() -> None:
    """``inject: {level: tightest}`` picks the deepest level whose domain holds the group: 2 pods
    of 2 GPUs fit one host on resources, but on the host network they need two. Sized without the
    ports, the PodGroup got the hostname key and then its own verdict denied it."""
    from tests.webhook.test_native import _native_policy  # noqa: PLC0415

    objects, group = _rack_gang(2, network=True)
    group["spec"].pop("schedulingConstraints")
    decision = decide(
        Review(group, group["metadata"]["namespace"]), build_state(BASE + objects), _native_policy("tightest")
    )
    assert decision.allowed, decision.message
    rack = {"topology": [{"key": "topology.example.com/rack"}]}
    assert decision.patch == ({"op": "add", "path": "/spec/schedulingConstraints", "value": rack},)
