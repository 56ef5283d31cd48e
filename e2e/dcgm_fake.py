"""A small stand-in for NVIDIA's dcgm-exporter: its exposition format for the e2e pods' GPUs.

These machines have no GPU, so this is the one faked source of the GPU-signal suite
(tests/e2e/test_gpu_signals.py); everything around it is real (tasgate in live mode, the API
server, Prometheus evaluating the shipped rules). What it serves is dcgm-exporter's, pinned:

- **tag** ``4.5.3-4.8.2`` of github.com/NVIDIA/dcgm-exporter (commit ``DCGM_COMMIT``);
- **series**: only names of ``etc/default-counters.csv`` at that tag (``e2e/dcgm/default-counters.csv``
  is that file byte for byte — NVIDIA's, Apache License 2.0 — its git blob id ``CSV_BLOB``, checked
  by the suite), with the type and help text the file gives them;
- **labels** as ``internal/pkg/rendermetrics/render_metrics.go`` renders a GPU series at that tag
  — ``gpu``, ``UUID``, ``pci_bus_id``, ``device``, ``modelName``, ``Hostname`` (HEAD after the tag
  renames it ``hostname``, #655), then the counters of type ``label``
  (``DCGM_FI_DRIVER_VERSION``), then the attributes its Kubernetes pod mapper adds
  (``internal/pkg/transformation/const.go``, ``kubernetes.go``): ``container``, ``namespace``,
  ``pod``, ``pod_uid`` — each map in Go's template order (sorted keys). A GPU no pod holds has no
  pod attributes.

Counters grow linearly from a large base at their per-second rate, so ``rate()`` over them is
that rate; gauges are constant.
"""

from __future__ import annotations

import hashlib
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

DCGM_TAG = "4.5.3-4.8.2"
DCGM_COMMIT = "691c92762eb551313c825f6efe4ceeee20982801"
CSV = Path(__file__).with_name("dcgm") / "default-counters.csv"
CSV_BLOB = "2eed7a651db300797554cb91591908f410902f21"  # `git ls-tree 4.5.3-4.8.2 etc/default-counters.csv`
GPU_LABELS = ("gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname")
POD_ATTRIBUTES = ("container", "namespace", "pod", "pod_uid")
DRIVER_VERSION = "570.86.15"
MODEL = "NVIDIA H100 80GB HBM3"
UTIL, NVLINK, PCIE_TX = (
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
    "DCGM_FI_PROF_PCIE_TX_BYTES",
)
COUNTER_BASE = 10**12


def blob_id(data: bytes) -> str:
    """Git's id of a file's content (``git hash-object``)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def default_counters() -> dict[str, tuple[str, str]]:
    """``etc/default-counters.csv``: field name -> (Prometheus type, help), as dcgm-exporter reads it."""
    out = {}
    for line in CSV.read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, kind, text = (part.strip() for part in line.split(",", 2))
        out[name] = (kind, text)
    return out


@dataclass(frozen=True)
class GPU:
    """One GPU of a node and the pod that holds it (``pod`` empty: none)."""

    host: str
    index: int
    util: float  # DCGM_FI_DEV_GPU_UTIL, percent
    nvlink_per_second: float  # DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL's rate
    pcie_tx: float  # DCGM_FI_PROF_PCIE_TX_BYTES, bytes per second
    namespace: str = ""
    pod: str = ""
    container: str = ""

    def labels(self) -> list[tuple[str, str]]:
        serial = f"{zlib.crc32(self.host.encode()):08x}"
        out = [
            ("gpu", str(self.index)),
            ("UUID", f"GPU-{serial}-{self.index:04d}-7c1e-0000-{self.index:012d}"),
            ("pci_bus_id", f"00000000:{0x18 + 0x10 * self.index:02X}:00.0"),
            ("device", f"nvidia{self.index}"),
            ("modelName", MODEL),
            ("Hostname", self.host),
            ("DCGM_FI_DRIVER_VERSION", DRIVER_VERSION),
        ]
        if self.pod:
            pod = (self.container, self.namespace, self.pod, f"uid-{self.namespace}-{self.pod}")
            out += list(zip(POD_ATTRIBUTES, pod, strict=True))
        return out


def render(gpus: Sequence[GPU], elapsed: float) -> str:
    """The /metrics text, ``elapsed`` seconds after the counters started."""
    counters = default_counters()
    values: dict[str, Callable[[GPU], float]] = {
        UTIL: lambda g: g.util,
        NVLINK: lambda g: COUNTER_BASE + g.nvlink_per_second * elapsed,
        PCIE_TX: lambda g: g.pcie_tx,
    }
    lines = []
    for name, value in values.items():
        kind, text = counters[name]  # a KeyError: not a default counter at the pinned tag
        lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]
        for g in gpus:
            labels = ",".join(f'{k}="{v}"' for k, v in g.labels())
            lines.append(f"{name}{{{labels}}} {value(g):.17g}")
    return "\n".join(lines) + "\n"


class FakeDCGMExporter:
    """``render`` on a free loopback port's ``/metrics`` (port 0: the kernel picks), in a thread."""

    def __init__(self, gpus: Sequence[GPU]) -> None:
        self.gpus = list(gpus)
        self.started = time.time()
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path != "/metrics":
                    self.send_error(404)
                    return
                body = render(exporter.gpus, time.time() - exporter.started).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: Prometheus scrapes every second."""

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="dcgm-fake", daemon=True)

    @property
    def address(self) -> str:
        host, port = self._server.server_address[:2]
        return f"{host!s}:{port}"

    def scrape_job(self) -> dict[str, Any]:
        """Prometheus' scrape config, ``honor_labels`` so the pod's ``namespace`` and ``pod`` stay
        (dcgm-exporter's chart: ``serviceMonitor.honorLabels: true``)."""
        return {
            "job_name": "dcgm-exporter",
            "honor_labels": True,
            "static_configs": [{"targets": [self.address]}],
        }

    def __enter__(self) -> FakeDCGMExporter:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
