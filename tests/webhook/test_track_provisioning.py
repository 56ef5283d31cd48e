"""The tracker follows a gang behind a ProvisioningRequest check (issue 37.1): quota reserved with
its topology delayed, capacity pending, then provisioned, then placed. Workloads shaped as Kueue
v0.19.2 writes them (``delayedTopologyRequest`` on the PodSet assignment, ``status.admissionChecks``).
"""

from __future__ import annotations

from typing import Any

from webhook.track.classify import Gang, State, classify
from webhook.track.records import parse_workload

T0 = "2026-12-06T10:00:00Z"


def workload(check_state: str, delayed: str | None, admitted: bool = False) -> dict[str, Any]:
    assignment: dict[str, Any] = {
        "name": "main",
        "count": 10,
        "flavors": {"nvidia.com/gpu": "prov-flavor"},
        "resourceUsage": {"nvidia.com/gpu": "80"},
    }
    if delayed is not None:
        assignment["delayedTopologyRequest"] = delayed
    reason = "Admitted" if admitted else "UnsatisfiedChecks"
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "job-big-1", "namespace": "team", "uid": "u1", "creationTimestamp": T0},
        "spec": {"queueName": "prov-queue", "podSets": [{"name": "main", "count": 10}]},
        "status": {
            "conditions": [
                {
                    "type": "QuotaReserved",
                    "status": "True",
                    "reason": "QuotaReserved",
                    "lastTransitionTime": T0,
                },
                {"type": "Admitted", "status": str(admitted), "reason": reason, "lastTransitionTime": T0},
            ],
            "admission": {"clusterQueue": "prov-cq", "podSetAssignments": [assignment]},
            "admissionChecks": [
                {
                    "name": "prov-check",
                    "state": check_state,
                    "message": "Provisioning Request was successfully provisioned."
                    if check_state == "Ready"
                    else "",
                    "lastTransitionTime": T0,
                }
            ],
        },
    }


def state_of(obj: dict[str, Any]) -> tuple[State, str, str]:
    status = classify(Gang(parse_workload(obj)), now=1e10, partial_start_after=300)
    return status.state, status.reason, status.message


def test_pending_provisioning_names_the_check() -> None:
    state, reason, message = state_of(workload("Pending", "Pending"))
    assert (state, reason) == (State.WAITING_PROVISIONING, "PendingProvisioning")
    assert 'admission check "prov-check"' in message


def test_provisioned_and_not_yet_placed() -> None:
    assert state_of(workload("Ready", "Pending"))[:2] == (State.WAITING_PROVISIONING, "Provisioned")


def test_placed_once_the_delayed_request_is_ready_and_admitted() -> None:
    assert state_of(workload("Ready", "Ready", admitted=True))[0] is State.ASSEMBLING


def test_a_check_that_delays_nothing_is_still_read_as_waiting_for_checks() -> None:
    assert state_of(workload("Pending", None))[:2] == (State.WAITING_QUOTA, "UnsatisfiedChecks")
