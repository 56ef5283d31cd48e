"""Real faults on the e2e control plane, for the fault suite (tests/e2e/test_faults.py).

The recipes are the ones FAULTS.md (in shared/ beside the checkout) records as tried: signals to
real processes (SIGSTOP/SIGCONT pause one, SIGKILL ends it with no chance to answer what it
holds), an etcd compaction through etcd's own HTTP gateway (what makes a watch's
resourceVersion expire with 410 Gone), and `tasgate serve` run in live mode as a process the
test owns, so a test can kill, pause and probe it the way a node, an OOM killer or a network
would. Nothing here fakes a
failure a real part can be made to have.

The samplers that count what was answered are in ``e2e.faults_sample``; API Priority and
Fairness and tasgate's own user in ``e2e.faults_apf``; the world in ``e2e.faults_world``; the
TCP forwarder (one webhook URL, two replicas) in ``e2e.faults_net``; the table in
``e2e.faults_table``.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import ssl
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from e2e.controlplane import ControlPlane, ControlPlaneError, free_ports
from e2e.processes import stop_process
from e2e.serving import TASGATE
from webhook.serve import certs

ROOT_KEY = "Lw=="  # the etcd key "/", base64: a range from it reads the store's current revision


# --- signals ------------------------------------------------------------------------------------


def send(pid: int | None, sig: signal.Signals) -> None:
    """Signal one process we started, by its id (never by name: other engineers' processes share
    this machine)."""
    if pid is None:
        raise ControlPlaneError(f"no process to send {sig.name} to")
    os.kill(pid, sig)


@contextlib.contextmanager
def paused(pid: int | None) -> Iterator[None]:
    """SIGSTOP ``pid`` for the body, SIGCONT after it (also when the body raises): the process
    keeps its sockets open and answers nothing, as a frozen VM or a black-holed network would.
    A process killed inside the body is simply gone afterwards."""
    send(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            send(pid, signal.SIGCONT)


def wait_until(what: str, check: Callable[[], bool], timeout: float, every: float = 0.2) -> float:
    """Poll ``check`` until true; the seconds it took. AssertionError naming ``what`` on timeout."""
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(every)
    return time.monotonic() - started


# --- etcd -----------------------------------------------------------------------------------------


def etcd_call(cp: ControlPlane, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """One POST to etcd's gRPC gateway (``/v3/...``, JSON, plain HTTP on the client port)."""
    connection = http.client.HTTPConnection("127.0.0.1", cp.etcd_port, timeout=30)
    try:
        connection.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        text = response.read().decode(errors="replace")
    finally:
        connection.close()
    if response.status != 200:
        raise ControlPlaneError(f"etcd {path}: HTTP {response.status} {text[:300]}")
    answer: dict[str, Any] = json.loads(text)
    return answer


def compact_etcd(cp: ControlPlane) -> int:
    """Compact etcd at its current revision (physically): every older resourceVersion is gone, so
    a watch resumed from one gets 410 Gone. The revision compacted at."""
    revision = int(etcd_call(cp, "/v3/kv/range", {"key": ROOT_KEY, "limit": 1})["header"]["revision"])
    etcd_call(cp, "/v3/kv/compaction", {"revision": str(revision), "physical": True})
    return revision


# --- tasgate serve as a process the test owns ----------------------------------------------------


@dataclass(frozen=True)
class Serving:
    """One serving certificate for every replica, so the one caBundle the webhooks carry trusts
    whichever replica the forwarder reaches (two --dev-cert-dir would mint two CAs)."""

    cert: Path
    key: Path
    ca: Path

    @classmethod
    def make(cls, directory: Path) -> Serving:
        files = certs.generate(directory, ["localhost"], ["127.0.0.1"])
        return cls(files.cert, files.key, files.ca_cert)

    @property
    def ca_bundle(self) -> str:
        return certs.ca_bundle(self.ca)


@dataclass(frozen=True)
class Options:
    """The flags a fault needs; the rest are tasgate's defaults."""

    on_timeout: str = "deny"  # the suite's policy: an unchecked admission is always a wrong answer
    stale_after: float = 10.0
    fault_hook: bool = True
    leader_elect: bool | None = None  # None: tasgate's default
    lease_name: str = "tasgate-faults"
    lease_namespace: str = "tasgate-system"
    extra: Sequence[str] = ()
    env: Mapping[str, str] = field(default_factory=dict)


class Tasgate:
    """``tasgate serve --kubeconfig`` (live mode): its webhook port (TLS) and metrics port (HTTP).

    Started in a session of its own so a Ctrl-C reaches pytest first and the suite stops it;
    ``POD_NAME`` is its name, which is its identity in the leader election (two replicas on one
    host would otherwise both be the host name).
    """

    def __init__(
        self, name: str, workdir: Path, kubeconfig: Path, serving: Serving, options: Options = Options()
    ) -> None:
        self.name, self.workdir, self.kubeconfig, self.serving = name, workdir, kubeconfig, serving
        self.options = options
        self.port, self.metrics_port = free_ports(2)
        self.out_path, self.err_path = workdir / f"{name}.out", workdir / f"{name}.err"
        self.proc: subprocess.Popen[bytes] | None = None
        self.started = 0.0
        self._context = ssl.create_default_context(cafile=str(serving.ca))

    def argv(self) -> list[str]:
        o = self.options
        argv = [
            str(TASGATE),
            "serve",
            "--kubeconfig",
            str(self.kubeconfig),
            "--port",
            str(self.port),
            "--metrics-port",
            str(self.metrics_port),
            "--cert-file",
            str(self.serving.cert),
            "--key-file",
            str(self.serving.key),
            "--on-timeout",
            o.on_timeout,
            "--stale-after",
            f"{o.stale_after:g}",
        ]
        if o.fault_hook:
            argv.append("--test-fault-hook")
        if o.leader_elect is False:
            argv.append("--no-leader-elect")
        else:  # a Lease of the test's own: a replica the last test killed may still hold the default
            argv += ["--leader-elect"] if o.leader_elect else []
            argv += ["--lease-name", o.lease_name, "--lease-namespace", o.lease_namespace]
        return [*argv, *o.extra]

    def start(self) -> Tasgate:
        env = {**os.environ, "POD_NAME": self.name, **self.options.env}
        env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
        with self.out_path.open("ab") as out, self.err_path.open("ab") as err:
            self.started = time.monotonic()
            self.proc = subprocess.Popen(self.argv(), stdout=out, stderr=err, env=env, start_new_session=True)
        return self

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> float:
        """SIGKILL: nothing is drained, nothing in flight answered. The monotonic time of the kill."""
        at = time.monotonic()
        send(self.pid, signal.SIGKILL)
        assert self.proc is not None
        self.proc.wait(10)
        return at

    def stop(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGCONT)  # a paused process cannot act on SIGTERM
            stop_process(self.proc, 20)

    def log(self) -> str:
        return self.err_path.read_text(errors="replace") if self.err_path.exists() else ""

    def wait_ready(self, timeout: float = 90.0) -> float:
        """Seconds from the start to ``/readyz`` 200 (fails at once if the process exited)."""

        def ready() -> bool:
            if not self.alive():
                raise AssertionError(
                    f"{self.name} exited {self.proc and self.proc.poll()}:\n{self.log()[-3000:]}"
                )
            return self.readyz()[0] == 200

        wait_until(f"{self.name} to report ready", ready, timeout, every=0.1)
        return time.monotonic() - self.started

    # -- the metrics port: plain HTTP --

    def plain(self, method: str, path: str, timeout: float = 2.0) -> tuple[int, str]:
        """One request to the metrics port; ``(0, why)`` when it does not answer in ``timeout``."""
        connection = http.client.HTTPConnection("127.0.0.1", self.metrics_port, timeout=timeout)
        try:
            connection.request(method, path)
            response = connection.getresponse()
            return response.status, response.read().decode(errors="replace")
        except (OSError, http.client.HTTPException) as exc:
            return 0, f"{type(exc).__name__}: {exc}"
        finally:
            connection.close()

    def readyz(self, timeout: float = 2.0) -> tuple[int, str]:
        return self.plain("GET", "/readyz", timeout)

    def metrics(self, timeout: float = 5.0) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        """Every sample on /metrics by (name, labels); empty when the port does not answer."""
        status, text = self.plain("GET", "/metrics", timeout)
        if status != 200:
            return {}
        return {
            (s.name, frozenset(s.labels.items())): float(s.value)
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }

    def metric(self, name: str, **labels: str) -> float:
        """The sum of ``name``'s samples whose labels include ``labels`` (0 when there are none)."""
        wanted = set(labels.items())
        return sum(v for (n, ls), v in self.metrics().items() if n == name and wanted <= ls)

    def raise_in(self, task: str) -> tuple[int, str]:
        """The test-only fault hook: make the supervised background task ``task`` fail now."""
        return self.plain("POST", f"/debug/raise/{task}", 5.0)

    # -- the webhook port: TLS --

    def review(self, body: bytes, path: str = "/validate", timeout: float = 15.0) -> dict[str, Any]:
        """POST an AdmissionReview straight to this replica (no API server in between)."""
        connection = http.client.HTTPSConnection(
            "localhost", self.port, context=self._context, timeout=timeout
        )
        try:
            connection.request(
                "POST", f"{path}?timeout=10s", body=body, headers={"Content-Type": "application/json"}
            )
            response = connection.getresponse()
            text = response.read()
        finally:
            connection.close()
        if response.status != 200:
            raise ConnectionError(f"{path}: HTTP {response.status} {text[:300]!r}")
        answer: dict[str, Any] = json.loads(text)
        return answer


@contextlib.contextmanager
def running(*replicas: Tasgate, ready_timeout: float = 90.0) -> Iterator[tuple[Tasgate, ...]]:
    """Start each replica, wait until every one is ready; stop them all after the body."""
    try:
        for replica in replicas:
            replica.start()
        for replica in replicas:
            replica.wait_ready(ready_timeout)
        yield replicas
    finally:
        for replica in replicas:
            replica.stop()
