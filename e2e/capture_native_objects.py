"""Capture what the real v1.36.5 (or v1.37.0) components do with native gangs, as YAML fixtures.

Run again after a Kubernetes bump; the output is committed::

    .venv/bin/python -m e2e.capture_native_objects [--out tests/fixtures/native]
    .venv/bin/python -m e2e.capture_native_objects --k8s v1.37.0   # -> tests/fixtures/native-v137

``--k8s`` (default ``$TASGATE_NATIVE_K8S``, else v1.36.5) picks the version (e2e/native_k8s.py);
v1.37.0 writes the same scenarios in that version's shapes (v1beta1 Workload and PodGroup with
``workloadRef``, an Indexed Job asking for its gang in ``spec.scheduling``) into
``tests/fixtures/native-v137``, plus what only v1.37 has: a Job left basic, and CompositePodGroups
(``scheduling.k8s.io/v1alpha3``).

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
from e2e.kueue_scenario import BLOCK, RACK
from e2e.native import COMPOSITE_POD_GROUPS, POD_GROUPS, WORKLOADS, NativeCluster, native_control_plane
from e2e.native_k8s import V1_36, NativeK8s, native_k8s
from e2e.native_scenario import (
    BLOCKER_NAMESPACE,
    Child,
    child_group_name,
    composite_group,
    group_name,
    hand_written,
    indexed_job,
    job_in_group,
)
from e2e.native_world import NativeWorld

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO_ROOT / "tests" / "fixtures" / "native"
DEFAULT_OUT_V137 = REPO_ROOT / "tests" / "fixtures" / "native-v137"
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
    children: tuple[tuple[str, int], ...] = ()  # a CompositePodGroup's PodGroups and their pods


def scenarios(k8s: NativeK8s) -> tuple[Scenario, ...]:
    """The scenarios, written in ``k8s``'s shapes; v1.37 adds its own (basic Job, composites)."""
    shared = (
        Scenario(
            "job-gang.yaml",
            "an Indexed Job of 3 x 4 GPUs: the Job controller's Workload and PodGroup, all bound",
            lambda ns: [indexed_job("trainer", ns, 3, 4, k8s=k8s)],
            3,
            job="trainer",
        ),
        Scenario(
            "job-never-fits.yaml",
            "an Indexed Job of 2 x 16 GPUs (more than any node has): unschedulable",
            lambda ns: [indexed_job("too-big", ns, 2, 16, k8s=k8s)],
            2,
            job="too-big",
        ),
        Scenario(
            "rack-gang.yaml",
            "a hand-written Workload + PodGroup (gang 4, rack key) + 4 Pods of 4 GPUs: bound in one rack",
            lambda ns: hand_written("rack4", ns, 4, 4, 4, RACK, k8s=k8s),
            4,
            group=group_name("rack4"),
        ),
        Scenario(
            "rack-must-wait.yaml",
            "gang 6 x 4 GPUs, rack key: no rack has 24 GPUs free now (all do when empty)",
            lambda ns: hand_written("rack6", ns, 6, 4, 6, RACK, k8s=k8s),
            6,
            group=group_name("rack6"),
        ),
        Scenario(
            "rack-never-fits.yaml",
            "gang 7 x 4 GPUs, rack key: 28 GPUs, more than a rack holds",
            lambda ns: hand_written("rack7", ns, 7, 4, 7, RACK, k8s=k8s),
            7,
            group=group_name("rack7"),
        ),
        Scenario(
            "rack-min-count.yaml",
            "gang minCount 2 of 4 x 8 GPUs, rack key: 2 bound in one rack, 2 unschedulable",
            lambda ns: hand_written("partial", ns, 4, 8, 2, RACK, k8s=k8s),
            4,
            group=group_name("partial"),
        ),
        Scenario(
            "block-gang.yaml",
            "gang 8 x 4 GPUs, block key: bound in one block",
            lambda ns: hand_written("block8", ns, 8, 4, 8, BLOCK, k8s=k8s),
            8,
            group=group_name("block8"),
        ),
        Scenario(
            "basic-rack.yaml",
            "basic policy, rack key, 3 x 4 GPUs",
            lambda ns: hand_written("basic3", ns, 3, 4, None, RACK, k8s=k8s),
            3,
            group=group_name("basic3"),
        ),
        Scenario(
            "job-in-group.yaml",
            "an Indexed Job whose template names a hand-written PodGroup (gang 3, rack key)",
            lambda ns: job_in_group("jobgroup", ns, 3, 4, 3, RACK, k8s=k8s),
            3,
            group=group_name("jobgroup"),
        ),
        Scenario(
            "template-key-only.yaml",
            "a Workload whose template asks for a rack and its PodGroup with no key, 7 x 4 GPUs: bound"
            " across racks (the scheduler reads the PodGroup)",
            lambda ns: hand_written("keyless", ns, 7, 4, 7, None, template_key=RACK, k8s=k8s),
            7,
            group=group_name("keyless"),
        ),
        Scenario(
            "job-short-of-min-count.yaml",
            "an Indexed Job of 4 x 4 GPUs joining a PodGroup of minCount 5: no pod ever enters the"
            " scheduling queue (GangScheduling PreEnqueue)",
            lambda ns: job_in_group("short", ns, 4, 4, 5, RACK, k8s=k8s),
            4,
            group=group_name("short"),
            gated=True,
        ),
    )
    if k8s.composite_api is None:
        return shared
    leader, workers = Child("leader", 1, 4, 1, RACK), Child("workers", 4, 4, 4, RACK)

    def kids(name: str, *children: Child) -> tuple[tuple[str, int], ...]:
        return tuple((child_group_name(name, c.template), c.pods) for c in children)

    huge = Child("huge", 2, 16, 2)  # 16 GPUs a pod: no node has them
    return (
        *shared,
        Scenario("job-basic.yaml",
                 "an Indexed Job of 3 x 4 GPUs without spec.scheduling: the Job controller makes a basic"
                 " Workload and PodGroup (no gang), all bound",
                 lambda ns: [indexed_job("plain", ns, 3, 4, k8s=k8s, gang=False)], 3, job="plain"),
        Scenario("composite-block.yaml",
                 "a CompositePodGroup (gang minGroupCount 2, block key) of PodGroups leader (gang 1 x 4 GPUs,"
                 " rack key) and workers (gang 4 x 4 GPUs, rack key): every pod bound in one block",
                 lambda ns: composite_group("cpg", ns, (leader, workers), 2, BLOCK, k8s=k8s), 5,
                 children=kids("cpg", leader, workers)),
        Scenario("composite-never-fits.yaml",
                 "a CompositePodGroup (gang minGroupCount 2, block key) of leader (1 x 4 GPUs) and huge"
                 " (gang 2 x 16 GPUs, more than a node has): nothing bound",
                 lambda ns: composite_group("cpgno", ns, (leader, huge), 2, BLOCK, k8s=k8s), 3,
                 children=kids("cpgno", leader, huge)),
        Scenario("composite-min-group-count.yaml",
                 "a CompositePodGroup (gang minGroupCount 1, block key) of leader (1 x 4 GPUs) and huge"
                 " (gang 2 x 16 GPUs): one child group is enough",
                 lambda ns: composite_group("cpgone", ns, (leader, huge), 1, BLOCK, k8s=k8s), 3,
                 children=kids("cpgone", leader, huge)),
    )  # fmt: skip


def header(what: str, k8s: NativeK8s) -> str:
    gates = ", ".join(k8s.feature_gates)
    return (
        f"# {what}.\n"
        f"# As kube-apiserver, kube-controller-manager and kube-scheduler {k8s.version} and kwok left them;\n"
        f"# gates {gates};\n"
        f"# served {', '.join(k8s.served_apis)}.\n"
        f"# Regenerate with .venv/bin/python -m e2e.capture_native_objects --k8s {k8s.version};\n"
        "# do not edit by hand.\n"
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
    world.create_group(scenario.objects(namespace))  # pods first, seen by the scheduler, then the rest
    if scenario.children:
        for child, pods in scenario.children:
            world.settle(namespace, child, pods)
    else:
        group = scenario.group or world.job_pod_group(namespace, str(scenario.job))
        if scenario.gated:
            world.wait_gated(namespace, group, scenario.pods)
        else:
            world.settle(namespace, group, scenario.pods)
    kinds = ["jobs", WORKLOADS, POD_GROUPS, "pods"]
    if world.cluster.k8s.composite_api is not None:
        kinds.insert(2, COMPOSITE_POD_GROUPS)
    objects: list[dict[str, Any]] = []
    for kind in kinds:
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


def discovery_files(k8s: NativeK8s) -> dict[str, str]:
    """File name -> the discovery path it holds: ``discovery.json`` is the Workload/PodGroup version's
    (what the v1.36 fixtures have), v1.37 adds ``discovery-v1alpha3.json`` (CompositePodGroup)."""
    files = {"discovery.json": f"/apis/{k8s.scheduling_api}"}
    if k8s.composite_api is not None and k8s.composite_api != k8s.scheduling_api:
        files[f"discovery-{k8s.composite_api.rsplit('/', 1)[1]}.json"] = f"/apis/{k8s.composite_api}"
    return files


def capture(out: Path, k8s: NativeK8s = V1_36, only: frozenset[str] = frozenset()) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with native_control_plane(k8s) as cp, NativeCluster(cp, k8s=k8s) as cluster:
        world = NativeWorld(cp, cluster)
        world.build()
        state = cp.kubectl_json("get", "nodes", "-o", "json")["items"] + world.pods(BLOCKER_NAMESPACE)
        (out / "state.yaml").write_text(
            header("The cluster before any scenario: 12 kwok Nodes and the blocker pods", k8s)
            + yaml.safe_dump_all([clean(o) for o in state], sort_keys=True)
        )
        for name, path in discovery_files(k8s).items():
            (out / name).write_text(cp.kubectl("get", "--raw", path).stdout)
        for i, scenario in enumerate(scenarios(k8s)):
            if only and scenario.file not in only:
                continue
            objects = run_scenario(world, scenario, f"capture-{i}")
            text = header(scenario.what, k8s) + yaml.safe_dump_all(objects, sort_keys=True)
            (out / scenario.file).write_text(text)
            print(f"wrote {out / scenario.file} ({len(objects)} objects)", flush=True)
            world.clear(f"capture-{i}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--k8s", default=None, help="v1.36.5 or v1.37.0 (default: $TASGATE_NATIVE_K8S, else v1.36.5)"
    )
    parser.add_argument("--out", type=Path, default=None, help="default: tests/fixtures/native[-v137]")
    parser.add_argument(
        "--only", action="append", default=[], help="capture only this scenario file (repeatable)"
    )
    args = parser.parse_args(argv)
    k8s = native_k8s(args.k8s)
    out = args.out or (DEFAULT_OUT if k8s == V1_36 else DEFAULT_OUT_V137)
    capture(out, k8s, frozenset(args.only))
    return 0


if __name__ == "__main__":
    sys.exit(main())
