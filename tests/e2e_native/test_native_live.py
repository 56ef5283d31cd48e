"""``tasgate serve`` live against the real kube-apiserver, kube-controller-manager and kube-scheduler
v1.36.5 with the native gang gates (``make e2e-native``): the native kinds watched, judged at
admission exactly as ``tasgate check`` judges a dump of the same cluster, and followed after it.

tasgate runs with real TLS and is registered by a real Mutating/ValidatingWebhookConfiguration
(``clientConfig.url`` + ``caBundle``, as tests/e2e does), for this module's namespace only, so
the table of test_native_table.py on the same cluster is never sent to it. Its policy asks for
the native backend at the rack level, so the PodGroup the Job controller creates is mutated on
its CREATE (the scheduler reads the PodGroup's own constraints). Two gangs:

- an Indexed Job of 3 × 4 GPUs: the Job controller makes its Workload and PodGroup (both
  reviewed while the Job may not have reached tasgate's watch yet), the scheduler binds the
  gang in one rack; tasgate's tracker must see it running in that rack, ``tasgate status``
  must say so, and ``tasgate_predictions_total`` must count the prediction as agreeing;
- 7 × 4 GPU pods naming a PodGroup, then the PodGroup (gang, rack): no rack holds 7 such pods even
  empty; tasgate must deny the PodGroup's CREATE with the numbers, from the unbound pods it watches.

Every review's final verdict (the audit line of /validate, or a /mutate denial) must equal
``tasgate check``'s on a dump of the cluster as it was when the object was submitted.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.kueue_scenario import RACK
from e2e.native import SCHEDULING_API
from e2e.native_scenario import indexed_job, pod_spec
from e2e.native_world import NativeWorld, wait_until
from e2e.serving import TASGATE
from tests.e2e_native.conftest import LiveTasgate, serve_live

pytestmark = pytest.mark.e2e_native

NS = "live"
POLICY = {
    "apiVersion": "tasgate.io/v1alpha1",
    "kind": "AdmissionPolicy",
    "metadata": {"name": "native-live"},
    "spec": {
        "exemptNamespaces": ["kube-system", "kube-public", "kube-node-lease"],
        "rules": [
            {
                "name": "native-gangs",
                "match": {"minPods": 2},
                "inject": {"mode": "required", "level": RACK},
                "gang": {"backend": "native"},
            },
            {"name": "everything-else", "inject": {"mode": "none"}, "gang": {"backend": "none"}},
        ],
    },
}


@pytest.fixture(scope="module")
def live(world: NativeWorld, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveTasgate]:
    with serve_live(world, tmp_path_factory.mktemp("native-live"), NS, POLICY) as tasgate:
        yield tasgate


def dump(world: NativeWorld, directory: Path) -> Path:
    """The dump ``tasgate check --state`` reads of a native cluster (docs/native.md), Jobs included."""
    world.dump_state(directory)
    jobs = world.cp.kubectl("get", "jobs", "-A", "-o", "yaml").stdout
    (directory / "jobs.yaml").write_text(jobs)
    return directory


def check(
    tasgate: LiveTasgate, state: Path, objects: list[Mapping[str, Any]], workdir: Path, *, live: bool = False
) -> dict[Any, Any]:
    """``tasgate check -o json`` of ``objects`` (applied together) on the dump ``state``, or with
    ``live`` on the cluster of the kubeconfig ``state`` (``--kubeconfig``: listed as live mode does)."""
    manifest = workdir / f"manifest-{time.monotonic_ns()}.yaml"
    manifest.write_text(yaml.safe_dump_all([submitted(o) for o in objects]))
    source = ["--kubeconfig" if live else "--state", str(state)]
    argv = [str(TASGATE), "check", "-o", "json", *source, "-f", str(manifest)]
    run = subprocess.run(
        [*argv, "--policy", str(tasgate.policy)], capture_output=True, text=True, timeout=120, check=False
    )
    assert run.returncode in (0, 1), run.stderr
    return {(r["kind"], r["name"]): (r["reason"], r["allowed"]) for r in json.loads(run.stdout)["results"]}


def submitted(obj: Mapping[str, Any]) -> dict[str, Any]:
    """An object as it was submitted: no status, no server-set metadata."""
    meta = {
        k: v for k, v in obj["metadata"].items() if k in ("name", "namespace", "labels", "ownerReferences")
    }
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "metadata": meta, "spec": obj["spec"]}


def metric(text: str, series: str, **labels: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(series + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


def status(world: NativeWorld, tasgate: LiveTasgate, *extra: str) -> str:
    argv = [str(TASGATE), "status", "--kubeconfig", str(world.cp.kubeconfig), "-n", NS, *extra]
    run = subprocess.run(
        [*argv, "--policy", str(tasgate.policy)], capture_output=True, text=True, timeout=60, check=False
    )
    assert run.returncode == 0, run.stderr
    return run.stdout


def waited(what: str, check_: Callable[[], bool], timeout: float = 60.0) -> None:
    wait_until(what, check_, timeout)


def test_job_gang_live_verdicts_tracking_and_prediction(
    world: NativeWorld, live: LiveTasgate, tmp_path: Path
) -> None:
    before = dump(world, tmp_path / "before-job")
    job = indexed_job("trainer", NS, 3, 4)
    world.create([job])
    group = world.job_pod_group(NS, "trainer")
    settled = world.settle(NS, group, 3)
    assert settled.scheduled, settled.condition
    pg = world.pod_group(NS, group)
    topology = pg["spec"].get("schedulingConstraints", {}).get("topology")
    assert topology == [{"key": RACK}], f"the PodGroup's CREATE was not mutated: {pg['spec']}"
    racks = {world.node_labels[n][RACK] for n in settled.bound_nodes}
    assert len(racks) == 1, settled.bound_nodes
    (rack,) = racks

    (workload,) = world.items("workloads.scheduling.k8s.io", NS)
    stored = [world.cp.kubectl_json("get", "job", "trainer", "-n", NS), workload, pg]
    names = {(o["kind"], o["metadata"]["name"]) for o in stored}
    waited("tasgate's audit of the Job's gang", lambda: names <= set(live.verdicts()))
    live_verdicts = {k: v for k, v in live.verdicts().items() if k in names}
    offline = check(live, before, stored, tmp_path)
    assert live_verdicts == offline, (live_verdicts, offline)
    assert live_verdicts[("PodGroup", group)] == ("fits", True)

    def running() -> bool:
        text = live.metrics()
        return metric(text, "tasgate_gang_state_seconds", name="trainer", state="running") is not None

    waited("tasgate's tracker to see the gang running", running)
    waited(
        "tasgate_predictions_total to count the prediction",
        lambda: (
            (metric(live.metrics(), "tasgate_predictions_total", result="agree", reason="none") or 0) >= 1
        ),
    )
    assert metric(live.metrics(), "tasgate_predictions_total", result="disagree") in (None, 0.0)
    items = {i["name"]: i for i in json.loads(status(world, live, "-o", "json"))["items"]}
    assert (items["trainer"]["state"], items["trainer"]["kind"]) == ("running", "Job")
    wide = status(world, live, "-o", "wide")
    row = next(line for line in wide.splitlines() if line.startswith(f"{NS} ") and " trainer " in line)
    assert f"rack={rack} (required met)" in row, wide


def test_never_fitting_pod_group_is_denied_from_its_unbound_pods(
    world: NativeWorld, live: LiveTasgate, tmp_path: Path
) -> None:
    denied_from_unbound_pods(world, live, tmp_path, NS, SCHEDULING_API)


def denied_from_unbound_pods(
    world: NativeWorld, live: LiveTasgate, tmp_path: Path, ns: str, api: str
) -> None:
    """7 × 4 GPU pods, then their PodGroup (``api``, gang 7, rack): denied at its CREATE with the
    numbers, as ``tasgate check`` says on a dump and on the live cluster; no pod ever bound."""
    pods = [
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"wide-{i}", "namespace": ns},
         "spec": pod_spec(4, "too-wide")}
        for i in range(7)
    ]  # fmt: skip
    world.create(pods)
    pg = {
        "apiVersion": api,
        "kind": "PodGroup",
        "metadata": {"name": "too-wide", "namespace": ns},
        "spec": {
            "schedulingPolicy": {"gang": {"minCount": 7}},
            "schedulingConstraints": {"topology": [{"key": RACK}]},
        },
    }
    state = dump(world, tmp_path / "with-pods")
    created = world.cp.kubectl("create", "-f", "-", input=yaml.safe_dump(pg), check=False)
    assert created.returncode != 0, created.stdout
    assert 'admission webhook "mutate.tasgate.io" denied the request' in created.stderr, created.stderr
    assert "holds at most 6 of the 7 pods" in created.stderr, created.stderr
    # the audit writer is woken once per batch: the record follows the answer
    waited("tasgate's audit of the denied PodGroup", lambda: ("PodGroup", "too-wide") in live.verdicts())
    verdict = live.verdicts()[("PodGroup", "too-wide")]
    assert verdict == ("never-fits", False)
    assert check(live, state, [pg], tmp_path)[("PodGroup", "too-wide")] == verdict
    listed = check(live, world.cp.kubeconfig, [pg], tmp_path, live=True)  # the native kinds listed too
    assert listed[("PodGroup", "too-wide")] == verdict
    assert all(not p["spec"].get("nodeName") for p in world.group_pods(ns, "too-wide"))
