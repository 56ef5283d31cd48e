"""tasgate creates the native gang of a Job the Job controller makes none of, against the real
kube-apiserver, kube-controller-manager and kube-scheduler v1.36.5 (``make e2e-native``).

A NonIndexed Job is no gang candidate (``IsGangSchedulingCandidate``): the Job controller makes
no Workload for it, and without tasgate its pods would be scheduled one by one, anywhere. Under
a policy asking for the native backend at the rack level, tasgate's /mutate points its template
at ``<job>-gang`` (the Job controller then copies it into every pod), the leader POSTs the
Workload ``<job>`` and the PodGroup ``<job>-gang`` with the rack key, and the scheduler binds the
whole gang in one rack. A Job of 7 × 4 GPUs, more than any rack holds even empty (6), is denied
at its CREATE with the numbers, and nothing of it exists.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.kueue_scenario import RACK
from e2e.native_scenario import indexed_job
from e2e.native_world import NativeWorld, wait_until
from tests.e2e_native.conftest import LiveTasgate, serve_live
from tests.e2e_native.test_native_live import POLICY, check, dump

pytestmark = pytest.mark.e2e_native

NS = "create"


def nonindexed_job(name: str, pods: int, gpus: int) -> dict[str, Any]:
    job = indexed_job(name, NS, pods, gpus)
    del job["spec"]["completionMode"]  # NonIndexed: no gang candidate for the Job controller
    return job


@pytest.fixture(scope="module")
def live(world: NativeWorld, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveTasgate]:
    with serve_live(world, tmp_path_factory.mktemp("native-create"), NS, POLICY) as tasgate:
        yield tasgate


def test_a_nonindexed_job_is_made_a_rack_gang_by_tasgate(
    world: NativeWorld, live: LiveTasgate, tmp_path: Path
) -> None:
    before = dump(world, tmp_path / "before")
    job = nonindexed_job("trainer", 3, 4)
    world.create([job])
    stored = world.cp.kubectl_json("get", "job", "trainer", "-n", NS)
    assert stored["spec"]["template"]["spec"]["schedulingGroup"] == {"podGroupName": "trainer-gang"}

    def made() -> bool:
        names = {(o["kind"], o["metadata"]["name"]) for k in ("workloads", "podgroups")
                 for o in world.items(f"{k}.scheduling.k8s.io", NS)}  # fmt: skip
        return {("Workload", "trainer"), ("PodGroup", "trainer-gang")} <= names

    wait_until("tasgate's leader to create the Workload and the PodGroup", made, 90)
    (workload,) = world.items("workloads.scheduling.k8s.io", NS)  # the Job controller made none
    pg = world.pod_group(NS, "trainer-gang")
    for obj in (workload, pg):
        (owner,) = obj["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"]) == ("Job", "trainer", stored["metadata"]["uid"])
        assert obj["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "tasgate"
    assert workload["spec"]["podGroupTemplates"][0]["schedulingPolicy"] == {"gang": {"minCount": 3}}
    assert pg["spec"]["podGroupTemplateRef"]["workload"] == {
        "workloadName": "trainer",
        "podGroupTemplateName": "gang",
    }
    assert pg["spec"]["schedulingConstraints"] == {"topology": [{"key": RACK}]}

    settled = world.settle(NS, "trainer-gang", 3)
    assert settled.scheduled, settled.condition
    racks = {world.node_labels[n][RACK] for n in settled.bound_nodes}
    assert len(settled.bound_nodes) == 3 and len(racks) == 1, settled.bound_nodes

    wait_until("tasgate's audit of the three objects", lambda: {("Job", "trainer"), ("Workload", "trainer"),
               ("PodGroup", "trainer-gang")} <= set(live.verdicts()))  # fmt: skip
    verdicts = live.verdicts()
    assert verdicts[("Job", "trainer")] == ("fits", True)
    assert verdicts[("Workload", "trainer")][1] and verdicts[("PodGroup", "trainer-gang")][1]
    assert check(live, before, [job], tmp_path)[("Job", "trainer")] == verdicts[("Job", "trainer")]
    log = live.err.read_text()
    assert "created Workload create/trainer for Job trainer" in log, log[-2000:]
    assert "created PodGroup create/trainer-gang for Job trainer" in log, log[-2000:]


def test_a_job_no_rack_can_hold_is_denied_with_the_numbers(world: NativeWorld, live: LiveTasgate) -> None:
    job = nonindexed_job("wide", 7, 4)
    created = world.cp.kubectl("create", "-f", "-", input=yaml.safe_dump(job), check=False)
    assert created.returncode != 0, created.stdout
    assert 'admission webhook "mutate.tasgate.io" denied the request' in created.stderr, created.stderr
    assert "holds at most 6 of the 7 pods" in created.stderr, created.stderr
    # the audit writer is woken once per batch: the record follows the answer
    wait_until("tasgate's audit of the denied Job", lambda: ("Job", "wide") in live.verdicts())
    assert live.verdicts()[("Job", "wide")] == ("never-fits", False)
    jobs = json.loads(world.cp.kubectl("get", "jobs", "-n", NS, "-o", "json").stdout)["items"]
    assert "wide" not in {j["metadata"]["name"] for j in jobs}
    names = {o["metadata"]["name"] for o in world.items("podgroups.scheduling.k8s.io", NS)}
    assert "wide-gang" not in names
