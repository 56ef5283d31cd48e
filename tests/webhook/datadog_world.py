"""A live `tasgate serve` in which every metric the Datadog annotation lists has series, for the
Datadog Agent's own check to scrape (``test_datadog_check.py``).

Live mode, because the gang series exist only there: the in-process fake API server
(``fakeapi.py``) holds the world the lifecycle objects were captured in (``manifests/lifecycle``:
2 racks × 4 8-GPU nodes, a gang running in one rack, one started partially, one waiting for
quota). The gangs arrive after tasgate is ready, as gangs that start while it runs do: a gang
tracked before the first cluster state is published is never judged for placement, so it would
have no ``gang_domains_spanned`` series. Then the traffic that makes the remaining series: a
refusal with its reason, an admission through both webhooks, a dry run, a malformed body, a policy
reload, one background task restart (the fault suite's hook). A second `tasgate serve`, on an API
server that does not answer, is a replica that is not ready: its cluster state never loads.
"""

from __future__ import annotations

import asyncio
import functools
import shutil
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import yaml

from tests.webhook.conftest import HOST, REPO, TASGATE, job, job_review, kueue_objects, namespace_object, node
from tests.webhook.fakeapi import FakeApi
from tests.webhook.test_hardening import free_port
from tests.webhook.test_kubeconfig import collection, kubeconfig

LIFECYCLE = REPO / "tests" / "webhook" / "manifests" / "lifecycle"
BLOCK, RACK = "topology.example.com/block", "topology.example.com/rack"
NAMESPACE, QUEUE = "gangs", "gpu-queue"
GANG_PATHS = {  # the captured gangs' objects and where the API server keeps them
    "workloads.yaml": "/apis/kueue.x-k8s.io/v1beta2/namespaces/gangs/workloads",
    "pods.yaml": "/api/v1/namespaces/gangs/pods",
    "podgroups.yaml": "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/gangs/podgroups",
}
# What the traffic leaves on /metrics: each line is waited for (the tracker, the policy poller and
# the supervisor act on their own schedule), so the check never scrapes a half-made world.
AWAITED = (
    'tasgate_gang_topology_met_total{level="topology.example.com/rack",mode="required",result="met"} 1.0',
    'tasgate_events_total{result="posted"}',
    'tasgate_policy_reloads_total{result="ok"} 1.0',
    'tasgate_task_restarts_total{task="policy"} 1.0',
    'tasgate_dry_run_decisions_total{cluster_queue="gpu-cq",decision="allow"',
)


def wait_for(done: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Poll ``done`` until it holds; fail with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def world() -> list[dict[str, Any]]:
    """The nodes, Topology, flavor and queues the captured gangs ran on (``test_tracker``'s)."""
    nodes = [node(f"n{i}", {"pool": "gpu", BLOCK: "b0", RACK: f"b0-r{i // 4}"}) for i in range(8)]
    queues = kueue_objects((BLOCK, RACK, HOST), {"gpu-flavor": {"pool": "gpu"}}, "gpu-topology",
                           QUEUE, NAMESPACE, "gpu-cq")  # fmt: skip
    return [*nodes, *queues, namespace_object(NAMESPACE)]


class FakeCluster:
    """The fake API server on its own event loop thread: the Agent's check and the test are
    synchronous, and the server must keep answering tasgate's watches while they block."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.api = asyncio.run_coroutine_threadsafe(FakeApi().start(), self.loop).result(10)
        assert self.api.server is not None
        self.url = str(self.api.server.make_url("")).rstrip("/")

    def put(self, path: str, obj: dict[str, Any]) -> None:
        asyncio.run_coroutine_threadsafe(_call(self.api.put, path, obj), self.loop).result(10)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.api.close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


async def _call(put: Callable[[str, dict[str, Any]], Any], path: str, obj: dict[str, Any]) -> None:
    put(path, obj)  # on the server's loop, as its watches read the history there


class Served:
    """`tasgate serve` in live mode on ``server`` (an API server URL), stderr in a file."""

    def __init__(self, tmp: Path, server: str) -> None:
        tmp.mkdir()
        self.port, self.metrics_port = free_port(), free_port()
        self.log, self.policy = tmp / "serve.log", tmp / "policy.yaml"
        shutil.copy(REPO / "webhook" / "data" / "default-policy.yaml", self.policy)
        config = kubeconfig(tmp / "kubeconfig", "fake", {"fake": (server, NAMESPACE)})
        argv = [str(TASGATE), "serve", "--kubeconfig", str(config), "--no-leader-elect",
                "--port", str(self.port), "--metrics-port", str(self.metrics_port),
                "--dev-cert-dir", str(tmp / "certs"), "--policy", str(self.policy),
                "--cert-poll-seconds", "0.2", "--test-fault-hook"]  # fmt: skip
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=self.log.open("w"))
        self.ca = tmp / "certs" / "ca.crt"

    def wait_up(self) -> None:
        """Wait for the metrics port, which `serve` opens after the webhook port, and the CA of the
        development certificate it wrote before either."""
        wait_for(lambda: self.up() and self.ca.exists(), "tasgate serve to listen")
        self.tls = ssl.create_default_context(cafile=str(self.ca))

    def up(self) -> bool:
        assert self.proc.poll() is None, f"tasgate serve exited:\n{self.log.read_text()[-3000:]}"
        return self.status("/healthz") == 200

    def status(self, path: str) -> int | None:
        """The HTTP status of GET ``path`` on the metrics port; None while nothing listens."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}{path}", timeout=5) as page:
                return int(page.status)
        except urllib.error.HTTPError as failed:
            return failed.code
        except OSError:
            return None

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as page:
            return bytes(page.read()).decode()

    def review(self, endpoint: str, body: bytes) -> dict[str, Any]:
        """POST an AdmissionReview (or any body) to the webhook port; the answer, or its error."""
        request = urllib.request.Request(
            f"https://localhost:{self.port}/{endpoint}", body, {"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=10, context=self.tls) as page:
                return dict(orjson.loads(page.read()))
        except urllib.error.HTTPError as failed:
            return {"status": failed.code}

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


def verdict(answer: dict[str, Any]) -> tuple[bool, str]:
    response = answer["response"]
    return response["allowed"], response.get("status", {}).get("reason", "")


def traffic(cluster: FakeCluster, served: Served) -> None:
    """Everything that makes the annotation's metrics have series, each outcome checked."""
    for name, path in GANG_PATHS.items():
        for obj in (d for d in yaml.safe_load_all((LIFECYCLE / name).read_text()) if d):
            cluster.put(path, obj)
    rack = {"kueue.x-k8s.io/podset-required-topology": RACK}
    big = job(8, annotations=rack, queue=QUEUE, namespace=NAMESPACE, name="too-big")
    small = job(1, annotations=rack, queue=QUEUE, namespace=NAMESPACE, name="one-pod")
    denied = served.review("mutate", job_review(big, "uid-deny", NAMESPACE, "alice"))
    assert verdict(denied)[0] is False, denied  # refused on /mutate: the request ends there
    for endpoint in ("mutate", "validate"):
        admitted = served.review(endpoint, job_review(small, f"uid-{endpoint}", NAMESPACE, "alice"))
        assert verdict(admitted)[0] is True, admitted
    dry = orjson.loads(job_review(small, "uid-dry", NAMESPACE, "alice"))
    dry["request"]["dryRun"] = True
    assert verdict(served.review("validate", orjson.dumps(dry)))[0] is True
    assert served.review("validate", b"{")["status"] == 400  # counted as errors{kind="malformed"}
    served.policy.write_text(served.policy.read_text() + "# edited: a new content to reload\n")
    fault = urllib.request.Request(f"http://127.0.0.1:{served.metrics_port}/debug/raise/policy", b"")
    with urllib.request.urlopen(fault, timeout=5) as page:
        assert page.status == 200
    for line in AWAITED:
        wait_for(functools.partial(_shows, served, line), line)


def _shows(served: Served, line: str) -> bool:
    return line in served.metrics()


@dataclass
class World:
    served: Served  # ready on the fake cluster, with all the traffic done
    unready: Served  # on an API server that does not answer: up, never ready


def live_world(tmp: Path) -> Iterator[World]:
    """Both tasgates (started together: most of a start is Python importing), torn down after."""
    cluster = FakeCluster()
    for obj in world():
        cluster.put(collection(obj), obj)
    served = Served(tmp / "live", cluster.url)
    unready = Served(tmp / "unready", f"http://127.0.0.1:{free_port()}")
    try:
        served.wait_up()
        unready.wait_up()
        wait_for(lambda: served.status("/readyz") == 200, "tasgate to be ready")
        traffic(cluster, served)
        yield World(served, unready)
    finally:
        served.stop()
        unready.stop()
        cluster.close()
