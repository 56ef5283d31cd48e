"""The real Kueue manager (pinned in e2e/tools/kueue/go.mod) running against an e2e ``ControlPlane``.

Usage::

    with ControlPlane() as cp, Kueue(cp) as kueue:
        cp.kubectl("apply", "-f", "-", input=queues_and_job_yaml)
        (workload,) = wait_admitted(cp, ns, "Job", name)  # e2e.kueue_admission
        main = workload_admission(workload)["main"]

``Kueue(cp).start()`` does what a release install does, minus the Deployment and with loopback
wiring (the recipe in KUEUE_E2E.md in shared/ beside the checkout):

1. Applies Kueue's own CRDs from the module source (``config/components/crd/bases/`` of the module
   directory ``go mod download -json`` reports; read in place from the module cache), plus the
   third-party CRDs of the enabled integrations from ``../shared/crds``, and waits until they are
   Established (a Kueue that starts before its CRDs exits 1 with "no matches for kind Workload").
   Applies Kueue's release RBAC and mints its credentials (``e2e.kueue_identity``): Kueue runs as
   ``system:serviceaccount:kueue-system:kueue-controller-manager``, authorised by its own roles.
2. Writes a ``config.kueue.x-k8s.io/v1beta2`` Configuration: namespace kueue-system, no leader
   election, health/metrics/webhook on free loopback ports, a webhook ``certDir`` made with the
   project's cert generator, internal cert management off, VisibilityOnDemand off (it would
   want ``/visibility/tls.crt``).
3. Starts ``kueue --config --kubeconfig`` under ``unshare --mount --propagation private`` with an
   overlay on /etc whose ``/etc/kueue/metrics/certs`` holds generated certs: with internal cert
   management off, Kueue loads the metrics certificate from that hard-coded path and exits 1 if it
   is missing. The host's /etc is never written. The PID is Kueue's own (unshare and sh exec).
4. Waits for ``/readyz``, then installs the webhook configurations under their release names,
   rendered by ``kubectl kustomize <module>/config/components/webhook`` (which adds the
   kube-system/kueue-system namespaceSelectors), Service dropped, every ``clientConfig`` rewritten
   to ``url: https://127.0.0.1:<port><path>`` + ``caBundle``; then waits until the API server
   actually calls both (a dry-run Job is defaulted to suspended, and a contradictory one denied).

``stop()`` deletes the webhook configurations *before* stopping Kueue: every webhook has
``failurePolicy: Fail``, so with Kueue down every Job and Pod create would be refused.

Kueue runs as the user a cluster gives it (``kueue.identity``; a client certificate with its
service account's name and groups), never as the harness admin: webhook ``matchConditions`` that
name Kueue's user (tasgate's) are exercised as in a cluster, and so is Kueue's RBAC. The harness
itself (CRDs, webhook configurations, probes) still acts as the admin.
"""

from __future__ import annotations

import atexit
import contextlib
import http.client
import json
import os
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from e2e.controlplane import ControlPlane, ServerProcess, free_ports
from e2e.kueue_admission import wait_for
from e2e.kueue_identity import Identity, install_identity
from e2e.kueue_source import (  # the binary, module source and CRDs; re-exported below
    DEFAULT_FRAMEWORKS,
    FRAMEWORK_CRDS,
    KUEUE_BIN_ENV,
    SHARED_CRDS,
    KueueError,
    find_kueue,
    go_command,
    install_crds,
    kueue_cache_dir,
    kueue_crd_files,
    module_source_dir,
    pinned_kueue_version,
    third_party_crd_files,
)
from webhook.serve import certs

__all__ = [  # tests and the other harness modules import all of these from here
    "CLIENT_CONNECTION",
    "CONFIG_API_VERSION",
    "DEFAULT_FRAMEWORKS",
    "FRAMEWORK_CRDS",
    "KUEUE_API_VERSION",
    "KUEUE_BIN_ENV",
    "KUEUE_NAMESPACE",
    "Kueue",
    "KueueError",
    "METRICS_CERTS_PATH",
    "PROBE_NAMESPACE",
    "SHARED_CRDS",
    "WEBHOOK_CONFIGURATION_NAMES",
    "WEBHOOK_KUSTOMIZATION",
    "find_kueue",
    "go_command",
    "install_crds",
    "kueue_cache_dir",
    "kueue_crd_files",
    "module_source_dir",
    "pinned_kueue_version",
    "third_party_crd_files",
]

KUEUE_NAMESPACE = "kueue-system"
CONFIG_API_VERSION = "config.kueue.x-k8s.io/v1beta2"
KUEUE_API_VERSION = "kueue.x-k8s.io/v1beta2"
WEBHOOK_KUSTOMIZATION = Path("config", "components", "webhook")
METRICS_CERTS_PATH = "/etc/kueue/metrics/certs"  # hard-coded in Kueue (no flag or config field)

# kustomize's output kinds -> the names a release install gives them (config/default's "kueue-"
# namePrefix).
WEBHOOK_CONFIGURATION_NAMES: Mapping[str, str] = {
    "MutatingWebhookConfiguration": "kueue-mutating-webhook-configuration",
    "ValidatingWebhookConfiguration": "kueue-validating-webhook-configuration",
}
# The client limits of Kueue's own sample configuration (the defaults throttle bursts of writes).
CLIENT_CONNECTION = {"qps": 300, "burst": 500}
PROBE_NAMESPACE = "default"

_MOUNT_SCRIPT = """set -e
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1,workdir=$2" /etc
mkdir -p "$4"
mount --bind "$3" "$4"
shift 4
exec "$@"
"""
_PORT_ATTEMPTS = 3
_LOG_TAIL_LINES = 40


# --- the manager ----------------------------------------------------------------------------------


class Kueue:
    """The Kueue manager against ``cp``: CRDs, Configuration, process, webhook configurations.

    ``frameworks``: the integrations to enable (keys of ``FRAMEWORK_CRDS``); their CRDs are
    installed. ``feature_gates`` are merged over ``{VisibilityOnDemand: False}``. ``log_level``
    (e.g. 3) is passed as ``--zap-log-level``. Files live in ``<cp.dir>/kueue/`` (log ``kueue.log``),
    so they are kept and removed together with the control plane's.
    """

    def __init__(
        self,
        cp: ControlPlane,
        *,
        frameworks: Sequence[str] = DEFAULT_FRAMEWORKS,
        feature_gates: Mapping[str, bool] | None = None,
        log_level: int | None = None,
        ready_timeout: float = 60.0,
        binary: Path | None = None,
    ) -> None:
        self.binary = binary or find_kueue()  # fail before touching the control plane
        third_party_crd_files(frameworks)  # unknown integration / missing CRD file: fail now too
        self.cp = cp
        self.frameworks = list(frameworks)
        self.feature_gates = {"VisibilityOnDemand": False, **(feature_gates or {})}
        self.log_level = log_level
        self.ready_timeout = ready_timeout
        self.health_port = self.metrics_port = self.webhook_port = 0
        self._process: ServerProcess | None = None
        self._webhooks_installed = False
        self._ca_bundle = ""
        self._identity: tuple[Identity, Path] | None = None

    # -- paths --

    @property
    def dir(self) -> Path:
        return self.cp.dir / "kueue"

    @property
    def log_path(self) -> Path:
        return self.dir / "kueue.log"

    @property
    def config_path(self) -> Path:
        return self.dir / "config.yaml"

    @property
    def webhook_cert_dir(self) -> Path:
        """``webhook.certDir``: tls.crt/tls.key (SAN 127.0.0.1) and the CA that is the caBundle."""
        return self.dir / "webhook-certs"

    @property
    def metrics_cert_dir(self) -> Path:
        """Bind-mounted on /etc/kueue/metrics/certs inside Kueue's mount namespace."""
        return self.dir / "metrics-certs"

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def running(self) -> bool:
        return self._process is not None and self._process.running()

    @property
    def identity(self) -> Identity:
        """The user Kueue runs as (its service account's name and groups); known once started."""
        if self._identity is None:
            raise KueueError("Kueue's identity is not installed yet (start() first)")
        return self._identity[0]

    @property
    def kubeconfig(self) -> Path:
        """The kubeconfig Kueue starts with: its own client certificate, not the admin's."""
        if self._identity is None:
            raise KueueError("Kueue's identity is not installed yet (start() first)")
        return self._identity[1]

    # -- lifecycle --

    def __enter__(self) -> Kueue:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Install CRDs, start Kueue, wait for /readyz, install and wait for the webhooks."""
        if self._process is not None:
            raise KueueError("Kueue is already started")
        source = module_source_dir()
        self.dir.mkdir(parents=True, exist_ok=True)
        atexit.register(self.stop)
        try:
            install_crds(self.cp, [*kueue_crd_files(source), *third_party_crd_files(self.frameworks)])
            namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": KUEUE_NAMESPACE}}
            self.cp.kubectl("apply", "-f", "-", input=json.dumps(namespace))
            self._identity = install_identity(self.cp, source, self.dir / "identity")
            if not self.identity.username.startswith(f"system:serviceaccount:{KUEUE_NAMESPACE}:"):
                raise KueueError(
                    f"Kueue's release RBAC binds {self.identity.username}, not in {KUEUE_NAMESPACE}"
                )
            self._write_certs()
            self._process = ServerProcess("kueue", self.log_path)
            self._start_on_free_ports()
            self.install_webhooks(source)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Delete the webhook configurations, then stop Kueue (SIGTERM, SIGKILL after 15 s); idempotent."""
        with contextlib.suppress(Exception):
            atexit.unregister(self.stop)
        try:
            if self._webhooks_installed:
                self._webhooks_installed = False
                if self.cp.running():
                    names = [f"{kind.lower()}/{name}" for kind, name in WEBHOOK_CONFIGURATION_NAMES.items()]
                    self.cp.kubectl("delete", "--ignore-not-found", "--wait=false", *names)
        finally:
            process, self._process = self._process, None
            if process is not None:
                process.stop()

    # -- webhooks --

    def webhook_configurations(self, source: Path | None = None) -> list[dict[str, Any]]:
        """Kueue's release webhook configurations, rewired to this process over loopback URLs."""
        if not self._ca_bundle:
            raise KueueError("certificates are not generated yet (start() first)")
        rendered = self.cp.kubectl("kustomize", str((source or module_source_dir()) / WEBHOOK_KUSTOMIZATION))
        configurations = []
        for doc in yaml.safe_load_all(rendered.stdout):
            if not doc or doc.get("kind") not in WEBHOOK_CONFIGURATION_NAMES:
                continue  # the webhook Service: nothing here routes to it
            doc["metadata"] = {"name": WEBHOOK_CONFIGURATION_NAMES[doc["kind"]]}
            for hook in doc.get("webhooks") or ():
                path = (hook.get("clientConfig") or {}).get("service", {}).get("path") or "/"
                hook["clientConfig"] = {
                    "url": f"https://127.0.0.1:{self.webhook_port}{path}",
                    "caBundle": self._ca_bundle,
                }
            configurations.append(doc)
        kinds = sorted(doc["kind"] for doc in configurations)
        if kinds != sorted(WEBHOOK_CONFIGURATION_NAMES):
            raise KueueError(
                f"kubectl kustomize rendered {kinds}, expected one of each webhook configuration"
            )
        return configurations

    def install_webhooks(self, source: Path | None = None, timeout: float = 30.0) -> None:
        """Apply the webhook configurations and wait until the API server calls both of them."""
        documents = self.webhook_configurations(source)
        self._webhooks_installed = True
        self.cp.kubectl(
            "apply", "--server-side", "--force-conflicts", "-f", "-", input=yaml.safe_dump_all(documents)
        )
        wait_for("the API server to call Kueue's webhooks", self._webhooks_answer, timeout, every=0.3)

    def _webhooks_answer(self) -> bool:
        """True once a dry-run Job is suspended by mjob.kb.io and a bad one denied by vjob.kb.io."""
        self._check_alive("its webhooks answered")
        job = _probe_job()
        defaulted = self.cp.kubectl(
            "create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(job), check=False
        )
        if defaulted.returncode != 0 or json.loads(defaulted.stdout)["spec"].get("suspend") is not True:
            return False
        annotations = job["spec"]["template"].setdefault("metadata", {}).setdefault("annotations", {})
        annotations["kueue.x-k8s.io/podset-required-topology"] = "kubernetes.io/hostname"
        annotations["kueue.x-k8s.io/podset-preferred-topology"] = "kubernetes.io/hostname"
        denied = self.cp.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(job), check=False)
        return denied.returncode != 0 and '"vjob.kb.io" denied' in denied.stderr

    # -- internals --

    def _write_certs(self) -> None:
        served = certs.generate(self.webhook_cert_dir, ["localhost"], ["127.0.0.1"], days=30)
        certs.generate(
            self.metrics_cert_dir, ["localhost"], ["127.0.0.1"], days=30, ca=(served.ca_cert, served.ca_key)
        )
        self._ca_bundle = certs.ca_bundle(served.ca_cert)

    def configuration(self) -> dict[str, Any]:
        """The Configuration file Kueue is started with (ports as picked for this start)."""
        return {
            "apiVersion": CONFIG_API_VERSION,
            "kind": "Configuration",
            "namespace": KUEUE_NAMESPACE,
            "leaderElection": {"leaderElect": False},
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
            "metrics": {"bindAddress": f"127.0.0.1:{self.metrics_port}"},
            "webhook": {
                "host": "127.0.0.1",
                "port": self.webhook_port,
                "certDir": str(self.webhook_cert_dir),
            },
            "internalCertManagement": {"enable": False},
            "clientConnection": dict(CLIENT_CONNECTION),
            "featureGates": dict(self.feature_gates),
            "integrations": {"frameworks": list(self.frameworks)},
        }

    def argv(self) -> list[str]:
        """unshare + overlay-on-/etc mount script + ``kueue --config --kubeconfig``."""
        overlay = self.dir / "etc-overlay"
        upper, work = overlay / "upper", overlay / "work"
        upper.mkdir(parents=True, exist_ok=True)
        work.mkdir(parents=True, exist_ok=True)
        unshare = shutil.which("unshare") or "unshare"
        # Unprivileged: a user namespace in which we are root may mount too (kernel >= 5.11 for overlay).
        user_ns = ["--map-root-user"] if os.geteuid() != 0 else []
        kueue = [str(self.binary), f"--config={self.config_path}", f"--kubeconfig={self.kubeconfig}"]
        if self.log_level is not None:
            kueue.append(f"--zap-log-level={self.log_level}")
        return [
            unshare,
            "--mount",
            "--propagation",
            "private",
            *user_ns,
            "/bin/sh",
            "-c",
            _MOUNT_SCRIPT,
            "kueue-mounts",
            str(upper),
            str(work),
            str(self.metrics_cert_dir),
            METRICS_CERTS_PATH,
            *kueue,
        ]

    def _start_on_free_ports(self) -> None:
        """Pick ports, write the config, start, wait for /readyz; new ports if one was taken meanwhile."""
        assert self._process is not None
        for attempt in range(1, _PORT_ATTEMPTS + 1):
            self.health_port, self.metrics_port, self.webhook_port = free_ports(3)
            self.config_path.write_text(yaml.safe_dump(self.configuration(), sort_keys=False))
            self._process.start(self.argv(), self.cp._env())
            try:
                self._wait_ready()
                return
            except KueueError:
                output = self._process.output_since_start()
                if attempt == _PORT_ATTEMPTS or "address already in use" not in output:
                    raise
                self._process.stop()

    def _check_alive(self, what: str) -> None:
        assert self._process is not None
        code = self._process.exit_code()
        if code is not None:
            raise KueueError(
                f"kueue exited with status {code} before {what}; "
                f"last {_LOG_TAIL_LINES} lines of {self.log_path}:\n{self._process.tail(_LOG_TAIL_LINES)}"
            )

    def _wait_ready(self) -> None:
        assert self._process is not None
        deadline = time.monotonic() + self.ready_timeout
        reason = "no answer yet"
        while True:
            self._check_alive("/readyz answered 200")
            try:
                connection = http.client.HTTPConnection("127.0.0.1", self.health_port, timeout=2)
                try:
                    connection.request("GET", "/readyz")
                    response = connection.getresponse()
                    body = response.read().decode(errors="replace")
                finally:
                    connection.close()
                if response.status == 200:
                    return
                reason = f"/readyz: HTTP {response.status} {body.strip()[-300:]}"
            except (OSError, http.client.HTTPException) as exc:
                reason = f"{type(exc).__name__}: {exc}"
            if time.monotonic() > deadline:
                raise KueueError(
                    f"kueue not ready after {self.ready_timeout:g}s (last check: {reason}); "
                    f"last {_LOG_TAIL_LINES} lines of {self.log_path}:\n{self._process.tail(_LOG_TAIL_LINES)}"
                )
            time.sleep(0.1)


def _probe_job() -> dict[str, Any]:
    """A Job Kueue manages (queue-name label) and suspends on create; only ever sent as a dry run."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "kueue-webhook-probe",
            "namespace": PROBE_NAMESPACE,
            "labels": {"kueue.x-k8s.io/queue-name": "probe"},
        },
        "spec": {
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "probe"}]}}
        },
    }


if __name__ == "__main__":  # pragma: no cover - manual: `python -m e2e.kueue` starts both and waits
    with ControlPlane(keep=True) as plane, Kueue(plane) as manager:
        print(f"control plane {plane.server}, kubeconfig {plane.kubeconfig}; kueue pid {manager.pid}")
        print(f"kueue log {manager.log_path}; Ctrl-C to stop", file=sys.stderr)
        with contextlib.suppress(KeyboardInterrupt):
            while manager.running():
                time.sleep(1)
