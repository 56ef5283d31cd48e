"""Where the e2e Kueue comes from: the pinned version, its built binary, its module source and CRDs.

The pinned ``sigs.k8s.io/kueue`` version lives in e2e/tools/kueue/go.mod (build-binaries.sh reads
it too); the binary in the build cache (or ``$TASGATE_E2E_KUEUE_BIN``); the module source (CRDs,
webhook and RBAC kustomizations) read in place from the Go module cache. ``e2e.kueue`` re-exports
all of it: tests and the other harness modules import from there.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from e2e.controlplane import (
    BUILD_SCRIPT,
    TOOLS_DIR,
    VERSIONS_MARKER,
    BinariesMissingError,
    ControlPlane,
    ControlPlaneError,
    cache_bin_root,
    display_path,
    required_version,
)
from e2e.shared import shared_dir

# shared/ sits beside the repository (in CI a read-only copy beside the clone).
SHARED_CRDS = shared_dir() / "crds"
KUEUE_TOOLS_DIR = TOOLS_DIR / "kueue"
KUEUE_MODULE = "sigs.k8s.io/kueue"
KUEUE_BIN_ENV = "TASGATE_E2E_KUEUE_BIN"  # a directory holding a `kueue` binary; trusted as is
CRD_BASES = Path("config", "components", "crd", "bases")

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
    return downloaded_module(KUEUE_MODULE, pinned_kueue_version(), KUEUE_TOOLS_DIR, KueueError)


def downloaded_module(
    module: str, version: str, cwd: Path, error: type[ControlPlaneError] = ControlPlaneError
) -> Path:
    """``module@version``'s directory in the Go module cache, from ``go mod download -json`` run in
    the wrapper module ``cwd`` (its go.sum vouches for it); ``error`` when it cannot be had."""
    argv = [go_command(), "mod", "download", "-json", f"{module}@{version}"]
    env = dict(os.environ, GOTOOLCHAIN="local")
    try:
        result = subprocess.run(
            argv, cwd=cwd, capture_output=True, text=True, env=env, timeout=600, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise error(f"{' '.join(argv)} failed: {exc}") from exc
    try:
        info = json.loads(result.stdout)
    except json.JSONDecodeError:
        info = {}
    directory = info.get("Dir")
    if result.returncode != 0 or info.get("Error") or not directory:
        detail = info.get("Error") or result.stderr.strip() or result.stdout.strip()
        raise error(f"{' '.join(argv)} (in {cwd}) exited {result.returncode}: {detail}")
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
