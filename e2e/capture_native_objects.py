"""Capture what the real v1.36.5 components do with native gangs, as YAML fixtures for unit tests.

Run again after a Kubernetes bump; the output is committed::

    .venv/bin/python -m e2e.capture_native_objects [--out tests/fixtures/native]

It starts the native cluster (e2e/native.py: the four feature gates, kube-controller-manager's Job
controller, kwok, the upstream kube-scheduler) on e2e/native_scenario.py's 12 nodes with their
blocker pods, runs each scenario below in a namespace of its own, waits until the scheduler has
settled it, and writes every object the scenario owns (Job, Workload, PodGroup, Pods, and the
scheduler's Events, the first of each pod, reason and note) as the components left them.
``state.yaml`` is the cluster before any scenario (Nodes as kwok keeps them and the blocker pods),
the ``--state`` a unit test checks against, with ``discovery.json`` (the API's discovery
document). Normalised like e2e/capture_kueue_objects.py (managedFields, uids, resourceVersions and
creation timestamps dropped, owner UIDs and status times replaced by placeholders), and pod IPs too.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from e2e.capture_kueue_objects import TIME_PLACEHOLDER, normalise
from e2e.controlplane import pinned_versions
from e2e.kueue_scenario import BLOCK, RACK
from e2e.native import POD_GROUPS, SCHEDULING_API, WORKLOADS, NativeCluster, native_control_plane
from e2e.native_scenario import BLOCKER_NAMESPACE, group_name, hand_written, indexed_job, job_in_group
from e2e.native_world import NativeWorld

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO_ROOT / "tests" / "fixtures" / "native"
_IP_KEYS = ("podIP", "podIPs", "hostIP", "hostIPs")
_EVENT_TIMES = ("eventTime", "deprecatedFirstTimestamp", "deprecatedLastTimestamp")


@dataclass(frozen=True)
class Scenario:
    """One fixture file: the objects to create, and how to find the group the scheduler placed."""

    file: str
    what: str
    objects: Callable[[str], list[dict[str, Any]]]
    pods: int
    job: str | None = None  # the Job whose controller-made PodGroup to wait for
    group: str | None = None  # else the hand-written PodGroup
    gated: bool = False  # no cycle ever runs: wait for GangScheduling's PreEnqueue on every pod


SCENARIOS = (
    Scenario("job-gang.yaml",
             "an Indexed Job of 3 x 4 GPUs: the Job controller's Workload and PodGroup, all bound",
             lambda ns: [indexed_job("trainer", ns, 3, 4)], 3, job="trainer"),
    Scenario("job-never-fits.yaml",
             "an Indexed Job of 2 x 16 GPUs (more than any node has): unschedulable",
             lambda ns: [indexed_job("too-big", ns, 2, 16)], 2, job="too-big"),
    Scenario("rack-gang.yaml",
             "a hand-written Workload + PodGroup (gang 4, rack key) + 4 Pods of 4 GPUs: bound in one rack",
             lambda ns: hand_written("rack4", ns, 4, 4, 4, RACK), 4, group=group_name("rack4")),
    Scenario("rack-must-wait.yaml",
             "gang 6 x 4 GPUs, rack key: no rack has 24 GPUs free now (all do when empty)",
             lambda ns: hand_written("rack6", ns, 6, 4, 6, RACK), 6, group=group_name("rack6")),
    Scenario("rack-never-fits.yaml",
             "gang 7 x 4 GPUs, rack key: 28 GPUs, more than a rack holds",
             lambda ns: hand_written("rack7", ns, 7, 4, 7, RACK), 7, group=group_name("rack7")),
    Scenario("rack-min-count.yaml",
             "gang minCount 2 of 4 x 8 GPUs, rack key: 2 bound in one rack, 2 unschedulable",
             lambda ns: hand_written("partial", ns, 4, 8, 2, RACK), 4, group=group_name("partial")),
    Scenario("block-gang.yaml",
             "gang 8 x 4 GPUs, block key: bound in one block",
             lambda ns: hand_written("block8", ns, 8, 4, 8, BLOCK), 8, group=group_name("block8")),
    Scenario("basic-rack.yaml",
             "basic policy, rack key, 3 x 4 GPUs",
             lambda ns: hand_written("basic3", ns, 3, 4, None, RACK), 3, group=group_name("basic3")),
    Scenario("job-in-group.yaml",
             "an Indexed Job whose template names a hand-written PodGroup (gang 3, rack key)",
             lambda ns: job_in_group("jobgroup", ns, 3, 4, 3, RACK), 3, group=group_name("jobgroup")),
    Scenario("template-key-only.yaml",
             "a Workload whose template asks for a rack and its PodGroup with no key, 7 x 4 GPUs: bound"
             " across racks (the scheduler reads the PodGroup)",
             lambda ns: hand_written("keyless", ns, 7, 4, 7, None, template_key=RACK), 7,
             group=group_name("keyless")),
    Scenario("job-short-of-min-count.yaml",
             "an Indexed Job of 4 x 4 GPUs joining a PodGroup of minCount 5: no pod ever enters the"
             " scheduling queue (GangScheduling PreEnqueue)",
             lambda ns: job_in_group("short", ns, 4, 4, 5, RACK), 4, group=group_name("short"), gated=True),
)  # fmt: skip


def header(what: str) -> str:
    kube = pinned_versions()[0]
    return (
        f"# {what}.\n"
        f"# As kube-apiserver, kube-controller-manager and kube-scheduler {kube} (gates GenericWorkload,\n"
        "# GangScheduling, TopologyAwareWorkloadScheduling, WorkloadWithJob) and kwok left them.\n"
        "# Regenerate with .venv/bin/python -m e2e.capture_native_objects; do not edit by hand.\n"
    )


def clean(obj: dict[str, Any]) -> dict[str, Any]:
    """normalise() plus what differs on every run for kwok pods and events (IPs, start and event times)."""
    out = normalise(obj)
    status = out.get("status")
    if isinstance(status, dict):
        for key in _IP_KEYS:
            status.pop(key, None)
        for container in status.get("containerStatuses") or ():
            running = (container.get("state") or {}).get("running")
            if isinstance(running, dict) and "startedAt" in running:
                running["startedAt"] = TIME_PLACEHOLDER
    for key in _EVENT_TIMES:
        if out.get(key):
            out[key] = TIME_PLACEHOLDER
    return out


def run_scenario(world: NativeWorld, scenario: Scenario, namespace: str) -> list[dict[str, Any]]:
    """Create the scenario in ``namespace``, wait until the scheduler settled it, read it all back."""
    world.cp.kubectl("create", "namespace", namespace)
    world.create(scenario.objects(namespace))
    group = scenario.group or world.job_pod_group(namespace, str(scenario.job))
    if scenario.gated:
        world.wait_gated(namespace, group, scenario.pods)
    else:
        world.settle(namespace, group, scenario.pods)
    objects: list[dict[str, Any]] = []
    for kind in ("jobs", WORKLOADS, POD_GROUPS, "pods"):
        objects += world.items(kind, namespace)
    return [clean(o) for o in objects + distinct(world.scheduler_events(namespace))]


def distinct(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The first Event of each (pod, reason, note): a group the scheduler retries writes dozens."""
    seen: set[tuple[str, str, str]] = set()
    kept = []
    for event in sorted(events, key=lambda e: str(e.get("eventTime"))):
        key = (
            str((event.get("regarding") or {}).get("name")),
            str(event.get("reason")),
            str(event.get("note")),
        )
        if key not in seen:
            seen.add(key)
            kept.append(event)
    return kept


def capture(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with native_control_plane() as cp, NativeCluster(cp) as cluster:
        world = NativeWorld(cp, cluster)
        world.build()
        state = cp.kubectl_json("get", "nodes", "-o", "json")["items"] + world.pods(BLOCKER_NAMESPACE)
        (out / "state.yaml").write_text(
            header("The cluster before any scenario: 12 kwok Nodes and the blocker pods")
            + yaml.safe_dump_all([clean(o) for o in state], sort_keys=True)
        )
        discovery = cp.kubectl("get", "--raw", f"/apis/{SCHEDULING_API}").stdout
        (out / "discovery.json").write_text(discovery)
        for i, scenario in enumerate(SCENARIOS):
            objects = run_scenario(world, scenario, f"capture-{i}")
            text = header(scenario.what) + yaml.safe_dump_all(objects, sort_keys=True)
            (out / scenario.file).write_text(text)
            print(f"wrote {out / scenario.file} ({len(objects)} objects)", flush=True)
            world.clear(f"capture-{i}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    capture(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
