"""GPU signals per gang and domain, end to end: tasgate_pod_info joined with dcgm-exporter's series.

The module's own world (``tests.e2e.test_e2e.world``: a real kube-apiserver + etcd, 2 blocks x 2
racks x 2 hosts of 8-GPU Nodes, Kueue's objects, tasgate serving in live mode with
``--pod-info-metrics``). Two gangs are made running the way Kueue and the kubelet would leave them
— an admitted Workload, its pods bound to nodes and Running (status subresources) — ``llama``
over three racks with one rack's GPUs nearly idle, ``bert`` in one rack. The fake dcgm-exporter
(e2e/dcgm_fake.py, the one faked source: no GPU here) serves their GPUs' series. A real Prometheus
scrapes both, with the shipped rules: every recording rule and every panel of the dashboard's GPU
row is answered with the values computed here from what the fake serves, and TasgateGangStraggler
fires for the idle rack only. The alert's ``for: 10m`` is shortened in a test-only copy of the
rules; the copy differs from the shipped file in that field alone (asserted).
"""

from __future__ import annotations

import copy
import json
import urllib.request
from collections.abc import Callable, Iterator
from statistics import mean
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from e2e.controlplane import ControlPlane
from e2e.dcgm_fake import (
    CSV,
    CSV_BLOB,
    GPU,
    NVLINK,
    PCIE_TX,
    UTIL,
    FakeDCGMExporter,
    blob_id,
    default_counters,
)
from e2e.prometheus import Prometheus
from tests.e2e.test_e2e import GPU as GPU_RESOURCE
from tests.e2e.test_e2e import NS, Tasgate, wait_for, world  # noqa: F401 (world: fixture)
from tests.webhook import overlay, promql

pytestmark = pytest.mark.e2e

STRAGGLER = "TasgateGangStraggler"
GPUS_PER_POD = 8
# gang -> its pods: (node, the mean GPU utilisation of its 8 GPUs); nodes are world's, named
# <block>-<rack>-<host> with rack label <block>-<rack>; none of world's busy hosts.
GANGS = {
    "llama": [("b1-r2-h1", 90.0), ("b1-r2-h2", 84.0), ("b2-r1-h2", 88.0), ("b2-r2-h1", 12.0)],
    "bert": [("b2-r2-h2", 30.0)],
}
Domain = tuple[str, str, str]  # (gang, level, domain)


def gpus() -> list[GPU]:
    """Each pod's 8 GPUs, utilisation spread ±3.5 around its mean; NVLink and PCIe per GPU differ
    per pod so that sums per domain are told apart; one GPU of an idle node held by no pod."""
    out = []
    for gang, pods in GANGS.items():
        for i, (node, util) in enumerate(pods):
            for index in range(GPUS_PER_POD):
                spread = index - (GPUS_PER_POD - 1) / 2
                out.append(
                    GPU(node, index, util + spread, 1e6 * (i + 1), 2e9 + 1e8 * i, NS, f"{gang}-{i}", "train")
                )
    out.append(GPU("b2-r1-h1", 0, 3.0, 5e5, 1e9))
    return out


def domains_of(node: str) -> dict[str, str]:
    """level label -> Kueue's DomainID of the node's domain (block ``b1``, rack ``b1,b1-r2``)."""
    block, rack = node.split("-", maxsplit=1)[0], "-".join(node.split("-")[:2])
    return {"block": block, "rack": f"{block},{rack}"}


def gang_gpus() -> dict[str, list[GPU]]:
    out: dict[str, list[GPU]] = {}
    for g in gpus():
        if g.pod:
            out.setdefault(g.pod.rsplit("-", 1)[0], []).append(g)
    return out


def per_domain(value: Callable[[list[GPU]], float]) -> dict[Domain, float]:
    found: dict[Domain, list[GPU]] = {}
    for gang, held in gang_gpus().items():
        for g in held:
            for level, domain in domains_of(g.host).items():
                found.setdefault((gang, level, domain), []).append(g)
    return {key: value(held) for key, held in found.items()}


def expected() -> dict[str, dict[Any, float]]:
    """What each recording rule must answer, from what the fake serves."""
    gang_mean = {gang: mean(g.util for g in held) for gang, held in gang_gpus().items()}
    by_domain = per_domain(lambda held: mean(g.util for g in held))
    return {
        "tasgate:gang_gpu_utilization:avg": gang_mean,
        "tasgate:gang_gpu_utilization:by_domain": by_domain,
        "tasgate:gang_nvlink_bandwidth:by_domain": per_domain(lambda h: sum(g.nvlink_per_second for g in h)),
        "tasgate:gang_pcie_tx_bytes:by_domain": per_domain(lambda h: sum(g.pcie_tx for g in h)),
        "ratio": {k: v / gang_mean[k[0]] for k, v in by_domain.items()},
        "stragglers": {k: v for k, v in by_domain.items() if v < 0.5 * gang_mean[k[0]]},
    }


def key(row: dict[str, Any]) -> Any:
    """(gang, level, domain), the gang, or None for the rule parameter (no labels)."""
    labels = row["metric"]
    if "gang" not in labels:
        return None
    assert labels.get("namespace") == NS, labels
    if "domain" in labels:
        return (labels["gang"], labels["level"], labels["domain"])
    return labels["gang"]


def answered(prometheus: Prometheus, expr: str) -> dict[Any, float]:
    return {key(row): float(row["value"][1]) for row in prometheus.query(expr)}


def rules_with_short_for() -> dict[str, Any]:
    """The shipped rules with the straggler's ``for`` shortened, and nothing else changed."""
    shipped = overlay.rule_spec()
    rules = copy.deepcopy(shipped)
    (alert,) = [r for g in rules["groups"] for r in g["rules"] if r.get("alert") == STRAGGLER]
    assert alert["for"] == "10m"
    alert["for"] = "2s"
    alert_copy = dict(alert, **{"for": "10m"})
    assert alert_copy == next(r for g in shipped["groups"] for r in g["rules"] if r.get("alert") == STRAGGLER)
    return rules


def owner(gang: str) -> dict[str, Any]:
    """The Job the gang's Workload belongs to (no controller manager here: nothing collects it)."""
    uid = f"00000000-0000-4000-8000-{sum(map(ord, gang)):012d}"
    return {"apiVersion": "batch/v1", "kind": "Job", "name": gang, "uid": uid, "controller": True}


def workload(gang: str, pods: int) -> dict[str, Any]:
    """A Kueue Workload as Kueue leaves an admitted one (the status is set through its subresource)."""
    container = {"name": "train", "image": "trainer", "resources": {"requests": {GPU_RESOURCE: "8"}}}
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": f"job-{gang}", "namespace": NS, "ownerReferences": [owner(gang)]},
        "spec": {
            "queueName": "gpu-queue",
            "podSets": [{"name": "main", "count": pods, "template": {"spec": {"containers": [container]}}}],
        },
    }


def admitted_status(pods: int) -> dict[str, Any]:
    now = "2026-01-01T00:00:00Z"
    conditions = [
        {"type": kind, "status": "True", "reason": kind, "message": "", "lastTransitionTime": now}
        for kind in ("QuotaReserved", "Admitted")
    ]
    assignment = {"name": "main", "count": pods, "flavors": {GPU_RESOURCE: "gpu-flavor"}}
    return {
        "status": {
            "admission": {"clusterQueue": "gpu-cq", "podSetAssignments": [assignment]},
            "conditions": conditions,
        }
    }


def pod(gang: str, index: int, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{gang}-{index}",
            "namespace": NS,
            "labels": {"kueue.x-k8s.io/podset": "main"},
            "annotations": {"kueue.x-k8s.io/workload": f"job-{gang}"},
        },
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "train",
                    "image": "trainer",
                    "resources": {"limits": {GPU_RESOURCE: str(GPUS_PER_POD)}},
                }
            ],
        },
    }


RUNNING = {
    "status": {
        "phase": "Running",
        "conditions": [
            {"type": kind, "status": "True", "lastTransitionTime": "2026-01-01T00:00:10Z"}
            for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
        ],
    }
}


def pod_infos(tasgate: Tasgate) -> list[dict[str, str]]:
    url = f"http://127.0.0.1:{tasgate.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as r:
        text = r.read().decode()
    (family,) = [f for f in text_string_to_metric_families(text) if f.name == "tasgate_pod_info"]
    return sorted((dict(s.labels) for s in family.samples), key=lambda labels: labels["pod"])


@pytest.fixture(scope="module")
def scraped(
    world: tuple[ControlPlane, Tasgate],  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Prometheus]:
    """The fake exporter and a real Prometheus scraping it and tasgate, from the module's start:
    ``rate(...[5m])`` reads its whole window only once five minutes of samples are stored."""
    _, tasgate = world
    with FakeDCGMExporter(gpus()) as fake:
        targets = [f"127.0.0.1:{tasgate.metrics_port}"]
        workdir = tmp_path_factory.mktemp("gpu-prometheus")
        with Prometheus(workdir, targets, rules_with_short_for(), [fake.scrape_job()]) as prometheus:
            yield prometheus


@pytest.fixture(scope="module")
def running(
    world: tuple[ControlPlane, Tasgate],  # noqa: F811
    scraped: Prometheus,
) -> Iterator[tuple[ControlPlane, Tasgate]]:
    """The two gangs, running as far as the API server and tasgate can tell (after Prometheus
    started, so its window fills while they are made)."""
    cp, tasgate = world
    for gang, pods in GANGS.items():
        cp.kubectl("apply", "-f", "-", input=yaml.safe_dump(workload(gang, len(pods))))
        status = json.dumps(admitted_status(len(pods)))
        cp.kubectl(
            "patch", "workload", f"job-{gang}", "-n", NS, "--subresource=status", "--type=merge", "-p", status
        )
        for i, (node, _) in enumerate(pods):
            cp.kubectl("apply", "-f", "-", input=yaml.safe_dump(pod(gang, i, node)))
            patch = ["patch", "pod", f"{gang}-{i}", "-n", NS, "--subresource=status", "--type=merge"]
            cp.kubectl(*patch, "-p", json.dumps(RUNNING))
    total = sum(len(p) for p in GANGS.values())
    wait_for("tasgate_pod_info for every running pod", lambda: len(pod_infos(tasgate)) == total, 60)
    yield cp, tasgate


def test_tasgate_pod_info_names_each_running_pods_gang_and_domains(
    running: tuple[ControlPlane, Tasgate],
) -> None:
    _, tasgate = running
    want = []
    for gang, pods in GANGS.items():
        for i, (node, _) in enumerate(pods):
            block, rack = node.split("-")[0], "-".join(node.split("-")[:2])
            want.append(
                {
                    "namespace": NS,
                    "pod": f"{gang}-{i}",
                    "gang": gang,
                    "block": block,
                    "rack": rack,
                    "hostname": node,
                }
            )
    assert pod_infos(tasgate) == sorted(want, key=lambda labels: labels["pod"])


def test_the_fake_serves_dcgm_exporters_pinned_default_counters() -> None:
    assert blob_id(CSV.read_bytes()) == CSV_BLOB, "e2e/dcgm/default-counters.csv is not the file at the tag"
    counters = default_counters()
    assert (
        counters[UTIL][0] == "gauge" and counters[PCIE_TX][0] == "gauge" and counters[NVLINK][0] == "counter"
    )
    assert counters["DCGM_FI_DRIVER_VERSION"][0] == "label"


def test_a_real_prometheus_answers_every_gpu_rule_and_panel_and_fires_on_the_straggling_rack(
    running: tuple[ControlPlane, Tasgate], scraped: Prometheus
) -> None:
    cp, tasgate = running
    prometheus, want = scraped, expected()

    def firing() -> set[Any]:
        rows = prometheus.query(f'ALERTS{{alertname="{STRAGGLER}",alertstate="firing"}}')
        return {key(row) for row in rows}

    def every_rule_has_its_series() -> bool:
        return all(set(answered(prometheus, n)) == set(want[n]) for n in want if n.startswith("tasgate:"))

    def window_covered() -> bool:
        """Every NVLink counter has a sample 299 s back: rate()'s 5m window is full."""
        then = prometheus.query(f"count({NVLINK} offset 299s)")
        return bool(then) and float(then[0]["value"][1]) == len(gpus())

    prometheus.wait("every GPU rule to have its series", every_rule_has_its_series, 60)
    prometheus.wait(f"{STRAGGLER} to fire", lambda: bool(firing()), 60)
    assert firing() == set(want["stragglers"]) == {("llama", "rack", "b2,b2-r2")}
    prometheus.wait("five minutes of NVLink samples", window_covered, 400)
    for name, values in want.items():
        if name.startswith("tasgate:"):
            assert answered(prometheus, name) == pytest.approx(values, rel=0.01), name
    checked = 0
    for where, expr in gpu_row_queries():
        got = answered(prometheus, promql.with_grafana_variables(expr))
        assert got == pytest.approx(panel_expected(expr, want), rel=0.01), where
        checked += 1
    assert checked >= 7, "every panel of the GPU row is checked"
    # a pod that ends leaves the join, and its gang the rules
    cp.kubectl("delete", "pod", "bert-0", "-n", NS, "--grace-period=0", "--force")
    wait_for(
        "bert-0 to leave tasgate_pod_info", lambda: "bert-0" not in {p["pod"] for p in pod_infos(tasgate)}, 30
    )
    prometheus.wait(
        "bert to leave the gang rule",
        lambda: "bert" not in answered(prometheus, "tasgate:gang_gpu_utilization:avg"),
        30,
    )


def gpu_row_queries() -> list[tuple[str, str]]:
    """The panels of the dashboard's GPU row (between its row header and the next row)."""
    out, inside = [], False
    for p in overlay.dashboard()["panels"]:
        if p["type"] == "row":
            inside = p["title"].startswith("GPU signals")
            continue
        if inside:
            out += [(f"panel {p['title']!r}", t["expr"]) for t in p["targets"]]
    return out


def panel_expected(expr: str, want: dict[str, dict[Any, float]]) -> dict[Any, float]:
    """The values a GPU-row panel query must show, from ``expected``; a query not known here fails."""
    if expr == "tasgate:gang_gpu_straggler:threshold_ratio":
        return {None: 0.5}
    if "scalar(tasgate:gang_gpu_straggler:threshold_ratio)" in expr:
        return want["stragglers"]
    if " / on (namespace, gang) group_left () tasgate:gang_gpu_utilization:avg" in expr:
        return want["ratio"]
    name, _, selector = expr.partition("{")
    assert name in want, f"no expected values for the panel query {expr!r}"
    level = selector.removeprefix('level="').removesuffix('"}') if selector else None
    return {k: v for k, v in want[name].items() if level is None or k[1] == level}
