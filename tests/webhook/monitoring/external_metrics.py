"""The metrics the monitoring overlay reads that tasgate does not serve, each with where it comes from.

tests/webhook/test_monitoring.py proves every other metric a panel or alert names is on tasgate's
/metrics; these are accepted instead because they are named here, with the labels their source
declares, so a typo in a name or a label still fails. The e2e suite checks each entry against the
pinned source (``tests/e2e/test_monitoring_overlay.py`` reads the Go files from the module cache)
and proves the API server's on its live /metrics after traffic through the webhooks
(tests/e2e/test_e2e.py).
"""

from __future__ import annotations

from dataclasses import dataclass

# The webhook names the API-server series are selected by (manifests/webhooks/webhooks.yaml).
WEBHOOK_NAMES = ("mutate.tasgate.io", "validate.tasgate.io")


@dataclass(frozen=True)
class External:
    """A metric family of another component: its scraped name, type and label names."""

    name: str
    type: str  # counter, gauge, histogram (as the source declares it)
    labels: tuple[str, ...]
    source: str  # module@version and file it is declared in
    short: str  # the Name: field in that file (prefix added by Namespace/Subsystem)

    def sample_names(self) -> set[str]:
        """What Prometheus stores it under (client_golang adds no _total to a counter)."""
        if self.type == "histogram":
            return {f"{self.name}_bucket", f"{self.name}_count", f"{self.name}_sum"}
        return {self.name}


APISERVER_SOURCE = "k8s.io/apiserver@v0.36.5 pkg/admission/metrics/metrics.go"  # Kubernetes v1.36.5
KUEUE_SOURCE = "sigs.k8s.io/kueue@v0.19.2 pkg/metrics/metrics.go"
PROMETHEUS_SOURCE = "Prometheus: the synthetic per-target series of every scrape (Jobs and Instances)"

APISERVER = (
    External(
        "apiserver_admission_webhook_rejection_count",
        "counter",
        ("name", "type", "operation", "error_type", "rejection_code"),
        APISERVER_SOURCE,
        "webhook_rejection_count",
    ),
    External(
        "apiserver_admission_webhook_request_total",
        "counter",
        ("name", "type", "operation", "code", "rejected"),
        APISERVER_SOURCE,
        "webhook_request_total",
    ),
    External(
        "apiserver_admission_webhook_admission_duration_seconds",
        "histogram",
        ("name", "type", "operation", "rejected"),
        APISERVER_SOURCE,
        "webhook_admission_duration_seconds",
    ),
)
# Kueue's ClusterQueue series also carry the labels of its metrics config (customLabels): none by
# default, and the dashboard uses none of them.
KUEUE = (
    External(
        "kueue_pending_workloads",
        "gauge",
        ("cluster_queue", "status", "replica_role"),
        KUEUE_SOURCE,
        "pending_workloads",
    ),
    External(
        "kueue_admitted_workloads_total",
        "counter",
        ("cluster_queue", "priority_class", "replica_role"),
        KUEUE_SOURCE,
        "admitted_workloads_total",
    ),
    External(
        "kueue_admission_attempts_total",
        "counter",
        ("result", "replica_role"),
        KUEUE_SOURCE,
        "admission_attempts_total",
    ),
)
PROMETHEUS = (External("up", "gauge", ("job", "instance"), PROMETHEUS_SOURCE, "up"),)
# NVIDIA's dcgm-exporter, github.com/NVIDIA/dcgm-exporter at tag 4.5.3-4.8.2 (no Go module the
# e2e build pins: the suite checks these against e2e/dcgm/default-counters.csv, that file at the
# tag by git blob id). A GPU series' labels as internal/pkg/rendermetrics/render_metrics.go
# renders them, then the label-type counters of the CSV (DCGM_FI_DRIVER_VERSION), then what the
# Kubernetes pod mapper adds (internal/pkg/transformation/const.go): container, namespace, pod,
# pod_uid. dcgm-exporter names series by the CSV's field names, a counter with no _total.
DCGM_SOURCE = "NVIDIA/dcgm-exporter@4.5.3-4.8.2 etc/default-counters.csv"
DCGM_LABELS = (
    "gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION",
    "container", "namespace", "pod", "pod_uid",
)  # fmt: skip
DCGM = tuple(
    External(name, kind, DCGM_LABELS, DCGM_SOURCE, name)
    for name, kind in (
        ("DCGM_FI_DEV_GPU_UTIL", "gauge"),
        ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter"),
        ("DCGM_FI_PROF_PCIE_TX_BYTES", "gauge"),
    )
)
ALL = (*APISERVER, *KUEUE, *PROMETHEUS, *DCGM)
# Labels every scraped series may carry besides its own: the target's, and a histogram's bucket.
TARGET_LABELS = frozenset({"job", "instance", "le"})


def by_sample_name() -> dict[str, External]:
    """Each stored sample name of an allowed external metric, to its entry."""
    return {sample: metric for metric in ALL for sample in metric.sample_names()}
