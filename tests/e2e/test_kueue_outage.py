"""Kueue is never blocked by tasgate: with tasgate dead, Kueue still starts, preempts and evicts.

The real Kueue manager runs as its service account (e2e.kueue_identity) beside ``tasgate serve``,
which is registered with its SHIPPED webhook configurations (manifests/webhooks/webhooks.yaml,
failurePolicy Fail; only ``clientConfig`` rewired to loopback). Their ``not-an-update-by-kueue``
matchCondition lets Kueue's UPDATEs through without calling tasgate. Then tasgate's process is
stopped (its endpoint refuses connections) and, in order:

1. healthy: Kueue's start PATCH of a Job never reached tasgate, while the admin's create did;
2. outage: a new Job (and a queued plain Pod) is refused, and so is a user's change to a queued
   Job, while the same change as Kueue's user passes; a Job queued before the outage (in a held
   ClusterQueue, then released) is admitted and unsuspended, a queued Pod ungated, and a running
   Job whose Workload is deactivated is suspended again, each within ``BOUND`` seconds;
3. the control: with that one matchCondition removed (tasgate still dead), Kueue admits a queued
   Workload but cannot unsuspend its Job, nor suspend a deactivated one, for ``CONTROL_WINDOW``
   seconds (its PATCHes fail calling tasgate's webhook); with the shipped configurations back,
   both happen.

The seconds measured are printed. Missing binaries FAIL (the harness's message), never skip.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from e2e.controlplane import BinariesMissingError, ControlPlane, find_binaries
from e2e.fidelity import TasgateServer, tasgate_called, tasgate_webhook_configurations
from e2e.kueue import Kueue, find_kueue
from e2e.kueue_admission import condition_true, owned_workloads, wait_for
from e2e.kueue_scenario import (
    QUEUE_LABEL,
    add_gpu_nodes,
    cluster_queue,
    job,
    local_queue,
    pod_template,
    setup_queues,
)

pytestmark = pytest.mark.e2e

NS = "outage"
HELD, CONTROL = "held", "control"  # ClusterQueue <x>-cq held at first, LocalQueue <x>-queue
KUEUE_CONDITION = "not-an-update-by-kueue"
BOUND = 30.0  # seconds Kueue may take to start or stop a workload while tasgate is down
CONTROL_WINDOW = 12.0  # seconds a start and a stop must stay blocked without the exemption
REFUSED = 'failed calling webhook "mutate.tasgate.io"'
TIMES: dict[str, float] = {}


@dataclass
class World:
    cp: ControlPlane
    kueue: Kueue
    tasgate: TasgateServer


def _or_fail(find: Callable[[], Any]) -> Any:
    try:
        return find()
    except BinariesMissingError as exc:
        message = str(exc)
    pytest.fail(message, pytrace=False)


def configurations(world: World, *, exempt_kueue: bool = True) -> list[dict[str, Any]]:
    """The shipped configurations pointed at tasgate; without Kueue's exemption for the control."""
    docs = tasgate_webhook_configurations(world.tasgate.port, world.tasgate.ca_bundle())
    for doc in docs:
        for hook in doc["webhooks"]:
            names = [c["name"] for c in hook["matchConditions"]]
            assert KUEUE_CONDITION in names, f"the shipped {doc['kind']} lost {KUEUE_CONDITION}"
            if not exempt_kueue:
                hook["matchConditions"] = [c for c in hook["matchConditions"] if c["name"] != KUEUE_CONDITION]
    return docs


def register(world: World, docs: list[dict[str, Any]]) -> None:
    world.cp.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=yaml.safe_dump_all(docs))


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    binaries, kueue_binary = _or_fail(find_binaries), _or_fail(find_kueue)
    with ControlPlane(binaries=binaries) as cp, Kueue(cp, binary=kueue_binary) as kueue:
        add_gpu_nodes(cp)
        setup_queues(cp, NS)
        queues = [
            q
            for x in (HELD, CONTROL)
            for q in (cluster_queue(f"{x}-cq", "Hold"), local_queue(NS, f"{x}-queue", f"{x}-cq"))
        ]
        cp.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(queues))
        tasgate = TasgateServer(cp, cp.dir / "tasgate")
        built = World(cp, kueue, tasgate)
        try:
            wait_for("tasgate to sync and report ready", tasgate.ready, 60, every=0.3)
            register(built, configurations(built))
            wait_for("the API server to call tasgate", lambda: _tasgate_answers(built), 30, every=0.3)
            yield built
        finally:
            tasgate.stop()
            cp.kubectl(
                "delete",
                "--ignore-not-found",
                "mutatingwebhookconfiguration/tasgate",
                "validatingwebhookconfiguration/tasgate",
                check=False,
            )


def _tasgate_answers(world: World) -> bool:
    probe = job("tasgate-probe", NS, pods=1)
    created = world.cp.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(probe), check=False)
    seen = {line.get("endpoint") for line in world.tasgate.audit() if line.get("name") == "tasgate-probe"}
    return created.returncode == 0 and seen >= {"mutate", "validate"}


# --- reading and writing the world ---------------------------------------------------------------


def submit(world: World, obj: dict[str, Any]) -> Any:
    return world.cp.kubectl("create", "-f", "-", input=json.dumps(obj), check=False)


def suspended(world: World, name: str) -> bool | None:
    value = world.cp.kubectl_json("get", "job", name, "-n", NS)["spec"].get("suspend")
    return value if isinstance(value, bool) else None


def workload(world: World, kind: str, name: str) -> dict[str, Any]:
    (found,) = owned_workloads(world.cp, NS, kind, name)
    return found


def admitted(world: World, name: str, kind: str = "Job") -> bool:
    return condition_true(workload(world, kind, name), "Admitted")


def set_active(world: World, name: str, active: bool) -> None:
    patch = json.dumps({"spec": {"active": active}})
    wl = workload(world, "Job", name)["metadata"]["name"]
    world.cp.kubectl("patch", "workloads.kueue.x-k8s.io", wl, "-n", NS, "--type=merge", "-p", patch)


def release(world: World, queue: str) -> None:
    """Lift the Hold: from now Kueue may admit what the ClusterQueue queued."""
    world.cp.kubectl(
        "patch", "clusterqueue", f"{queue}-cq", "--type=merge", "-p", '{"spec":{"stopPolicy":"None"}}'
    )


def change_as(world: World, name: str, user: str | None) -> Any:
    """A server-side dry-run label change of Job ``name``, as the admin or impersonating ``user``."""
    who = [f"--as={user}"] if user else []
    patch = json.dumps({"metadata": {"labels": {"probe": str(time.monotonic_ns())}}})
    return world.cp.kubectl(
        "patch", "job", name, "-n", NS, "--dry-run=server", "--type=merge", "-p", patch, *who, check=False
    )


def timed(what: str, check: Callable[[], bool], timeout: float) -> float:
    started = time.monotonic()
    wait_for(what, check, timeout, every=0.1)
    return round(time.monotonic() - started, 2)


def job_requests(world: World, name: str, verbs: tuple[str, ...]) -> list[dict[str, Any]]:
    """The audit log's requests of Job ``name`` itself (not a subresource) with one of ``verbs``."""
    return [
        e
        for e in world.cp.audit_events()
        if e.get("verb") in verbs
        and e.get("stage") == "ResponseComplete"
        and (e.get("objectRef") or {}).get("resource") == "jobs"
        and e["objectRef"].get("name") == name
        and not e["objectRef"].get("subresource")
    ]


def kueue_writes(world: World, name: str, *, refused: bool = False) -> list[dict[str, Any]]:
    """Kueue's PATCH/UPDATEs of Job ``name``; with ``refused``, only those failing on tasgate's webhook."""
    return [
        e
        for e in job_requests(world, name, ("patch", "update"))
        if e["user"]["username"] == world.kueue.identity.username
        and (not refused or REFUSED in str((e.get("responseStatus") or {}).get("message")))
    ]


def queued_pod(name: str) -> dict[str, Any]:
    """A plain Pod Kueue manages (queue label): gated on create, ungated by Kueue's UPDATE."""
    template = pod_template()
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": {QUEUE_LABEL: f"{HELD}-queue"}},
        "spec": template["spec"],
    }


def gated(world: World, name: str) -> bool:
    return bool(world.cp.kubectl_json("get", "pod", name, "-n", NS)["spec"].get("schedulingGates"))


# --- the tests, in order --------------------------------------------------------------------------


def test_kueues_start_never_calls_tasgate(world: World) -> None:
    """Healthy: the admin's create went through tasgate; Kueue's start PATCH, by its name, did not."""
    assert submit(world, job("running", NS, pods=1)).returncode == 0
    wait_for("Kueue to start running", lambda: suspended(world, "running") is False, BOUND)
    creates = job_requests(world, "running", ("create",))
    assert creates and all(tasgate_called(e) for e in creates)
    writes = kueue_writes(world, "running")
    assert writes and not any(tasgate_called(e) for e in writes), writes
    assert not [
        line
        for line in world.tasgate.audit()
        if line.get("name") == "running" and line.get("operation") == "UPDATE"
    ]


def test_an_outage_refuses_submissions_and_never_blocks_kueue(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, queue in (("queued", HELD), ("control", CONTROL)):
        assert submit(world, job(name, NS, pods=1, queue=f"{queue}-queue")).returncode == 0
    assert submit(world, queued_pod("queued-pod")).returncode == 0
    wait_for(
        "Kueue to create the queued Workloads",
        lambda: all(
            owned_workloads(world.cp, NS, k, n)
            for k, n in (("Job", "queued"), ("Job", "control"), ("Pod", "queued-pod"))
        ),
        BOUND,
    )
    assert not admitted(world, "queued") and suspended(world, "queued") is True and gated(world, "queued-pod")

    world.tasgate.stop()  # the outage: nothing listens on tasgate's port any more
    refused = submit(world, job("refused", NS, pods=1))
    assert refused.returncode != 0 and REFUSED in refused.stderr, refused.stderr
    refused_pod = submit(world, queued_pod("refused-pod"))
    assert refused_pod.returncode != 0 and REFUSED in refused_pod.stderr, refused_pod.stderr
    by_user = change_as(world, "queued", None)
    assert by_user.returncode != 0 and REFUSED in by_user.stderr, by_user.stderr
    by_kueue = change_as(world, "queued", world.kueue.identity.username)
    assert by_kueue.returncode == 0, by_kueue.stderr

    release(world, HELD)
    TIMES["outage: queued Job started"] = timed(
        "Kueue to start queued",
        lambda: admitted(world, "queued") and suspended(world, "queued") is False,
        BOUND,
    )
    TIMES["outage: queued Pod ungated"] = timed(
        "Kueue to ungate queued-pod", lambda: not gated(world, "queued-pod"), BOUND
    )
    set_active(world, "running", False)
    TIMES["outage: deactivated Job suspended"] = timed(
        "Kueue to suspend running", lambda: suspended(world, "running") is True, BOUND
    )
    assert not admitted(world, "running")
    with capsys.disabled():
        print(f"\ntasgate down, Kueue exempt (seconds): {TIMES}")


def test_without_the_exemption_kueue_is_blocked(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    """The control: the same dead endpoint, Kueue's matchCondition removed → no start, no stop."""
    assert world.tasgate.proc.poll() is not None, "tasgate is down"
    register(world, configurations(world, exempt_kueue=False))
    user = world.kueue.identity.username
    wait_for(
        "the configurations without the exemption to be in effect",
        lambda: REFUSED in change_as(world, "queued", user).stderr,
        30,
    )

    release(world, CONTROL)
    set_active(world, "queued", False)
    wait_for(
        "Kueue to admit control's Workload (its status is not gated)",
        lambda: admitted(world, "control"),
        BOUND,
    )
    deadline = time.monotonic() + CONTROL_WINDOW
    while time.monotonic() < deadline:
        assert suspended(world, "control") is True, (
            "Kueue started control although tasgate is down and Kueue not exempt"
        )
        assert suspended(world, "queued") is False, (
            "Kueue suspended queued although tasgate is down and Kueue not exempt"
        )
        time.sleep(0.5)
    failed_starts, failed_stops = (
        kueue_writes(world, "control", refused=True),
        kueue_writes(world, "queued", refused=True),
    )
    assert failed_starts, "Kueue's start PATCHes of control failed calling tasgate's webhook"
    assert failed_stops, "Kueue's stop PATCHes of queued failed calling tasgate's webhook"

    register(world, configurations(world))
    started = time.monotonic()
    wait_for(
        "Kueue to start control with the exemption back",
        lambda: suspended(world, "control") is False,
        2 * BOUND,
        every=0.1,
    )
    TIMES["exemption restored: blocked Job started"] = round(time.monotonic() - started, 2)
    wait_for(
        "Kueue to suspend queued with the exemption back",
        lambda: suspended(world, "queued") is True,
        2 * BOUND,
        every=0.1,
    )
    TIMES["exemption restored: blocked Job suspended"] = round(time.monotonic() - started, 2)
    with capsys.disabled():
        blocked = (
            f"{len(failed_starts)} start and {len(failed_stops)} stop PATCHes refused in {CONTROL_WINDOW:g}s"
        )
        print(f"\nwithout the exemption: {blocked}; then (seconds): {TIMES}")
