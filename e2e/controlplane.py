"""A real Kubernetes control plane on loopback for end-to-end tests: etcd + kube-apiserver + kubectl.

Why real binaries instead of a fake API server: tasgate's contract is with kube-apiserver itself
(how it calls an admission webhook, applies a JSONPatch, enforces CRD schemas, writes audit
annotations, serves list+watch with 410 Gone). Only the real server answers those questions, so
the suite runs one, exactly as controller-runtime's envtest does, minus a controller-manager and a
scheduler (see DESIGN.md §6 for what that means: Jobs create no Pods, namespaces never finish
deleting; use fresh namespaces and create Pods with ``spec.nodeName``).

The binaries are built from pinned Go modules by ``e2e/build-binaries.sh`` into a cache outside the
repository; this module derives the same cache directory from the same ``go.mod`` files, so a bump
of the pinned versions makes the harness demand a rebuild instead of silently running old binaries.
When they are missing it raises ``BinariesMissingError`` saying how to build them: an e2e run that
quietly skips would report green without having tested anything.

Usage::

    with ControlPlane() as cp:
        cp.kubectl("apply", "--server-side", "-f", "crd.yaml")
        pods = cp.kubectl_json("get", "pods", "-A")

Every process is stopped on ``stop()``, on ``__exit__`` (also when the body raised), at interpreter
exit (``atexit``), and, when started from the main thread on Linux, by the kernel if the Python
process is killed outright (``PR_SET_PDEATHSIG``), so a crashed test run leaves nothing listening.
"""

from __future__ import annotations

import atexit
import contextlib
import http.client
import json
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from e2e.binaries import (
    BINARY_NAMES,
    BUILD_SCRIPT,
    E2E_DIR,
    TOOLS_DIR,
    VERSIONS_MARKER,
    Binaries,
    BinariesMissingError,
    ControlPlaneError,
    cache_bin_root,
    cache_dir,
    display_path,
    find_binaries,
    pinned_versions,
    required_version,
)
from e2e.pki import AUDIT_POLICY, write_kubeconfig, write_pki
from e2e.processes import LOG_TAIL_LINES, ServerProcess, free_ports
from e2e.webhook_auth import WebhookClientAuth, write_webhook_client_auth

__all__ = [  # the harness's one import point; the parts live in e2e.binaries, e2e.pki, e2e.processes
    "AUDIT_POLICY",
    "BINARY_NAMES",
    "BUILD_SCRIPT",
    "E2E_DIR",
    "TOOLS_DIR",
    "VERSIONS_MARKER",
    "Binaries",
    "BinariesMissingError",
    "ControlPlane",
    "ControlPlaneError",
    "KubectlError",
    "ServerProcess",
    "cache_bin_root",
    "cache_dir",
    "display_path",
    "find_binaries",
    "free_ports",
    "pinned_versions",
    "required_version",
]

SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc"
# The serving certificate must name every host a client may dial: loopback for kubectl and the
# tests, the in-cluster names and the first service IP for anything that resolves "kubernetes".
APISERVER_DNS_NAMES = ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc")
APISERVER_IPS = ("127.0.0.1", "10.0.0.1")

_PORT_ATTEMPTS = 3


class KubectlError(subprocess.CalledProcessError):
    """A failed kubectl run whose message includes kubectl's own stderr, which is the useful part."""

    def __str__(self) -> str:
        command = " ".join(map(str, self.cmd)) if isinstance(self.cmd, list | tuple) else str(self.cmd)
        parts = [f"{command!r} exited with {self.returncode}"]
        if self.stderr:
            parts.append(f"stderr:\n{str(self.stderr).rstrip()}")
        if self.stdout:
            parts.append(f"stdout:\n{str(self.stdout).rstrip()}")
        return "\n".join(parts)


# --- the control plane --------------------------------------------------------------------------


class ControlPlane:
    """etcd + kube-apiserver on loopback in a fresh temp dir, with an admin kubeconfig and kubectl.

    ``keep``: True keeps the temp dir (logs, certs, etcd data) after ``stop()``; False removes it;
    None (default) keeps it only if start-up failed or the ``with`` body raised, and always when
    ``$TASGATE_E2E_KEEP`` is set, so the logs named in a failure message still exist afterwards.
    ``apiserver_args`` are extra kube-apiserver flags appended after the harness's own (a later
    ``--flag=value`` wins), e.g. ``--admission-control-config-file=...``.
    ``webhook_client_hosts`` (default none): webhook hosts (``localhost:8443``, ``*.svc``) the API
    server presents a client certificate to; ``webhook_client`` then names it and its own CA.
    """

    def __init__(
        self,
        *,
        ready_timeout: float = 120.0,
        keep: bool | None = None,
        apiserver_args: Sequence[str] = (),
        binaries: Binaries | None = None,
        webhook_client_hosts: Sequence[str] = (),
    ) -> None:
        self.binaries = binaries or find_binaries()  # fail at construction, before any process starts
        self.ready_timeout = ready_timeout
        self.apiserver_args = list(apiserver_args)
        self.webhook_client_hosts = list(webhook_client_hosts)
        self._webhook_client: WebhookClientAuth | None = None
        self._keep = keep
        self._failed = False
        self._lock = threading.Lock()
        self._dir: Path | None = None
        self._etcd: ServerProcess | None = None
        self._apiserver: ServerProcess | None = None
        self.etcd_port = 0
        self.apiserver_port = 0

    # -- paths and endpoints (valid after start) --

    @property
    def dir(self) -> Path:
        """The temp dir holding everything: pki/, etcd data, logs, kubeconfig, audit log."""
        if self._dir is None:
            raise ControlPlaneError("the control plane is not started")
        return self._dir

    @property
    def server(self) -> str:
        """The API server URL, ``https://127.0.0.1:<port>``."""
        return f"https://127.0.0.1:{self.apiserver_port}"

    @property
    def etcd_url(self) -> str:
        return f"http://127.0.0.1:{self.etcd_port}"

    @property
    def kubeconfig(self) -> Path:
        """Admin kubeconfig (client certificate CN=admin, O=system:masters; bypasses RBAC)."""
        return self.dir / "kubeconfig"

    @property
    def ca_path(self) -> Path:
        """CA that signed the API server's serving cert and every client cert (``--client-ca-file``)."""
        return self.dir / "pki" / "ca.crt"

    @property
    def ca(self) -> tuple[Path, Path]:
        """``(ca.crt, ca.key)``, for ``webhook.serve.certs.client_cert`` to mint more users."""
        return self.ca_path, self.dir / "pki" / "ca.key"

    @property
    def admin_cert(self) -> tuple[Path, Path]:
        return self.dir / "pki" / "admin.crt", self.dir / "pki" / "admin.key"

    @property
    def webhook_client(self) -> WebhookClientAuth:
        """The certificate the API server calls ``webhook_client_hosts`` with, and the CA behind it."""
        if self._webhook_client is None:
            raise ControlPlaneError("the control plane was started without webhook_client_hosts")
        return self._webhook_client

    @property
    def audit_log(self) -> Path:
        """JSON-lines audit log (``--audit-log-format=json``, blocking mode: written before the reply)."""
        return self.dir / "audit.log"

    @property
    def audit_policy(self) -> Path:
        return self.dir / "audit-policy.yaml"

    @property
    def apiserver_log(self) -> Path:
        return self.dir / "kube-apiserver.log"

    @property
    def etcd_log(self) -> Path:
        return self.dir / "etcd.log"

    @property
    def apiserver_pid(self) -> int | None:
        """The running kube-apiserver's process id (e2e.faults pauses it with SIGSTOP), else None."""
        return None if self._apiserver is None else self._apiserver.pid

    # -- lifecycle --

    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc_type is not None:
            self._failed = True
        self.stop()

    def start(self) -> None:
        """Create the temp dir, certificates and config, start etcd then the API server, wait ready."""
        with self._lock:
            if self._dir is not None:
                raise ControlPlaneError("the control plane is already started")
            self._dir = Path(tempfile.mkdtemp(prefix="tasgate-e2e-"))
        atexit.register(self.stop)
        try:
            self._write_pki()
            self.audit_policy.write_text(yaml.safe_dump(AUDIT_POLICY, sort_keys=False))
            self._etcd = ServerProcess("etcd", self.etcd_log)
            self._apiserver = ServerProcess("kube-apiserver", self.apiserver_log)
            self._start_on_free_ports(self._etcd, self._start_etcd)
            self._start_on_free_ports(self._apiserver, self._start_apiserver_on_new_port)
        except BaseException:
            self._failed = True
            self.stop()
            raise

    def restart_apiserver(
        self, apiserver_args: Sequence[str] | None = None, down_seconds: float = 0.0
    ) -> None:
        """Stop kube-apiserver and start it again on the same port against the same etcd; wait ready.

        ``apiserver_args`` replaces the extra flags for this and later starts (None keeps them).
        ``down_seconds``: how long it stays stopped first (e2e.faults: an outage past --stale-after).
        """
        if self._apiserver is None:
            raise ControlPlaneError("the control plane is not started")
        if apiserver_args is not None:
            self.apiserver_args = list(apiserver_args)
        self._apiserver.stop()
        time.sleep(down_seconds)
        try:
            self._start_apiserver()
        except BaseException:
            self._failed = True
            raise

    def stop(self) -> None:
        """Terminate the API server then etcd (SIGTERM, SIGKILL after a bound); idempotent.

        Removes the temp dir unless it is to be kept (see the class docstring); when kept, its path
        is printed to stderr so a failed run points at its logs.
        """
        with self._lock:
            apiserver, etcd, directory = self._apiserver, self._etcd, self._dir
            self._apiserver = self._etcd = self._dir = None
        with contextlib.suppress(Exception):
            atexit.unregister(self.stop)
        try:
            if apiserver is not None:
                apiserver.stop()
        finally:
            if etcd is not None:
                etcd.stop()
        if directory is None:
            return
        keep = self._keep if self._keep is not None else self._failed
        if keep or os.environ.get("TASGATE_E2E_KEEP"):
            print(f"tasgate e2e: control plane files kept in {directory}", file=sys.stderr)
        else:
            shutil.rmtree(directory, ignore_errors=True)

    def running(self) -> bool:
        return all(p is not None and p.running() for p in (self._etcd, self._apiserver))

    # -- kubectl --

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 120.0
    ) -> subprocess.CompletedProcess[str]:
        """Run the real kubectl as admin against this control plane; raise ``KubectlError`` if check.

        KUBECONFIG and KUBECACHEDIR point into the temp dir, so the user's own ~/.kube is never
        read or written and discovery caches cannot leak between control planes.
        """
        argv = [str(self.binaries.kubectl), *args]
        result = subprocess.run(
            argv,
            input=input,
            capture_output=True,
            text=True,
            env=self._kubectl_env(),
            timeout=timeout,
            check=False,
        )
        if check and result.returncode != 0:
            raise KubectlError(result.returncode, argv, result.stdout, result.stderr)
        return result

    def kubectl_json(self, *args: str, input: str | None = None, timeout: float = 120.0) -> Any:
        """``kubectl <args> -o json``, parsed."""
        return json.loads(self.kubectl(*args, "-o", "json", input=input, timeout=timeout).stdout)

    def get_raw(self, path: str, timeout: float = 5.0) -> tuple[int, str]:
        """GET ``path`` as admin straight over HTTPS (no kubectl): ``(status, body)``."""
        context = ssl.create_default_context(cafile=str(self.ca_path))
        context.load_cert_chain(*map(str, self.admin_cert))
        connection = http.client.HTTPSConnection(
            "127.0.0.1", self.apiserver_port, context=context, timeout=timeout
        )
        try:
            connection.request("GET", path)
            response = connection.getresponse()
            return response.status, response.read().decode(errors="replace")
        finally:
            connection.close()

    def audit_events(self) -> list[dict[str, Any]]:
        """Every complete audit event logged so far (a half-written last line is left for next time)."""
        events: list[dict[str, Any]] = []
        with contextlib.suppress(FileNotFoundError), self.audit_log.open() as log:
            for line in log:
                if line.endswith("\n") and line.strip():
                    events.append(json.loads(line))
        return events

    # -- internals --

    def _write_pki(self) -> None:
        write_pki(self.dir / "pki", APISERVER_DNS_NAMES, APISERVER_IPS)
        if hosts := self.webhook_client_hosts:
            self._webhook_client = write_webhook_client_auth(self.dir / "webhook-client", hosts)

    def _write_kubeconfig(self) -> None:
        cert, key = self.admin_cert
        write_kubeconfig(self.kubeconfig, self.server, self.ca_path, cert, key)

    def _etcd_argv(self, peer_port: int) -> list[str]:
        peer = f"http://127.0.0.1:{peer_port}"
        return [
            str(self.binaries.etcd),
            "--name=tasgate-e2e",
            f"--data-dir={self.dir / 'etcd'}",
            f"--listen-client-urls={self.etcd_url}",
            f"--advertise-client-urls={self.etcd_url}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=tasgate-e2e={peer}",
            "--initial-cluster-state=new",
            # Throwaway data: skipping fsync makes every write (and so every API call) much faster.
            "--unsafe-no-fsync",
            "--log-level=warn",
        ]

    def _apiserver_argv(self) -> list[str]:
        pki, auth = self.dir / "pki", self._webhook_client
        admission = [f"--admission-control-config-file={auth.admission_config}"] if auth else []
        return [
            str(self.binaries.kube_apiserver),
            f"--etcd-servers={self.etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            # The default "lease" reconciler publishes the advertise address as the endpoints of
            # Service "kubernetes" and logs an error every 10 s because loopback is not a valid
            # endpoint IP; nothing in-cluster dials that Service here, so do not reconcile it.
            "--endpoint-reconciler-type=none",
            f"--secure-port={self.apiserver_port}",
            f"--cert-dir={self.dir / 'apiserver-certs'}",  # keeps it from touching /var/run/kubernetes
            f"--tls-cert-file={pki / 'tls.crt'}",
            f"--tls-private-key-file={pki / 'tls.key'}",
            f"--client-ca-file={self.ca_path}",
            f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
            "--allow-privileged=true",
            "--authorization-mode=RBAC",
            f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            # No controller-manager creates the "default" ServiceAccount, so this plugin would
            # reject every Pod.
            "--disable-admission-plugins=ServiceAccount",
            f"--audit-policy-file={self.audit_policy}",
            f"--audit-log-path={self.audit_log}",
            "--audit-log-format=json",
            "--audit-log-mode=blocking",  # the event is on disk before the client gets its reply
            *admission,
            *self.apiserver_args,
        ]

    @staticmethod
    def _start_on_free_ports(process: ServerProcess, start: Callable[[], None]) -> None:
        """Run ``start`` (pick ports, launch, wait); retry with new ports if the port race was lost.

        ``free_ports`` cannot reserve a port, so with parallel test runs another process may bind it
        first: the server then exits with "address already in use" and the next attempt picks new
        ports. Any other failure, or the last attempt, raises as usual.
        """
        for attempt in range(1, _PORT_ATTEMPTS + 1):
            try:
                start()
                return
            except ControlPlaneError:
                if attempt == _PORT_ATTEMPTS or "address already in use" not in process.output_since_start():
                    raise
                process.stop()

    def _start_etcd(self) -> None:
        assert self._etcd is not None
        self.etcd_port, peer_port = free_ports(2)
        self._etcd.start(self._etcd_argv(peer_port), self._env())
        self._wait_etcd()

    def _start_apiserver_on_new_port(self) -> None:
        (self.apiserver_port,) = free_ports(1)
        self._write_kubeconfig()  # it names the port
        self._start_apiserver()

    def _start_apiserver(self) -> None:
        assert self._apiserver is not None
        self._apiserver.start(self._apiserver_argv(), self._env())
        self._wait_apiserver()

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("KUBECONFIG", None)
        # A proxy in the environment must never see loopback traffic between our own processes.
        no_proxy = ",".join(filter(None, [env.get("NO_PROXY") or env.get("no_proxy"), "127.0.0.1,localhost"]))
        env["NO_PROXY"] = env["no_proxy"] = no_proxy
        return env

    def _kubectl_env(self) -> dict[str, str]:
        env = self._env()
        env["KUBECONFIG"] = str(self.kubeconfig)
        env["KUBECACHEDIR"] = str(self.dir / "kubectl-cache")
        return env

    def _wait(self, process: ServerProcess, what: str, probe: Callable[[], str | None]) -> None:
        """Poll ``probe`` (None = ready, else why not) until ready, the process dies, or the deadline."""
        deadline = time.monotonic() + self.ready_timeout
        reason = "no answer yet"
        while True:
            code = process.exit_code()
            if code is not None:
                raise ControlPlaneError(
                    f"{process.name} exited with status {code} before {what}; "
                    f"last {LOG_TAIL_LINES} lines of {process.log_path}:\n{process.tail()}"
                )
            try:
                outcome = probe()
            except (OSError, http.client.HTTPException) as exc:
                outcome = f"{type(exc).__name__}: {exc}"
            if outcome is None:
                return
            reason = outcome
            if time.monotonic() > deadline:
                raise ControlPlaneError(
                    f"{process.name} not {what} after {self.ready_timeout:g}s (last check: {reason}); "
                    f"last {LOG_TAIL_LINES} lines of {process.log_path}:\n{process.tail()}"
                )
            time.sleep(0.2)

    def _wait_etcd(self) -> None:
        assert self._etcd is not None

        def probe() -> str | None:
            connection = http.client.HTTPConnection("127.0.0.1", self.etcd_port, timeout=2)
            try:
                connection.request("GET", "/health")
                response = connection.getresponse()
                body = response.read().decode(errors="replace")
            finally:
                connection.close()
            healthy = response.status == 200 and json.loads(body).get("health") == "true"
            return None if healthy else f"/health: HTTP {response.status} {body.strip()}"

        self._wait(self._etcd, "healthy", probe)

    def _wait_apiserver(self) -> None:
        assert self._apiserver is not None

        def probe() -> str | None:
            status, body = self.get_raw("/readyz?verbose", timeout=5)
            if status == 200:
                return None
            failing = [line.strip() for line in body.splitlines() if "failed" in line]
            return f"/readyz: HTTP {status} {'; '.join(failing) or body.strip()[-300:]}"

        self._wait(self._apiserver, "ready", probe)
