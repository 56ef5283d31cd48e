"""The running Kueue v0.19.2 with its gates flipped decides as tasgate, reading those gates, says.

Kueue's own binary (the e2e build, e2e/kueue.py) runs against a control plane with the gates in
its Configuration, and Kueue's release manifests (the Deployment and ConfigMap tasgate reads the
gates from, tests/webhook/manifests) are applied beside it with the same gates, so ``tasgate check
--kubeconfig`` judges on the cluster as it would in production, before each object is created:

- which gate sets Kueue starts with at all (``LoadAndValidateFeatureGates``; no control plane:
  the binary exits before it needs one) is tasgate's `refusals`, error for error;
- ``TASMultiLayerTopology=false``: Kueue's Job webhook refuses the slice constraints annotation,
  and tasgate's denial is Kueue's words;
- ``TASHandleOverlappingFlavors=false``: a Workload of another flavor on the same hosts is not
  seen, so Kueue puts a rack-required gang on the hosts the first one holds, where tasgate says;
- ``TASProfileMixed=false``: an unconstrained gang goes BestFit, to the hosts tasgate says;
- ``TopologyAwareScheduling=false`` (with every TAS gate that needs it off, else Kueue does not
  start): a gang that never fits a rack is admitted on quota alone, and tasgate does not deny it.

Each row also shows tasgate's verdict with Kueue's default gates differs, so a row fails when the
gate is not followed. Missing binaries are a failure, never a skip. About 90 s: two Kueue starts.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.controlplane import BinariesMissingError, ControlPlane, find_binaries
from e2e.fidelity import kueue_outcome, predicted_podsets
from e2e.kueue import (
    DEFAULT_FRAMEWORKS,
    Kueue,
    _probe_job,
    find_kueue,
    install_crds,
    kueue_crd_files,
    module_source_dir,
    third_party_crd_files,
)
from e2e.kueue_admission import wait_admitted
from e2e.kueue_scenario import (
    CLUSTER_QUEUE,
    FLAVOR,
    REQUIRED_TOPOLOGY,
    add_gpu_nodes,
    cluster_queue,
    job,
    local_queue,
    queue_objects,
    setup_queues,
)
from e2e.nodes import HOSTNAME_LABEL
from e2e.serving import TASGATE
from tests.webhook.test_kueue_gates import TAS_OFF
from webhook.state.kueue_gates import DEPENDENCIES, OTHER_TAS_GATES, refusals

pytestmark = pytest.mark.e2e

NS = "kueue-gates"
MANIFESTS = Path(__file__).resolve().parents[1] / "webhook" / "manifests" / "kueue_release_v0.19.2.yaml"
CONFIG_KEY = "controller_manager_config.yaml"
CONSTRAINTS = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"
HONOURED = {"TASProfileMixed": False, "TASHandleOverlappingFlavors": False, "TASMultiLayerTopology": False}
FLAVOR_B, QUEUE_B = f"{FLAVOR}-b", "gpu-queue-b"


def _or_fail(find: Any) -> Any:
    try:
        return find()
    except BinariesMissingError as exc:
        pytest.fail(str(exc), pytrace=False)


# --- which gate sets Kueue starts with ------------------------------------------------------------


@pytest.mark.parametrize(
    "gates",
    [
        {"TopologyAwareScheduling": False},
        {"TopologyAwareScheduling": False, "TASProfileMixed": False, "TASMultiLayerTopology": False},
        {"TASBalancedPlacement": True, "TASFailedNodeReplacement": False},
        {"TASReplaceNodeOnPodTermination": True, "TASFailedNodeReplacement": False},
        {"ElasticJobsViaWorkloadSlicesWithTAS": True, "ElasticJobsViaWorkloadSlices": False},
        TAS_OFF,
        {"TASBalancedPlacement": True, "TASRespectNodeAffinityPreferred": True, **HONOURED},
    ],
    ids=["tas-off-alone", "tas-off-some", "balanced", "fnr", "elastic", "tas-off-all", "all-placement"],
)
def test_kueue_starts_exactly_when_tasgate_says(gates: Mapping[str, bool], tmp_path: Path) -> None:
    """The binary's own errors, before it would need an API server (none is given: no kubeconfig
    in its environment, HOME elsewhere), against `refusals`, in order."""
    flag = ",".join(f"{k}={str(v).lower()}" for k, v in gates.items())
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)}
    done = subprocess.run(
        [str(_or_fail(find_kueue)), f"--feature-gates={flag}"],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    lines = [json.loads(line) for line in (done.stdout + done.stderr).splitlines() if line.startswith("{")]
    refused = [line for line in lines if line.get("msg") == "conflicting feature gates detected"]
    expected = refusals(gates)
    if not expected:
        assert not refused and any(line.get("msg") == "Initializing" for line in lines), lines[-3:]
        return
    (line,) = refused
    causes = [c["error"] for c in line["errorCauses"]]
    assert len(causes) == len(expected) and all(
        c.endswith(f": {e}") for c, e in zip(causes, expected, strict=True)
    ), (
        causes,
        expected,
    )


def test_the_tas_gate_rules_and_defaults_are_kueues_own() -> None:
    """`OTHER_TAS_GATES` (defaults) and `DEPENDENCIES` read from the module the e2e Kueue is built
    from, as the placement gates' defaults are (tests/e2e/test_kueue_gates.py)."""
    features = (module_source_dir() / "pkg/features/kube_features.go").read_text()
    for name, gate in OTHER_TAS_GATES.items():
        block = re.search(rf"\n\t{name}: \{{(.*?)\n\t\}},", features, re.S)
        assert block is not None, name
        last = re.findall(r"Default: (true|false), PreRelease: featuregate\.(\w+)", block.group(1))[-1]
        assert last == (str(gate.default).lower(), gate.stage), name
    validation = (module_source_dir() / "pkg/config/validation.go").read_text()
    calls = re.findall(r"validateFeatureGateDependency\(features\.(\w+), ([^)]*)\)\.\.\.", validation)
    found = [(gate, tuple(re.findall(r"features\.(\w+)", needs))) for gate, needs in calls]
    assert [(g, n) for g, n in found if "TopologyAwareScheduling" in n] == list(DEPENDENCIES)


# --- the running Kueue --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cp() -> Iterator[ControlPlane]:
    """8 GPU hosts in two racks (n0-n3, n4-n7); queues on two TAS flavors over the same hosts."""
    with ControlPlane(binaries=_or_fail(find_binaries)) as plane:
        install_crds(plane, [*kueue_crd_files(), *third_party_crd_files(DEFAULT_FRAMEWORKS)])
        add_gpu_nodes(plane, blocks=1, racks_per_block=2, per_rack=4)
        setup_queues(plane, NS)
        flavor = copy.deepcopy(next(o for o in queue_objects(NS) if o["kind"] == "ResourceFlavor"))
        flavor["metadata"]["name"] = FLAVOR_B
        queue = json.loads(
            json.dumps(cluster_queue(f"{CLUSTER_QUEUE}-b")).replace(f'"{FLAVOR}"', f'"{FLAVOR_B}"')
        )
        objects = [flavor, queue, local_queue(NS, QUEUE_B, f"{CLUSTER_QUEUE}-b")]
        plane.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(objects))
        yield plane


def announce(cp: ControlPlane, gates: Mapping[str, bool]) -> None:
    """Kueue's release Deployment and ConfigMap with ``gates``: what tasgate reads them from."""
    config, deployment = (d for d in yaml.safe_load_all(MANIFESTS.read_text()) if d)
    config["data"][CONFIG_KEY] += yaml.safe_dump({"featureGates": dict(gates)}) if gates else ""
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kueue-system"}}
    cp.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([namespace, config, deployment]))


def check(cp: ControlPlane, obj: Mapping[str, Any]) -> dict[str, Any]:
    """``tasgate check --kubeconfig`` of ``obj``: its one verdict, judged on the live cluster."""
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", dir=cp.dir, delete=False) as manifest:
        yaml.safe_dump(dict(obj), manifest)
    argv = [str(TASGATE), "check", "-o", "json", "--kubeconfig", str(cp.kubeconfig), "-f", manifest.name]
    for _ in range(20):  # a CRD Kueue's start re-applied answers 429 while its storage initializes
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
        if " 429 " not in done.stderr:
            break
        time.sleep(0.5)
    assert done.returncode in (0, 1), done.stderr
    (verdict,) = json.loads(done.stdout)["results"]
    return dict(verdict)


def hosts_now(cp: ControlPlane, gates: Mapping[str, bool], obj: Mapping[str, Any]) -> dict[str, int]:
    announce(cp, gates)
    return predicted_podsets(check(cp, obj))["main"][1]


def admitted_hosts(cp: ControlPlane, obj: dict[str, Any]) -> dict[str, int]:
    cp.kubectl("create", "-f", "-", input=json.dumps(obj))
    (workload,) = wait_admitted(cp, NS, "Job", obj["metadata"]["name"])
    return dict(kueue_outcome(workload).podsets["main"][2])


def test_the_honoured_gates_place_as_the_running_kueue(cp: ControlPlane) -> None:
    announce(cp, HONOURED)
    with Kueue(cp, feature_gates=HONOURED, binary=_or_fail(find_kueue)):
        layered = job("layered", NS)
        layered["spec"]["template"]["metadata"]["annotations"][CONSTRAINTS] = json.dumps(
            [{"topology": "topology.example.com/rack", "size": 2}]
        )
        refused = cp.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(layered), check=False)
        verdict = check(cp, layered)
        assert refused.returncode != 0 and (verdict["allowed"], verdict["reason"]) == (False, "invalid")
        assert f"denied the request: {verdict['message']}" in refused.stderr, (
            verdict["message"],
            refused.stderr,
        )
        announce(cp, {})
        assert check(cp, layered)["allowed"], "Kueue's default gates read the annotation"

        first = admitted_hosts(cp, job("first", NS))  # a whole rack of flavor a
        second = job("second", NS, queue=QUEUE_B)  # flavor b, the same hosts
        seen, alone = hosts_now(cp, {}, second), hosts_now(cp, HONOURED, second)
        assert admitted_hosts(cp, second) == alone == first != seen

        admitted_hosts(cp, _annotated(job("half", NS, pods=1, gpus=4), {REQUIRED_TOPOLOGY: HOSTNAME_LABEL}))
        spread = _annotated(job("spread", NS, pods=5, gpus=2), {UNCONSTRAINED: "true"})
        least_free, best_fit = hosts_now(cp, {}, spread), hosts_now(cp, HONOURED, spread)
        assert admitted_hosts(cp, spread) == best_fit != least_free


class KueueWithoutTAS(Kueue):
    """The harness's Kueue, its webhooks probed with a Job Kueue refuses with TAS off too: the
    harness's own probe carries two TAS annotations at once, which Kueue's Job webhook checks
    only while TopologyAwareScheduling is on (``job_webhook.go: validateCreate``)."""

    def _webhooks_answer(self) -> bool:
        self._check_alive("its webhooks answered")
        probe = _probe_job()
        defaulted = self.cp.kubectl(
            "create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(probe), check=False
        )
        if defaulted.returncode != 0 or json.loads(defaulted.stdout)["spec"].get("suspend") is not True:
            return False
        probe["metadata"]["annotations"] = {"kueue.x-k8s.io/job-min-parallelism": "none"}
        denied = self.cp.kubectl(
            "create", "--dry-run=server", "-f", "-", input=json.dumps(probe), check=False
        )
        return denied.returncode != 0 and '"vjob.kb.io" denied' in denied.stderr


def test_tas_off_admits_on_quota_what_never_fits_a_rack(cp: ControlPlane) -> None:
    wide = job("wide", NS, pods=5)  # a rack holds 4 such pods
    both = _annotated(
        job("both", NS), {REQUIRED_TOPOLOGY: HOSTNAME_LABEL, PREFERRED_TOPOLOGY: HOSTNAME_LABEL}
    )
    announce(cp, {})
    assert [(v["allowed"], v["reason"]) for v in map(partial(check, cp), (wide, both))] == [
        (False, "never-fits"),
        (False, "invalid"),
    ]
    announce(cp, TAS_OFF)
    with KueueWithoutTAS(cp, feature_gates=TAS_OFF, binary=_or_fail(find_kueue)):
        for obj in (wide, both):
            verdict = check(cp, obj)
            assert (verdict["allowed"], verdict["reason"]) == (True, "no-tas"), verdict
        accepted = cp.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(both), check=False)
        assert accepted.returncode == 0, accepted.stderr  # two TAS annotations: no longer refused
        cp.kubectl("create", "-f", "-", input=json.dumps(wide))
        (workload,) = wait_admitted(cp, NS, "Job", "wide")
        assert not workload["status"]["admission"]["podSetAssignments"][0].get("topologyAssignment")


def _annotated(obj: dict[str, Any], annotations: Mapping[str, str]) -> dict[str, Any]:
    obj["spec"]["template"]["metadata"]["annotations"] = dict(annotations)
    return obj
