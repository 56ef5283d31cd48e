"""Capture what the real Kueue does to training objects, as YAML fixtures for unit tests.

Run once (and again after a Kueue bump); the output is committed::

    .venv/bin/python -m e2e.capture_kueue_objects [--out tests/webhook/manifests/kueue_stored]

It starts the e2e control plane and Kueue (e2e/kueue.py) on the scenario of e2e/kueue_scenario.py
(16 Ready 8-GPU nodes, 2 blocks × 2 racks × 4), creates a plain Job, an MPIJob with
``runLauncherAsWorker`` and a LeaderWorkerSet, each rack-required, and writes for each:

- ``<kind>.yaml``: the object as the API server stored it on create, i.e. after Kueue's mutating
  webhook ran (the create response), before Kueue's controllers touched it;
- ``<kind>-admitted.yaml`` (Job, MPIJob): the object once Kueue admitted and unsuspended it;
- ``<kind>-workload.yaml``: its Workload(s) once Admitted.

Volatile fields are normalised so a re-capture only differs where Kueue's behaviour did:
``managedFields``, ``uid``, ``resourceVersion`` and ``creationTimestamp`` are dropped; owner-reference
UIDs and the UID-valued labels (``kueue.x-k8s.io/job-uid``, the Job's ``controller-uid`` labels
and selector) become ``UID_PLACEHOLDER``; status timestamps become ``TIME_PLACEHOLDER`` and status
conditions are sorted by type. Workload names keep Kueue's hash suffix (it hashes the owner's UID,
so it changes on every capture), and so does the ``kueue.x-k8s.io/workload`` annotation naming it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from e2e.controlplane import ControlPlane, pinned_versions
from e2e.kueue import Kueue, pinned_kueue_version
from e2e.kueue_admission import owned_workloads, wait_admitted, wait_for
from e2e.kueue_scenario import add_gpu_nodes, job, leader_worker_set, mpi_job, setup_queues

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO_ROOT / "tests" / "webhook" / "manifests" / "kueue_stored"
NAMESPACE = "kueue-capture"
UID_PLACEHOLDER = "00000000-0000-0000-0000-000000000000"
TIME_PLACEHOLDER = "2026-01-01T00:00:00Z"
_DROPPED_METADATA = ("managedFields", "uid", "resourceVersion", "creationTimestamp")
_TIME_KEYS = {"lastTransitionTime", "lastHeartbeatTime", "lastUpdateTime", "startTime", "completionTime"}
# Label keys whose value is the owner's UID, wherever they occur (metadata, selectors, templates).
_UID_LABELS = {"kueue.x-k8s.io/job-uid", "batch.kubernetes.io/controller-uid", "controller-uid"}


def normalise(obj: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``obj`` without the fields that differ between two otherwise identical captures."""
    out: dict[str, Any] = json.loads(json.dumps(obj))
    metadata = out.get("metadata") or {}
    for key in _DROPPED_METADATA:
        metadata.pop(key, None)
    for ref in metadata.get("ownerReferences") or ():
        if "uid" in ref:
            ref["uid"] = UID_PLACEHOLDER
    _replace(out, _UID_LABELS, UID_PLACEHOLDER)
    status = out.get("status")
    _replace(status, _TIME_KEYS, TIME_PLACEHOLDER)
    if isinstance(status, dict) and isinstance(status.get("conditions"), list):
        # A map keyed by type (listType=map); Kueue appends in the order it happened to write them.
        status["conditions"].sort(key=lambda c: str(c.get("type")))
    return out


def _replace(node: Any, keys: set[str], placeholder: str) -> None:
    """Set every string value under one of ``keys``, at any depth of ``node``, to ``placeholder``."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in keys and isinstance(value, str):
                node[key] = placeholder
            else:
                _replace(value, keys, placeholder)
    elif isinstance(node, list):
        for item in node:
            _replace(item, keys, placeholder)


def header(what: str) -> str:
    kube, _ = pinned_versions()
    return (
        f"# {what}\n"
        f"# Captured by e2e/capture_kueue_objects.py: real Kueue {pinned_kueue_version()}"
        f" on kube-apiserver {kube}.\n"
        "# Normalised: managedFields/uid/resourceVersion/creationTimestamp dropped; owner and\n"
        f"# UID-label UIDs = {UID_PLACEHOLDER}; status timestamps = {TIME_PLACEHOLDER},\n"
        "# conditions sorted by type. Regenerate with the script; do not edit by hand.\n"
    )


def write(out: Path, name: str, what: str, objects: list[dict[str, Any]]) -> Path:
    path = out / f"{name}.yaml"
    body = yaml.safe_dump_all([normalise(o) for o in objects], sort_keys=False, default_flow_style=False)
    path.write_text(header(what) + body)
    return path


def create(cp: ControlPlane, obj: dict[str, Any]) -> dict[str, Any]:
    stored: dict[str, Any] = json.loads(
        cp.kubectl("create", "-o", "json", "-f", "-", input=json.dumps(obj)).stdout
    )
    return stored


def capture(out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    with ControlPlane() as cp, Kueue(cp) as _:
        add_gpu_nodes(cp, blocks=2, racks_per_block=2, per_rack=4)
        setup_queues(cp, NAMESPACE)
        cases: list[tuple[str, str, str, dict[str, Any], Callable[[dict[str, Any]], bool] | None]] = [
            (
                "job",
                "Job",
                "job",
                job("train", NAMESPACE, pods=4),
                lambda o: o["spec"].get("suspend") is False,
            ),
            (
                "mpijob",
                "MPIJob",
                "mpijob",
                mpi_job("mpi", NAMESPACE, workers=3),
                lambda o: o["spec"]["runPolicy"].get("suspend") is False,
            ),
            ("lws", "LeaderWorkerSet", "leaderworkerset", leader_worker_set("lws", NAMESPACE, size=3), None),
        ]
        for stem, kind, resource, manifest, unsuspended in cases:
            name = manifest["metadata"]["name"]
            stored = create(cp, manifest)
            written.append(
                write(
                    out, stem, f"{kind} {name} as stored on create (after Kueue's mutating webhook)", [stored]
                )
            )
            workloads = wait_admitted(cp, NAMESPACE, kind, name, timeout=90)
            if unsuspended is not None:
                check = unsuspended

                def done(
                    resource: str = resource,
                    name: str = name,
                    check: Callable[[dict[str, Any]], bool] = check,
                ) -> bool:
                    return check(cp.kubectl_json("get", resource, name, "-n", NAMESPACE))

                wait_for(f"Kueue to unsuspend {kind} {name}", done, 30)
                admitted = cp.kubectl_json("get", resource, name, "-n", NAMESPACE)
                written.append(
                    write(out, f"{stem}-admitted", f"{kind} {name} after Kueue admitted it", [admitted])
                )
            # Re-read: the Admitted condition may have been written a moment before the last status fields.
            time.sleep(0.5)
            workloads = owned_workloads(cp, NAMESPACE, kind, name)
            written.append(
                write(out, f"{stem}-workload", f"the Workload(s) of {kind} {name}, Admitted", workloads)
            )
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help=f"output directory (default {DEFAULT_OUT})"
    )
    args = parser.parse_args(argv)
    for path in capture(args.out):
        print(path, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
