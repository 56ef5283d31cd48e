"""Issue 37.2 on two real Kueue v0.19.2 control planes in MultiKueue mode (e2e/multikueue.py).

A MultiKueue ClusterQueue's gang is placed by a worker's Kueue on the worker's nodes; the
manager's nodes say nothing (the manager here has no GPU node at all). tasgate must judge such a
gang on the workers, and agree with what the real worker admits:

- **the manager's nodes say nothing**: without ``--worker`` tasgate allows both gangs below
  (reason ``multikueue``), never denying from the manager's GPU-less nodes;
- **never deny what Kueue would run**: a gang one worker block holds is allowed (``multikueue``,
  a warning naming the worker that holds it now); Kueue's own webhook gives the Job
  ``spec.managedBy: kueue.x-k8s.io/multikueue``, the worker's Kueue admits its Workload with a
  topology on the worker's nodes, the manager's check turns Ready and the Job appears there;
- **never let through what never will run**: a gang no worker block can ever hold is denied with
  the worker's reason by name; Kueue, given the same Job where tasgate's webhooks do not reach,
  leaves it pending on the worker with its own TAS message, forever;
- **live**: ``tasgate serve --multikueue-workers`` reads the MultiKueueClusters and their
  kubeconfig Secrets on the manager and watches the worker: ``kubectl apply`` of the too-big Job
  is denied naming the worker; the fitting one is allowed with the warning and runs there; with
  both worker blocks then taken, a third is allowed saying no worker holds it now (offline too),
  and the worker's Kueue keeps it pending.

Missing binaries FAIL, never skip.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from e2e.controlplane import BinariesMissingError, find_binaries
from e2e.fidelity import BLOCK, BYPASS_NS, HOST, REQUIRED, in_namespace, job
from e2e.fidelity import tasgate_webhook_configurations as tasgate_webhooks
from e2e.fidelity_world import REPO_ROOT
from e2e.kueue import find_kueue
from e2e.kueue_admission import wait_for, workload_admission
from e2e.multikueue import (
    MK_CONTROLLER,
    MK_QUEUE,
    WORKER,
    WORKER_NODES,
    Dispatch,
    MultiKueueWorld,
    WorkerAwareTasgate,
    apply,
    multikueue_world,
)
from e2e.nodes import GPU

pytestmark = pytest.mark.e2e
FITS_PODS, TOO_BIG_PODS = 4, 5  # a worker block is 2 racks x 2 hosts of 8 GPUs: 4 eight-GPU pods
HELD_NOW = f"worker clusters that hold it now: {WORKER}"
NEVER = "no MultiKueue worker cluster can ever run it"
WAITS = f"no worker cluster holds it now ({WORKER}: must wait)"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MultiKueueWorld]:
    try:
        binaries, kueue_binary = find_binaries(), find_kueue()
    except BinariesMissingError as exc:
        pytest.fail(str(exc), pytrace=False)
    with multikueue_world(tmp_path_factory.mktemp("multikueue"), binaries, kueue_binary) as found:
        yield found


def gang(name: str, pods: int) -> dict[str, Any]:
    return job(name, pods, {REQUIRED: BLOCK}, queue=MK_QUEUE)


def describe(verdict: Mapping[str, Any]) -> str:
    return f"reason={verdict['reason']} message={verdict.get('message')!r} warnings={verdict.get('warnings')}"


def placed_on_worker(world: MultiKueueWorld, obj: Mapping[str, Any]) -> Dispatch:
    """Kueue dispatched ``obj`` (its Job carried MultiKueue's managedBy) and the worker placed all of it
    in one of its blocks; the manager's Workload has none (its TAS was delayed, then marked Ready)."""
    stored = world.manager.kubectl_json(
        "get", "job", obj["metadata"]["name"], "-n", obj["metadata"]["namespace"]
    )
    assert stored["spec"].get("managedBy") == MK_CONTROLLER, stored["spec"].get("managedBy")
    found = world.wait_dispatched(obj)
    assert found.remote is not None and found.local is not None
    hosts = (workload_admission(found.remote) or {})["main"].pods_at(HOST)
    assert sum(hosts.values()) == obj["spec"]["parallelism"] and set(hosts) <= set(WORKER_NODES), hosts
    assert len({host.split("-")[0] for host in hosts}) == 1, hosts  # one block, as required
    (local,) = found.local["status"]["admission"]["podSetAssignments"]  # never placed on the manager:
    assert local.get("delayedTopologyRequest") == "Ready" and "topologyAssignment" not in local, local
    assert found.job is not None and "managedBy" not in found.job["spec"], found.job  # the worker runs it
    return found


def test_the_managers_own_nodes_never_deny_a_multikueue_gang(world: MultiKueueWorld) -> None:
    nodes = world.manager.kubectl_json("get", "nodes")["items"]
    assert nodes and not any(GPU in n["status"].get("allocatable", {}) for n in nodes)
    for obj in (gang("mk-alone-fits", FITS_PODS), gang("mk-alone-too-big", TOO_BIG_PODS)):
        verdict = world.check(obj, workers=False)
        assert (verdict["allowed"], verdict["reason"]) == (True, "multikueue"), describe(verdict)


def test_a_gang_a_worker_block_holds_is_allowed_and_kueue_runs_it_there(world: MultiKueueWorld) -> None:
    obj = gang("mk-fits", FITS_PODS)
    verdict = world.check(obj)
    assert (verdict["allowed"], verdict["reason"]) == (True, "multikueue"), describe(verdict)
    assert any(HELD_NOW in w for w in verdict["warnings"]), describe(verdict)
    applied = world.apply(obj)
    assert applied.returncode == 0, applied.stderr
    placed_on_worker(world, obj)


def test_a_gang_no_worker_block_holds_is_denied_and_kueue_never_admits_it(world: MultiKueueWorld) -> None:
    obj = gang("mk-too-big", TOO_BIG_PODS)
    verdict = world.check(obj)
    assert (verdict["allowed"], verdict["reason"]) == (False, "never-fits"), describe(verdict)
    assert NEVER in verdict["message"] and f"{WORKER}: " in verdict["message"], describe(verdict)
    worker_says = verdict["message"].split(f"{WORKER}: ", 1)[1]  # the worker's figure; the manager's is 0
    assert "can never fit" in worker_says and "largest block holds 4" in worker_says, describe(verdict)

    bypass = in_namespace(obj, BYPASS_NS)  # where tasgate's webhooks do not reach
    assert world.apply(bypass).returncode == 0
    pending = world.stays_pending(bypass, f"out of {TOO_BIG_PODS} pod(s)")
    assert pending.local is not None and pending.check != "Ready", pending.describe()


def live_says(world: MultiKueueWorld, tasgate: WorkerAwareTasgate, obj: Mapping[str, Any], want: str) -> None:
    """Until a server-side dry run of ``obj`` on the manager prints ``want``: live tasgate's view of
    the worker comes through its own watch of the worker's API server, which may lag."""
    said = [""]

    def says() -> bool:
        dry = world.manager.kubectl(
            "create", "--dry-run=server", "-f", "-", input=json.dumps(obj), check=False
        )
        said[0] = dry.stderr
        return want in said[0]

    try:
        wait_for(f"live tasgate to say {want!r} of {obj['metadata']['name']}", says, 60.0, every=0.5)
    except AssertionError as exc:
        raise AssertionError(
            f"{exc}; kubectl said {said[0]!r}; tasgate's log ends:\n{tasgate.log()[-2000:]}"
        ) from None


def test_live_tasgate_judges_multikueue_gangs_on_the_workers_it_watches(
    world: MultiKueueWorld, tmp_path: Path
) -> None:
    if "multikueue-workers" not in (REPO_ROOT / "webhook" / "serve" / "flags.py").read_text():
        pytest.fail("tasgate serve has no --multikueue-workers flag in this tree yet", pytrace=False)
    first = gang("mk-fits", FITS_PODS)  # holds one block (second test); the live gangs fill the other
    if world.manager_workload(first) is None:  # this test run alone
        assert world.apply(first).returncode == 0
    world.wait_dispatched(first)
    tasgate = WorkerAwareTasgate(world.manager, tmp_path)
    try:
        wait_for("tasgate to sync and report ready", tasgate.ready, 60.0, every=0.3)
        apply(world.manager, tasgate_webhooks(tasgate.port, tasgate.ca_bundle()))
        too_big, fits = gang("mk-live-too-big", TOO_BIG_PODS), gang("mk-live-fits", FITS_PODS)
        live_says(world, tasgate, too_big, NEVER)
        refused = world.apply(too_big)
        assert refused.returncode != 0 and 'admission webhook "mutate.tasgate.io" denied' in refused.stderr
        assert f"{WORKER}: " in refused.stderr and "largest block holds 4" in refused.stderr, refused.stderr
        assert world.manager_workload(too_big) is None

        live_says(world, tasgate, fits, HELD_NOW)  # the other block: the first gang holds one
        allowed = world.apply(fits)
        assert allowed.returncode == 0, allowed.stderr
        assert "Warning:" in allowed.stderr and HELD_NOW in allowed.stderr, allowed.stderr
        placed_on_worker(world, fits)

        # Both blocks are taken now: live and offline say it waits, and Kueue keeps it pending.
        third = gang("mk-live-waits", FITS_PODS)
        live_says(world, tasgate, third, WAITS)
        verdict = world.check(third)
        assert (verdict["allowed"], verdict["reason"]) == (True, "multikueue"), describe(verdict)
        assert any(WAITS in w for w in verdict["warnings"]), describe(verdict)
        assert world.apply(third).returncode == 0
        world.stays_pending(third, f"fit any of {FITS_PODS} pod(s)", seconds=3.0)
    finally:
        world.manager.kubectl(
            "delete",
            "--ignore-not-found",
            "mutatingwebhookconfiguration/tasgate",
            "validatingwebhookconfiguration/tasgate",
        )
        tasgate.stop()
