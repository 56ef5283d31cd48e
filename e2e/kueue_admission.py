"""Reading what Kueue decided: a Workload's admission, expanded, and waiting for it.

The pure readers (``workload_admission``, ``expand_topology_assignment``, ``condition_true``) live
in ``webhook.track.admission``, where the lifecycle tracker uses them too; they are re-exported
here under their old names. ``owned_workloads`` / ``wait_admitted`` find a job's Workloads on a
control plane by ownerReference; /readyz of Kueue says nothing about admission, so tests poll.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from e2e.controlplane import ControlPlane
from webhook.track.admission import (  # the library's reader, shared with the lifecycle tracker
    Domain,
    PodSetAdmission,
    condition_true,
    expand_topology_assignment,
    workload_admission,
)

__all__ = [
    "Domain",
    "PodSetAdmission",
    "condition_true",
    "expand_topology_assignment",
    "owned_workloads",
    "wait_admitted",
    "wait_for",
    "workload_admission",
]


def owned_workloads(cp: ControlPlane, namespace: str, kind: str, name: str) -> list[dict[str, Any]]:
    """The Workloads in ``namespace`` with an ownerReference to ``kind``/``name``, sorted by name."""
    items = cp.kubectl_json("get", "workloads.kueue.x-k8s.io", "-n", namespace)["items"]
    owned = [
        w
        for w in items
        if any(
            ref.get("kind") == kind and ref.get("name") == name
            for ref in w["metadata"].get("ownerReferences") or ()
        )
    ]
    return sorted(owned, key=lambda w: str(w["metadata"]["name"]))


def wait_for(what: str, check: Callable[[], bool], timeout: float = 60.0, every: float = 0.25) -> None:
    """Poll ``check`` until it returns True; AssertionError naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(every)


def wait_admitted(
    cp: ControlPlane, namespace: str, kind: str, name: str, count: int = 1, timeout: float = 60.0
) -> list[dict[str, Any]]:
    """Wait until ``count`` Workloads owned by ``kind``/``name`` are Admitted; return them (by name)."""
    found: list[dict[str, Any]] = []

    def admitted() -> bool:
        nonlocal found
        found = owned_workloads(cp, namespace, kind, name)
        return len(found) == count and all(condition_true(w, "Admitted") for w in found)

    try:
        wait_for(f"{count} admitted Workload(s) of {kind} {namespace}/{name}", admitted, timeout, every=0.5)
    except AssertionError as exc:
        states = {
            w["metadata"]["name"]: [
                f"{c.get('type')}={c.get('status')} ({c.get('message', '')})"
                for c in (w.get("status") or {}).get("conditions") or ()
            ]
            for w in found
        }
        raise AssertionError(f"{exc}; Workloads seen: {json.dumps(states, indent=1)}") from None
    return found
