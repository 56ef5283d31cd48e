"""``tasgate serve`` live against kube-apiserver, kube-controller-manager and kube-scheduler v1.37.0:
the v1.37 native kinds watched in the versions that cluster serves (``v1beta1``, ``v1alpha3``),
the webhooks registered for them as manifests/webhooks registers them, judged at admission as
``tasgate check`` judges a dump of the same cluster, and followed after it.

Same method as tests/e2e_native/test_native_live.py on v1.36.5 (its helpers are used here):

- an Indexed Job of 3 × 4 GPUs asking for a gang in ``spec.scheduling``: the Job controller makes a
  ``v1beta1`` Workload and PodGroup; the policy's rack key reaches the PodGroup at its CREATE
  (mutated by tasgate); the scheduler binds the gang in one rack and writes
  ``PodGroupInitiallyScheduled``; tasgate's tracker must see it running there and count the
  prediction as agreeing;
- 7 × 4 GPU pods naming a ``v1beta1`` PodGroup (gang, rack) that no rack holds even empty: the
  API server must refuse the PodGroup's CREATE with tasgate's numbers, from the unbound pods it
  watches; ``tasgate check`` on a dump and on the live cluster must say the same.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.kueue_scenario import RACK
from e2e.native_k8s import V1_37
from e2e.native_scenario import indexed_job
from e2e.native_world import NativeWorld
from tests.e2e_native.conftest import LiveTasgate, serve_live
from tests.e2e_native.test_native_live import POLICY, check, denied_from_unbound_pods, dump, metric, waited

pytestmark = pytest.mark.e2e_native

NS = "live137"


@pytest.fixture(scope="module")
def world(v137: NativeWorld) -> NativeWorld:
    return v137


@pytest.fixture(scope="module")
def live(world: NativeWorld, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveTasgate]:
    with serve_live(world, tmp_path_factory.mktemp("native-live-v137"), NS, POLICY) as tasgate:
        yield tasgate


def test_v1beta1_job_gang_is_mutated_judged_and_followed(
    world: NativeWorld, live: LiveTasgate, tmp_path: Path
) -> None:
    before = dump(world, tmp_path / "before-job")
    job = indexed_job("trainer", NS, 3, 4, k8s=V1_37)
    assert job["spec"]["scheduling"]["schedulingPolicy"] == {"gang": {}}
    world.create([job])
    group = world.job_pod_group(NS, "trainer")
    settled = world.settle(NS, group, 3)
    assert settled.scheduled, settled.condition
    pg = world.pod_group(NS, group)
    assert pg["apiVersion"] == "scheduling.k8s.io/v1beta1"
    topology = pg["spec"].get("schedulingConstraints", {}).get("topology")
    assert topology == [{"key": RACK}], f"the PodGroup's CREATE was not mutated: {pg['spec']}"
    racks = {world.node_labels[n][RACK] for n in settled.bound_nodes}
    assert len(racks) == 1, settled.bound_nodes

    (workload,) = world.items("workloads.scheduling.k8s.io", NS)
    stored = [world.cp.kubectl_json("get", "job", "trainer", "-n", NS), workload, pg]
    names = {(o["kind"], o["metadata"]["name"]) for o in stored}
    waited("tasgate's audit of the Job's gang", lambda: names <= set(live.verdicts()))
    live_verdicts = {k: v for k, v in live.verdicts().items() if k in names}
    assert live_verdicts == check(live, before, stored, tmp_path), live_verdicts
    assert live_verdicts[("PodGroup", group)] == ("fits", True)
    waited(
        "tasgate's tracker to see the gang running",
        lambda: (
            metric(live.metrics(), "tasgate_gang_state_seconds", name="trainer", state="running") is not None
        ),
    )
    waited(
        "tasgate_predictions_total to count the prediction",
        lambda: (
            (metric(live.metrics(), "tasgate_predictions_total", result="agree", reason="none") or 0) >= 1
        ),
    )
    assert metric(live.metrics(), "tasgate_predictions_total", result="disagree") in (None, 0.0)


def test_never_fitting_v1beta1_pod_group_is_denied_from_its_unbound_pods(
    world: NativeWorld, live: LiveTasgate, tmp_path: Path
) -> None:
    denied_from_unbound_pods(world, live, tmp_path, NS, V1_37.scheduling_api)
