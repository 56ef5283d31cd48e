"""The e2e harness's reader of Kueue Workload admissions (pure: no binaries, no e2e marker).

Checked on the Workloads the real Kueue wrote (tests/webhook/manifests/kueue_stored, captured by
e2e/capture_kueue_objects.py) and on hand-made slices for the v1beta2 shapes those do not show.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.kueue_admission import expand_topology_assignment, workload_admission

STORED = Path(__file__).resolve().parents[1] / "webhook" / "manifests" / "kueue_stored"
HOST = "kubernetes.io/hostname"


def stored_workload(name: str) -> dict[str, Any]:
    (workload,) = list(yaml.safe_load_all((STORED / f"{name}-workload.yaml").read_text()))
    assert workload["kind"] == "Workload"
    return dict(workload)


def test_captured_job_workload() -> None:
    admission = workload_admission(stored_workload("job"))
    assert admission is not None and list(admission) == ["main"]
    main = admission["main"]
    assert (main.count, main.flavor, main.levels) == (4, "gpu-flavor", (HOST,))
    assert main.domains == ((("n0",), 1), (("n1",), 1), (("n2",), 1), (("n3",), 1))
    assert main.pods_at(HOST) == {"n0": 1, "n1": 1, "n2": 1, "n3": 1}


def test_captured_mpijob_workload_has_a_podset_per_replica_type() -> None:
    admission = workload_admission(stored_workload("mpijob"))
    assert admission is not None
    assert {name: a.count for name, a in admission.items()} == {"launcher": 1, "worker": 3}
    placed = [host for a in admission.values() for host in a.pods_at(HOST)]
    assert len(placed) == len(set(placed)) == 4  # 8 GPUs a pod: one pod per 8-GPU node


def test_captured_lws_workload_has_leader_and_worker_podsets() -> None:
    admission = workload_admission(stored_workload("lws"))
    assert admission is not None
    assert {name: a.count for name, a in admission.items()} == {"leader": 1, "worker": 2}


def test_unadmitted_workload_reads_as_none() -> None:
    workload = stored_workload("job")
    del workload["status"]["admission"]
    assert workload_admission(workload) is None


def test_slices_expand_universal_individual_prefix_and_suffix() -> None:
    assignment = {
        "levels": ["rack", HOST],
        "slices": [
            {
                "domainCount": 2,
                "podCounts": {"individual": [3, 1]},
                "valuesPerLevel": [
                    {"universal": "r1"},
                    {"individual": {"prefix": "node-", "suffix": ".gpu", "roots": ["a", "b"]}},
                ],
            },
            {
                "domainCount": 1,
                "podCounts": {"universal": 2},
                "valuesPerLevel": [{"universal": "r2"}, {"individual": {"roots": ["c"]}}],
            },
        ],
    }
    levels, domains = expand_topology_assignment(assignment)
    assert levels == ("rack", HOST)
    assert domains == [(("r1", "node-a.gpu"), 3), (("r1", "node-b.gpu"), 1), (("r2", "c"), 2)]


def test_v1beta1_domains_are_read_as_they_are() -> None:
    assignment = {
        "levels": [HOST],
        "domains": [{"values": ["n0"], "count": 2}, {"values": ["n1"], "count": 1}],
    }
    assert expand_topology_assignment(assignment) == ((HOST,), [(("n0",), 2), (("n1",), 1)])


@pytest.mark.parametrize(
    ("piece", "message"),
    [
        ({"domainCount": 2, "podCounts": {"universal": 1}, "valuesPerLevel": []}, "valuesPerLevel"),
        (
            {
                "domainCount": 2,
                "podCounts": {"universal": 1},
                "valuesPerLevel": [{"individual": {"roots": ["a"]}}],
            },
            "roots",
        ),
        ({"domainCount": 1, "podCounts": {}, "valuesPerLevel": [{"universal": "a"}]}, "podCounts"),
        (
            {
                "domainCount": 1,
                "podCounts": {"universal": 1},
                "valuesPerLevel": [{"universal": "a", "individual": {}}],
            },
            "exactly one",
        ),
    ],
)
def test_malformed_slices_are_errors(piece: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        expand_topology_assignment({"levels": [HOST], "slices": [piece]})


def test_an_assignment_without_slices_or_domains_is_an_error() -> None:
    """What a v1beta1 read returns here: no conversion webhook, so the slices are pruned away."""
    with pytest.raises(ValueError, match="neither slices nor domains"):
        expand_topology_assignment({"levels": [HOST]})
