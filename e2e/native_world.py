"""Driving and reading the native-scheduling cluster: objects in, what the real components did out.

Shared by ``e2e/capture_native_objects.py``, ``tests/e2e_native`` and ``tests/e2e_native137``.
Everything here goes through kubectl against the real API server; what only the scheduler's log
says (its count of PodGroup cycles, PreEnqueue's gates, no API object records them) is read
through e2e/native_log.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from e2e.controlplane import ControlPlane
from e2e.native import (
    COMPOSITE_POD_GROUPS,
    POD_GROUPS,
    WORKLOADS,
    NativeCluster,
    kinds_for_state,
)
from e2e.native_log import (
    GROUP_GATES,
    MIN_COUNT_GATE,
    cycle_pattern,
    gate_pattern,
    named_pods,
    parked_pattern,
    scheduled_pattern,
)
from e2e.native_pods import Settled, bound, refused
from e2e.native_scenario import BLOCKER_NAMESPACE, NODE_ALLOCATABLE, blocker_pods, nodes, priority_classes

SETTLE_TIMEOUT = 60.0


def wait_until(what: str, check: Callable[[], bool], timeout: float = SETTLE_TIMEOUT) -> None:
    """Poll ``check`` until True; AssertionError naming ``what`` when ``timeout`` passes first."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.25)


class NativeWorld:
    """The suite's cluster: nodes and blockers, rows submitted, settled, cleared."""

    def __init__(self, cp: ControlPlane, cluster: NativeCluster) -> None:
        self.cp, self.cluster = cp, cluster
        self.node_labels = nodes()

    # -- the cluster --

    def build(self) -> None:
        """The nodes (Ready, untainted) and the blocker pods, running."""
        for name, labels in self.node_labels.items():
            self.cluster.add_node(name, NODE_ALLOCATABLE, labels)
        self.cluster.wait_nodes_ready(list(self.node_labels))
        self.cp.kubectl("create", "namespace", BLOCKER_NAMESPACE)
        self.create(priority_classes())
        self.restore_blockers()

    def restore_blockers(self) -> None:
        """(Re)create every blocker pod that is missing and wait until all run."""
        present = {p["metadata"]["name"] for p in self.pods(BLOCKER_NAMESPACE)}
        missing = [p for p in blocker_pods() if p["metadata"]["name"] not in present]
        if missing:
            self.create(missing)
        want = {p["metadata"]["name"] for p in blocker_pods()}

        def running() -> bool:
            phases = {p["metadata"]["name"]: p["status"].get("phase") for p in self.pods(BLOCKER_NAMESPACE)}
            return all(phases.get(name) == "Running" for name in want)

        wait_until("the blocker pods Running", running)

    def wait_running(self, namespace: str) -> None:
        """Until every pod of ``namespace`` runs (pods bound by nodeName, started by kwok)."""
        wait_until(
            f"the pods of {namespace} Running",
            lambda: all(p["status"].get("phase") == "Running" for p in self.pods(namespace)),
        )

    def free_blockers(self) -> None:
        """Delete every blocker pod and wait until they are gone: the whole cluster is free."""
        self.cp.kubectl(
            "delete", "pods", "--all", "-n", BLOCKER_NAMESPACE, "--grace-period=0", "--wait=false"
        )
        wait_until("the blocker pods gone", lambda: not self.pods(BLOCKER_NAMESPACE))

    def sync_scheduler(self, namespace: str) -> None:
        """Return once the scheduler's queue and cache hold every pod event so far.

        A sentinel pod (no requests, no group) is created and waited for until bound: the queue
        has seen every earlier pod. The sentinel is then deleted, and the scheduler's cache dump
        compared with the API's bound pods until they are equal: the informer feeds the cache
        through a handler of its own, which can lag the queue's. Without this a group could run
        cycles on a snapshot that still holds deleted pods.
        """
        sentinel = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "sentinel", "namespace": namespace},
            "spec": {"terminationGracePeriodSeconds": 0, "containers": [{"name": "s", "image": "pause"}]},
        }
        self.create([sentinel])

        def bound_sentinel() -> bool:
            return bool(
                self.cp.kubectl_json("get", "pod", "sentinel", "-n", namespace)["spec"].get("nodeName")
            )

        wait_until("the scheduler binding the sentinel pod", bound_sentinel)
        self.cp.kubectl("delete", "pod", "sentinel", "-n", namespace, "--grace-period=0", "--wait=false")
        wait_until("the sentinel pod gone", lambda: "sentinel" not in self.pod_names(namespace))
        last: list[str] = []

        def synced() -> bool:
            last[:] = self.cache_difference()
            return not last

        try:
            wait_until("the scheduler's cache holding the API's bound pods, no more, no fewer", synced)
        except AssertionError as exc:
            raise AssertionError(f"{exc}: {'; '.join(last)}") from None

    def cache_difference(self) -> list[str]:
        """How the scheduler's cache (its own dump, e2e/native_cache.py) differs from the pods the
        API server has bound, each on its node: one line per pod, none when they agree. Finished
        pods are not compared: the scheduler's pod informer lists only pods whose phase is neither
        Succeeded nor Failed (``newPodInformer``, pkg/scheduler/scheduler.go)."""
        items = self.cp.kubectl_json("get", "pods", "-A")["items"]
        on_api = {
            f"{p['metadata']['namespace']}/{p['metadata']['name']}": p["spec"]["nodeName"]
            for p in items
            if bound(p) and p.get("status", {}).get("phase") not in ("Succeeded", "Failed")
        }
        cached = self.cluster.scheduler_cache()
        return [
            f"{pod}: cache {cached.get(pod, '-')}, API {on_api.get(pod, '-')}"
            for pod in sorted(on_api.keys() | cached.keys())
            if cached.get(pod) != on_api.get(pod)
        ]

    def pod_names(self, namespace: str) -> set[str]:
        return {p["metadata"]["name"] for p in self.pods(namespace)}

    def create_group(self, objects: Sequence[Mapping[str, Any]]) -> None:
        """Create a hand-written group's objects: its leading pods, then, once the scheduler holds
        every one of them (gated for want of their PodGroup), the rest.

        The scheduler watches pods and PodGroups through separate informers: a PodGroup created
        right after its pods can reach it before the last pods do, and with ``minCount`` below the
        count its first cycle then runs on only some of them (GangScheduling admits the gang once
        ``minCount`` pods exist). Waiting for the gate line of each pod shows the first cycle the
        whole group, the group tasgate judges.
        """
        head = [o for o in objects if o.get("kind") == "Pod"]
        if not head or objects[: len(head)] != head:
            self.create(objects)
            return
        self.create(head)
        namespace = str(head[0]["metadata"]["namespace"])
        names = {str(p["metadata"]["name"]) for p in head}
        wait_until(
            f"the scheduler gating {len(names)} pods until their PodGroup exists",
            lambda: self.gated(namespace, names, GROUP_GATES) | self.parked(namespace, names) == names,
        )
        self.create(objects[len(head) :])

    def create(self, objects: Iterable[Mapping[str, Any]]) -> None:
        self.cp.kubectl("create", "-f", "-", input=yaml.safe_dump_all(list(objects), sort_keys=False))

    def pods(self, namespace: str, selector: str | None = None) -> list[dict[str, Any]]:
        args = ["get", "pods", "-n", namespace] + (["-l", selector] if selector else [])
        return list(self.cp.kubectl_json(*args)["items"])

    def items(self, kind: str, namespace: str) -> list[dict[str, Any]]:
        return list(self.cp.kubectl_json("get", kind, "-n", namespace)["items"])

    def dump_state(self, directory: Path) -> Path:
        """What docs/cli.md's ``--state`` reads, plus the native kinds (PodGroups, Workloads and, on
        v1.37, CompositePodGroups), as kubectl prints them, and the discovery document of each
        served native group-version (``APIResourceList``): an empty cluster holds no native object
        that would show tasgate the API is served (webhook/state/native.py)."""
        directory.mkdir(parents=True, exist_ok=True)
        k8s = self.cluster.k8s
        for i, kinds in enumerate(kinds_for_state(k8s)):
            text = self.cp.kubectl("get", kinds, "-A", "-o", "yaml").stdout
            (directory / f"state-{i}.yaml").write_text(text)
        for api in k8s.served_apis:
            discovery = self.cp.kubectl("get", "--raw", f"/apis/{api}").stdout
            version = api.rsplit("/", 1)[1]
            name = "discovery.json" if api == k8s.scheduling_api else f"discovery-{version}.json"
            (directory / name).write_text(discovery)
        return directory

    def clear(self, namespace: str) -> None:
        """Delete every Job, Pod, PodGroup, Workload and LimitRange of ``namespace`` and wait until
        none is left."""
        kinds = f"jobs,pods,{POD_GROUPS},{WORKLOADS},limitranges"
        if self.cluster.k8s.composite_api is not None:
            kinds += f",{COMPOSITE_POD_GROUPS}"
        self.cp.kubectl("delete", kinds, "--all", "-n", namespace, "--grace-period=0", "--wait=false")
        wait_until(
            f"{namespace} empty", lambda: not self.cp.kubectl_json("get", kinds, "-n", namespace)["items"]
        )

    # -- a group's fate --

    def pod_group(self, namespace: str, name: str) -> dict[str, Any]:
        return dict(self.cp.kubectl_json("get", POD_GROUPS, name, "-n", namespace))

    def job_pod_group(self, namespace: str, job: str) -> str:
        """The PodGroup the Job controller made for Job ``job`` (it is owned by the Job)."""
        found: list[str] = []

        def made() -> bool:
            found[:] = [
                g["metadata"]["name"]
                for g in self.items(POD_GROUPS, namespace)
                if any(
                    r.get("kind") == "Job" and r.get("name") == job
                    for r in g["metadata"].get("ownerReferences") or ()
                )
            ]
            return bool(found)

        wait_until(f"the Job controller's PodGroup for Job {namespace}/{job}", made)
        return found[0]

    def group_pods(self, namespace: str, group: str) -> list[dict[str, Any]]:
        """The pods naming PodGroup ``group`` (the sentinel and blockers name none)."""
        return [
            p
            for p in self.pods(namespace)
            if (p["spec"].get("schedulingGroup") or {}).get("podGroupName") == group
        ]

    def now(self, namespace: str, group: str, count: int) -> tuple[Settled, bool]:
        """The group as it is, and whether it is settled (see ``settle``), without waiting."""
        pods = self.group_pods(namespace, group)
        state = Settled(self.pod_group(namespace, group), pods)
        done = len(pods) == count and all(bound(p) or refused(p) for p in pods)
        return state, state.condition is not None and done

    def settle(self, namespace: str, group: str, count: int, timeout: float = SETTLE_TIMEOUT) -> Settled:
        """Until the scheduler wrote the group's PodGroupScheduled condition and every one of its
        ``count`` pods is either bound or marked unschedulable by it."""
        seen: list[Settled] = []

        def settled() -> bool:
            state, done = self.now(namespace, group, count)
            seen[:] = [state]
            return done

        try:
            wait_until(f"PodGroup {namespace}/{group} settled", settled, timeout)
        except AssertionError as exc:
            last = seen[0] if seen else None
            detail = f"condition {last.condition}, bound {last.bound_nodes}" if last else "nothing yet"
            raise AssertionError(f"{exc}; {detail}") from None
        return seen[0]

    def wait_gated(self, namespace: str, group: str, count: int) -> None:
        """Until all ``count`` pods of ``group`` exist and GangScheduling's PreEnqueue logged
        keeping each out of the queue for want of ``minCount`` pods."""

        def all_gated() -> bool:
            names = [p["metadata"]["name"] for p in self.group_pods(namespace, group)]
            return len(names) == count and self.gated(namespace, names) == set(names)

        wait_until(f"every pod of {namespace}/{group} gated", all_gated)

    def gated(
        self, namespace: str, pods: Iterable[str], why: str | Sequence[str] = MIN_COUNT_GATE
    ) -> set[str]:
        """Which of ``pods`` GangScheduling's PreEnqueue kept out of the scheduling queue ``why``
        (its ``--vmodule=scheduling_queue=4`` line): for want of ``minCount`` pods, or of the
        PodGroup itself (``GROUP_GATES``); several reasons: any of them."""
        reasons = [why] if isinstance(why, str) else list(why)
        text = self.cluster.log_path("kube-scheduler").read_text(errors="replace")
        return named_pods(gate_pattern(namespace, reasons), text) & set(pods)

    def parked(self, namespace: str, pods: Iterable[str]) -> set[str]:
        """Which of ``pods`` the v1.37 queue parked until their group objects appear (its
        ``INCOMPLETE_GROUP`` line; v1.36 gates them in PreEnqueue instead, see ``gated``)."""
        text = self.cluster.log_path("kube-scheduler").read_text(errors="replace")
        return named_pods(parked_pattern(namespace), text) & set(pods)

    def scheduler_lines(self, namespace: str, name: str, limit: int = 12) -> list[str]:
        """The scheduler's log lines naming ``namespace/name...`` (pods, groups): a failed row's
        evidence, the last ``limit``."""
        needle = f"{namespace}/{name}"
        text = self.cluster.log_path("kube-scheduler").read_text(errors="replace")
        return [line[:400] for line in text.splitlines() if needle in line][-limit:]

    def cycles(self, namespace: str, group: str) -> int:
        """How many failed cycles the scheduler ran on the root group ``group`` and logged
        (``cycle_pattern``): the PodGroup, or a composite row's CompositePodGroup."""
        pattern = cycle_pattern(self.cluster.k8s.minor, namespace, group)
        text = self.cluster.log_path("kube-scheduler").read_text(errors="replace")
        return sum(1 for line in text.splitlines() if pattern.search(line))

    def scheduled_logged(self, namespace: str, group: str) -> bool:
        """Whether the scheduler logged a successful cycle for PodGroup ``group`` (``scheduled_pattern``)."""
        text = self.cluster.log_path("kube-scheduler").read_text(errors="replace")
        return bool(scheduled_pattern(namespace, group).search(text))

    def scheduler_events(self, namespace: str) -> list[dict[str, Any]]:
        """The events the scheduler wrote in ``namespace`` (FailedScheduling, Scheduled)."""
        items = self.cp.kubectl_json("get", "events.events.k8s.io", "-n", namespace)["items"]
        return [e for e in items if e.get("reportingController") == "default-scheduler"]
