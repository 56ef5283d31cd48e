"""The real Kueue manager (pinned in e2e/tools/kueue/go.mod) running against an e2e ``ControlPlane``.

Usage::

    with ControlPlane() as cp, Kueue(cp) as kueue:
        cp.kubectl("apply", "-f", "-", input=queues_and_job_yaml)
        (workload,) = wait_admitted(cp, ns, "Job", name)  # e2e.kueue_admission
        main = workload_admission(workload)["main"]

``Kueue(cp).start()`` does what a release install does, minus the Deployment and with loopback
wiring (the recipe in /work/shared/KUEUE_E2E.md):

1. Applies Kueue's own CRDs from the module source (``config/components/crd/bases/`` of the module
   directory ``go mod download -json`` reports; read in place from the module cache), plus the
   third-party CRDs of the enabled integrations from ``../shared/crds``, and waits until they are
   Established (a Kueue that starts before its CRDs exits 1 with "no matches for kind Workload").
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

Kueue runs with the harness's admin kubeconfig (system:masters): RBAC is not exercised.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import http.client
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from e2e.controlplane import (
    BUILD_SCRIPT,
    TOOLS_DIR,
    VERSIONS_MARKER,
    BinariesMissingError,
    ControlPlane,
    ControlPlaneError,
    ServerProcess,
    cache_bin_root,
    display_path,
    free_ports,
    required_version,
)
from e2e.kueue_admission import wait_for
from e2e.shared import shared_dir
from webhook.serve import certs

REPO_ROOT = Path(__file__).resolve().parents[1]
# shared/ sits beside the repository (in CI a read-only copy beside the clone).
SHARED_CRDS = shared_dir() / "crds"
KUEUE_TOOLS_DIR = TOOLS_DIR / "kueue"
KUEUE_MODULE = "sigs.k8s.io/kueue"
KUEUE_BIN_ENV = "TASGATE_E2E_KUEUE_BIN"  # a directory holding a `kueue` binary; trusted as is
KUEUE_NAMESPACE = "kueue-system"
CONFIG_API_VERSION = "config.kueue.x-k8s.io/v1beta2"
KUEUE_API_VERSION = "kueue.x-k8s.io/v1beta2"
CRD_BASES = Path("config", "components", "crd", "bases")
WEBHOOK_KUSTOMIZATION = Path("config", "components", "webhook")
METRICS_CERTS_PATH = "/etc/kueue/metrics/certs"  # hard-coded in Kueue (no flag or config field)

# Integration (framework name as Kueue v0.19.2 spells it) -> the CRD file in ../shared/crds it
# needs; None for built-in kinds. Kueue skips an integration whose API is not served, so the CRD
# of every enabled one is installed before Kueue starts.
FRAMEWORK_CRDS: Mapping[str, str | None] = {
    "batch/job": None,
    "jobset.x-k8s.io/jobset": "jobset.x-k8s.io_jobsets.yaml",
    "kubeflow.org/pytorchjob": "kubeflow.org_pytorchjobs.yaml",
    "kubeflow.org/mpijob": "kubeflow.org_mpijobs.yaml",
    "leaderworkerset.x-k8s.io/leaderworkerset": "leaderworkerset.x-k8s.io_leaderworkersets.yaml",
    "pod": None,
}
DEFAULT_FRAMEWORKS: tuple[str, ...] = tuple(FRAMEWORK_CRDS)
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


class KueueError(ControlPlaneError):
    """Kueue could not be installed or started, did not become ready, or died."""


# --- binary and module source --------------------------------------------------------------------


def pinned_kueue_version() -> str:
    """The ``sigs.k8s.io/kueue`` version e2e/tools/kueue/go.mod requires (build-binaries.sh reads it too)."""
    return required_version(KUEUE_TOOLS_DIR / "go.mod", KUEUE_MODULE)


def kueue_cache_dir() -> Path:
    """``<cache>/bin/kueue-<version>/``: where build-binaries.sh links ``kueue`` and its VERSIONS marker.

    Kueue gets a directory of its own (not the kube/etcd one) because its version moves
    independently: bumping it must not invalidate kube-apiserver, nor a kube bump Kueue.
    """
    return cache_bin_root() / f"kueue-{pinned_kueue_version()}"


def find_kueue() -> Path:
    """The ``kueue`` binary from ``$TASGATE_E2E_KUEUE_BIN`` if set, else from the build cache.

    Like ``find_binaries``: the cache directory must also hold build-binaries.sh's VERSIONS marker
    (written after the link), and a miss raises ``BinariesMissingError``, never a skip.
    """
    override = os.environ.get(KUEUE_BIN_ENV)
    directory = Path(override).expanduser() if override else kueue_cache_dir()
    binary = directory / "kueue"
    missing = [] if os.access(binary, os.X_OK) else ["kueue"]
    if not override and not missing and not (directory / VERSIONS_MARKER).is_file():
        missing.append(f"{VERSIONS_MARKER} (build-binaries.sh did not finish)")
    if missing:
        source = KUEUE_BIN_ENV if override else "the build cache for the pinned Kueue version"
        raise BinariesMissingError(
            f"Kueue binary missing from {directory} ({source}): {', '.join(missing)}. "
            f"Build it with `bash {display_path(BUILD_SCRIPT)}` (cold Kueue build: about 3 min on 2 cores; "
            f"cached afterwards), or set {KUEUE_BIN_ENV} to a directory holding kueue."
        )
    return binary


def go_command() -> str:
    """The Go toolchain build-binaries.sh would use: ``$GO``, ``go`` on PATH, /usr/local/go/bin/go."""
    go = os.environ.get("GO") or shutil.which("go") or "/usr/local/go/bin/go"
    if not os.access(go, os.X_OK):
        raise KueueError(f"no Go toolchain at {go!r} (set GO=/path/to/go): needed to locate Kueue's sources")
    return go


@functools.cache
def module_source_dir() -> Path:
    """Kueue's module directory in the Go module cache (read-only), as ``go mod download -json`` reports.

    Offline once build-binaries.sh (or any ``go mod download``) has fetched the module.
    """
    version = pinned_kueue_version()
    argv = [go_command(), "mod", "download", "-json", f"{KUEUE_MODULE}@{version}"]
    env = dict(os.environ, GOTOOLCHAIN="local")
    try:
        result = subprocess.run(
            argv, cwd=KUEUE_TOOLS_DIR, capture_output=True, text=True, env=env, timeout=600, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise KueueError(f"{' '.join(argv)} failed: {exc}") from exc
    try:
        info = json.loads(result.stdout)
    except json.JSONDecodeError:
        info = {}
    directory = info.get("Dir")
    if result.returncode != 0 or info.get("Error") or not directory:
        detail = info.get("Error") or result.stderr.strip() or result.stdout.strip()
        raise KueueError(f"{' '.join(argv)} (in {KUEUE_TOOLS_DIR}) exited {result.returncode}: {detail}")
    return Path(directory)


# --- CRDs -----------------------------------------------------------------------------------------


def kueue_crd_files(source: Path | None = None) -> list[Path]:
    """Every CRD of Kueue's ``config/components/crd/bases/`` (11 in v0.19.2)."""
    bases = (source or module_source_dir()) / CRD_BASES
    files = sorted(bases.glob("*.yaml"))
    if not files:
        raise KueueError(f"no CRDs in {bases}")
    return files


def third_party_crd_files(frameworks: Iterable[str]) -> list[Path]:
    """The ../shared/crds files the given integrations need (jobset, kubeflow, leaderworkerset)."""
    files = []
    for framework in frameworks:
        if framework not in FRAMEWORK_CRDS:
            raise KueueError(f"unknown integration {framework!r}; known: {', '.join(FRAMEWORK_CRDS)}")
        name = FRAMEWORK_CRDS[framework]
        if name is not None:
            path = SHARED_CRDS / name
            if not path.is_file():
                raise KueueError(f"integration {framework} needs {path}, which does not exist")
            files.append(path)
    return files


def install_crds(cp: ControlPlane, files: Sequence[Path], timeout: float = 60.0) -> list[str]:
    """Server-side apply ``files`` in one kubectl run and wait until all are Established; the CRD names."""
    if not files:
        return []
    args = [a for path in files for a in ("-f", str(path))]
    applied = cp.kubectl("apply", "--server-side", "--force-conflicts", "-o", "name", *args).stdout.split()
    cp.kubectl("wait", "--for", "condition=established", f"--timeout={timeout:g}s", *applied)
    return [name.rpartition("/")[2] for name in applied]


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
        kueue = [str(self.binary), f"--config={self.config_path}", f"--kubeconfig={self.cp.kubeconfig}"]
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
