"""What users read: the real cause and the right numbers, on clusters counted by hand."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tests.webhook.conftest import (
    GPU,
    HOST,
    PREFERRED,
    REQUIRED,
    SLICE,
    SLICE_SIZE,
    judge,
    kueue_objects,
    node,
    running_pod,
    team_job,
)
from webhook.decide.policy import Policy
from webhook.state.cluster import ClusterState, build_state

TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def four_nodes(**kw: Any) -> list[dict[str, Any]]:
    return [node(f"n{i}", {"block": "b", "rack": f"r{i // 2}", "pool": "gpu"}, **kw) for i in range(4)]


def cluster(
    nodes: Sequence[Mapping[str, Any]], flavors: Mapping[str, Mapping[str, str]] | None = None
) -> ClusterState:
    return build_state([*nodes, *kueue_objects(flavors=flavors)])


def test_taints_no_toleration_names_the_taint(none_policy: Policy) -> None:
    d = judge(
        team_job(2, annotations={REQUIRED: "rack"}), cluster(four_nodes(taints=[TAINT])), none_policy, "team"
    )
    assert not d.allowed
    assert 'taint "nvidia.com/gpu=present:NoSchedule" excludes 4 of 4 nodes' in d.message
    assert "tolerate the taint" in d.message and "at most 0" not in d.message


def test_a_node_selector_nothing_matches(none_policy: Policy) -> None:
    obj = team_job(2, annotations={REQUIRED: "rack"}, nodeSelector={"disk": "ssd"})
    d = judge(obj, cluster(four_nodes()), none_policy, "team")
    assert "the nodeSelector excludes 4 of 4 nodes" in d.message and "fix the nodeSelector" in d.message


def test_required_node_affinity_nothing_matches(none_policy: Policy) -> None:
    term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z9"]}]}
    affinity = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
    }
    obj = team_job(2, annotations={REQUIRED: "rack"}, affinity=affinity)
    d = judge(obj, cluster(four_nodes()), none_policy, "team")
    assert "required node affinity excludes 4 of 4 nodes" in d.message
    assert "fix the required node affinity" in d.message


def test_flavor_labels_no_node_carries(none_policy: Policy) -> None:
    d = judge(
        team_job(2, annotations={REQUIRED: "rack"}),
        cluster(four_nodes(), {"gpu": {"pool": "tpu"}}),
        none_policy,
        "team",
    )
    assert not d.allowed
    assert 'no node is selected by ResourceFlavor "gpu" (nodeLabels pool=tpu)' in d.message


def test_a_pod_larger_than_any_node(none_policy: Policy) -> None:
    d = judge(
        team_job(2, gpus=1000, annotations={REQUIRED: "rack"}), cluster(four_nodes()), none_policy, "team"
    )
    assert not d.allowed and "at most 0" not in d.message
    assert (
        "one pod asks nvidia.com/gpu: 1000, more than the largest node offers (8): shrink the pod"
        in d.message
    )


# Two blocks: A = rack a1 (4 nodes, 1 busy: 3 free); B = rack b1 (4 nodes, 1 busy: 3 free) and
# rack b2 (4 nodes, all free). Free 8-GPU slots now: 3 + 3 + 4 = 10; empty: 12.
def busy_cluster() -> ClusterState:
    racks = {"a1": "A", "b1": "B", "b2": "B"}
    nodes = [
        node(f"{r}-{i}", {"block": b, "rack": r, "pool": "gpu"}) for r, b in racks.items() for i in range(4)
    ]
    busy = [running_pod(f"busy-{r}", f"{r}-0", 8) for r in ("a1", "b1")]
    return build_state([*nodes, *busy, *kueue_objects()])


def the_warning(d: Any) -> str:
    (warning,) = [w for w in d.warnings if "must wait" in w]
    return str(warning)


def test_an_unannotated_gang_may_spread_so_it_counts_the_topology(none_policy: Policy) -> None:
    d = judge(team_job(12), busy_cluster(), none_policy, "team")
    assert d.allowed and d.reason == "waits"
    assert "the topology has room for 10 of 12 pods now (2 short)" in the_warning(d)


def test_a_preferred_gang_counts_the_topology(none_policy: Policy) -> None:
    d = judge(team_job(12, annotations={PREFERRED: "block"}), busy_cluster(), none_policy, "team")
    assert d.reason == "waits" and "the topology has room for 10 of 12 pods now" in the_warning(d)


def test_a_required_gang_counts_its_best_domain(none_policy: Policy) -> None:
    d = judge(team_job(8, annotations={REQUIRED: "block"}), busy_cluster(), none_policy, "team")
    assert d.reason == "waits" and "the best block has room for 7 of 8 pods now (1 short)" in the_warning(d)


def test_a_sliced_gang_counts_slices(none_policy: Policy) -> None:
    obj = team_job(8, annotations={REQUIRED: "block", SLICE: "rack", SLICE_SIZE: "4"})
    d = judge(obj, busy_cluster(), none_policy, "team")
    assert d.reason == "waits" and "the best block has room for 1 of 2 slices now (1 short)" in the_warning(d)


def test_cli_and_json_keep_the_whole_text(none_policy: Policy) -> None:
    d = judge(
        team_job(2, annotations={REQUIRED: "rack"}), cluster(four_nodes(taints=[TAINT])), none_policy, "team"
    )
    assert len(d.message) > 120 and d.message.endswith(".")
    assert GPU in d.message and HOST not in d.message
