"""Issue 37.3 and 37.8 on the real Kueue v0.19.2: a quota charge that lands during a rebuild.

tasgate's Mirror rebuilds its state on a worker thread when a Kueue object changes; the usage
that arrives meanwhile is replayed onto the new state (`live.usage`). Before the fix a Workload's
quota charge that landed in that window and moved no node capacity was lost: the state published
kept the old charges and freshness read as caught up, so a review said ``fits`` where the same
world built fresh says ``waits`` (quota), until some later usage change happened to republish.

A charge that moves no node capacity is what Kueue reserves behind a ProvisioningRequest check
(quota first, the topology once capacity is provisioned). The world: a cohort of ``borrow-cq``
(8 GPUs, no check) and ``prov-lender-cq`` (16 GPUs, behind the check, which the harness never
provisions). A gang of 16 GPUs in ``borrow-cq`` fits by borrowing; once Kueue reserves the
lender's 16 for its own gang, it waits.

On a real API server the window is milliseconds, so the row opens it on purpose with the
test-only rebuild hold (``tasgate serve --test-fault-hook``, `live.rebuild_hold`): hold the next
rebuild, cause one (a new LocalQueue), let Kueue reserve the lender's quota, see the charge land
while the rebuild waits, release. tasgate's live verdict must then match the offline check of a
fresh dump (``waits``), and Kueue admits nothing.

Before the fix (7ed36da's parent's live/usage.py and live/publisher.py) the live webhook kept
answering ``fits``: "timed out after 15s waiting for live tasgate to decide allow/waits; it
decided ['allow/fits', ...]". Until this row the loss was hidden on a real cluster by two
needless rebuilds that followed every admission: Kueue's write of the ClusterQueue's status and
tasgate's own PodGroup, each rebuilt the whole state (`live.parsed.compared`: neither does now).

Missing binaries FAIL, never skip.
"""

from __future__ import annotations

import contextlib
import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from e2e.controlplane import BinariesMissingError, ControlPlane, find_binaries
from e2e.fidelity import NS, RACK, REQUIRED, Fidelity, fidelity_world, job
from e2e.fidelity_world import GPU_FLAVOR, cluster_queue, quota
from e2e.kueue import KUEUE_API_VERSION, Kueue, find_kueue, install_crds
from e2e.kueue_admission import condition_true, wait_for
from e2e.provisioning import PROV_CHECK, provisioning_crd_file, provisioning_objects, provisioning_requests

pytestmark = pytest.mark.e2e
COHORT, BORROW_CQ, LENDER_CQ = "rebuild-cohort", "borrow-cq", "prov-lender-cq"
BORROW_QUEUE, LENDER_QUEUE = "borrow-queue", "prov-lender-queue"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fidelity]:
    try:
        binaries, kueue_binary = find_binaries(), find_kueue()
    except BinariesMissingError as exc:
        pytest.fail(str(exc), pytrace=False)
    workdir = tmp_path_factory.mktemp("quota-rebuild")
    with (
        ControlPlane(binaries=binaries) as cp,
        installed(cp),
        Kueue(cp, binary=kueue_binary) as kueue,
        fidelity_world(workdir, cp, kueue, tasgate_args=("--test-fault-hook",)) as found,
    ):
        cp.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(cohort_objects()))
        wait_for("Kueue to activate the cohort's ClusterQueues", lambda: active(cp), 60.0)
        yield found


@contextlib.contextmanager
def installed(cp: ControlPlane) -> Iterator[None]:
    """The ProvisioningRequest CRD, served before Kueue starts (or Kueue runs no controller)."""
    install_crds(cp, [provisioning_crd_file()])
    yield


def cohort_objects() -> list[dict[str, Any]]:
    """The check and its config (`e2e.provisioning`), the two ClusterQueues and their LocalQueues."""
    checks = [
        o for o in provisioning_objects() if o["kind"] in ("ProvisioningRequestConfig", "AdmissionCheck")
    ]
    borrower = cluster_queue(BORROW_CQ, [(GPU_FLAVOR, quota("1000", "10Ti", "8"))], cohort=COHORT)
    lender = cluster_queue(LENDER_CQ, [(GPU_FLAVOR, quota("1000", "10Ti", "16"))], cohort=COHORT)
    lender["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": PROV_CHECK}]}
    queues = [local_queue(BORROW_QUEUE, BORROW_CQ), local_queue(LENDER_QUEUE, LENDER_CQ)]
    return [*checks, borrower, lender, *queues]


def local_queue(name: str, cq: str) -> dict[str, Any]:
    meta = {"name": name, "namespace": NS}
    return {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "LocalQueue",
        "metadata": meta,
        "spec": {"clusterQueue": cq},
    }


def active(cp: ControlPlane) -> bool:
    queues = cp.kubectl_json("get", "clusterqueues.kueue.x-k8s.io")["items"]
    found = {q["metadata"]["name"] for q in queues if condition_true(q, "Active")}
    return found >= {BORROW_CQ, LENDER_CQ}


def debug(world: Fidelity, method: str, path: str) -> dict[str, Any]:
    """One call to tasgate's test-only rebuild hold on its metrics port."""
    url = f"http://127.0.0.1:{world.tasgate.metrics_port}/debug/rebuild{path}"
    request = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(request, timeout=5) as response:
        found: dict[str, Any] = json.loads(response.read())
    return found


def a_rebuild(world: Fidelity) -> None:
    """A change of structure (a new LocalQueue): the Mirror rebuilds."""
    world.cp.kubectl("apply", "-f", "-", input=yaml.safe_dump(local_queue("rebuild-trigger", BORROW_CQ)))


def test_a_quota_charge_that_lands_during_a_rebuild_is_published(world: Fidelity) -> None:
    lenders = job("charge-during-rebuild", 2, {REQUIRED: RACK}, queue=LENDER_QUEUE)  # its 16 GPUs
    second = job("charge-after", 2, {REQUIRED: RACK}, queue=BORROW_QUEUE)  # 8 of its own + 8 lent
    before = world.check(second)
    assert (before["allowed"], before["reason"]) == (True, "fits"), before

    debug(world, "POST", "/hold")
    a_rebuild(world)
    wait_for("tasgate's rebuild to be held", lambda: debug(world, "GET", "")["held"], 30.0)
    applied = world.apply(lenders)
    assert applied.returncode == 0, applied.stderr
    wait_for(
        "Kueue to reserve the lender's quota and ask for capacity", lambda: reserved(world, lenders), 30.0
    )

    def landed() -> bool:
        return any("charge-during-rebuild" in key for key in debug(world, "GET", "")["charged"])

    wait_for("the gang's quota charge to reach tasgate while the rebuild is held", landed, 30.0)
    assert debug(world, "GET", "")["held"]  # the charge landed inside the window, not after it
    debug(world, "POST", "/release")

    after = world.check(second)  # a fresh dump: the quota is taken
    assert (after["allowed"], after["reason"]) == (True, "waits"), after
    world.sync_live(second, after)  # before the fix: the live webhook kept saying "fits"
    world.apply(second)
    world.stays_pending(second)  # Kueue agrees: nothing left to borrow


def reserved(world: Fidelity, obj: dict[str, Any]) -> bool:
    """Kueue holds ``obj``'s quota with the topology delayed: reserved, not admitted, and a
    ProvisioningRequest made for it."""
    outcomes = world.outcomes(obj)
    held = bool(outcomes) and all(o.reserved and not o.admitted for o in outcomes)
    return held and bool(provisioning_requests(world.cp, NS))
