"""Issue 37.3 and 37.8 on the real Kueue v0.19.2: a quota charge that lands during a rebuild.

tasgate's Mirror rebuilds its state on a worker thread when a Kueue object changes; the usage
that arrives meanwhile is replayed onto the new state (`live.usage`). Before the fix a Workload's
quota charge that landed in that window was lost: the state published kept the old charges and
freshness read as caught up, so a review said ``fits`` where the same world built fresh says
``waits`` (quota), until some later usage change happened to republish.

On a real API server the window is milliseconds, so this row opens it on purpose with the
test-only rebuild hold (``tasgate serve --test-fault-hook``, `live.rebuild_hold`): hold the next
rebuild, cause one (a new LocalQueue), let Kueue admit a gang that takes the ClusterQueue's whole
GPU quota, see its charge land while the rebuild waits, release. tasgate's live verdict on a
second gang must then match the offline check of a fresh dump (``waits``) and Kueue, which
admits nothing more. Before the fix the live webhook kept answering ``fits``.

Missing binaries FAIL, never skip.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from e2e.controlplane import BinariesMissingError, ControlPlane, find_binaries
from e2e.fidelity import NS, QUOTA_QUEUE, RACK, REQUIRED, Fidelity, fidelity_world, job
from e2e.fidelity_world import QUOTA_CQ, QUOTA_GPUS
from e2e.kueue import KUEUE_API_VERSION, Kueue, find_kueue
from e2e.kueue_admission import wait_for

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fidelity]:
    try:
        binaries, kueue_binary = find_binaries(), find_kueue()
    except BinariesMissingError as exc:
        pytest.fail(str(exc), pytrace=False)
    workdir = tmp_path_factory.mktemp("quota-rebuild")
    with (
        ControlPlane(binaries=binaries) as cp,
        Kueue(cp, binary=kueue_binary) as kueue,
        fidelity_world(workdir, cp, kueue, tasgate_args=("--test-fault-hook",)) as found,
    ):
        yield found


def debug(world: Fidelity, method: str, path: str) -> dict[str, Any]:
    """One call to tasgate's test-only rebuild hold on its metrics port."""
    url = f"http://127.0.0.1:{world.tasgate.metrics_port}/debug/rebuild{path}"
    request = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(request, timeout=5) as response:
        found: dict[str, Any] = json.loads(response.read())
    return found


def a_rebuild(world: Fidelity) -> None:
    """A change of structure (a new LocalQueue of the quota ClusterQueue): the Mirror rebuilds."""
    queue = {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "LocalQueue",
        "metadata": {"name": "rebuild-trigger", "namespace": NS},
        "spec": {"clusterQueue": QUOTA_CQ},
    }
    world.cp.kubectl("apply", "-f", "-", input=yaml.safe_dump(queue))


def test_a_quota_charge_that_lands_during_a_rebuild_is_published(world: Fidelity) -> None:
    whole = job("charge-during-rebuild", QUOTA_GPUS // 8, {REQUIRED: RACK}, queue=QUOTA_QUEUE)
    second = job("charge-after", 1, {REQUIRED: RACK}, queue=QUOTA_QUEUE)
    before = world.check(second)
    assert (before["allowed"], before["reason"]) == (True, "fits"), before

    debug(world, "POST", "/hold")
    a_rebuild(world)
    wait_for("tasgate's rebuild to be held", lambda: debug(world, "GET", "")["held"], 30.0)
    applied = world.apply(whole)
    assert applied.returncode == 0, applied.stderr
    world.wait_outcome(whole, admitted=True)

    def landed() -> bool:
        return any("charge-during-rebuild" in key for key in debug(world, "GET", "")["charged"])

    wait_for("the gang's quota charge to reach tasgate while the rebuild is held", landed, 30.0)
    assert debug(world, "GET", "")["held"]  # the charge landed inside the window, not after it
    debug(world, "POST", "/release")

    after = world.check(second)  # a fresh dump: the quota is taken
    assert (after["allowed"], after["reason"]) == (True, "waits"), after
    world.sync_live(second, after)  # before the fix: the live webhook kept saying "fits"
    world.apply(second)
    assert all(not o.admitted for o in world.stays_pending(second)), "Kueue admitted past its quota"
