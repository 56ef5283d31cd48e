"""Where the e2e harness finds kube-apiserver, kubectl and etcd: the cache build-binaries.sh fills.

The binaries are built from pinned Go modules by ``e2e/build-binaries.sh`` into a cache outside the
repository; this module derives the same cache directory from the same ``go.mod`` files, so a bump
of the pinned versions makes the harness demand a rebuild instead of silently running old binaries.
When they are missing it raises ``BinariesMissingError`` saying how to build them.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

E2E_DIR = Path(__file__).resolve().parent
TOOLS_DIR = E2E_DIR / "tools"
BUILD_SCRIPT = E2E_DIR / "build-binaries.sh"
BINARY_NAMES = ("kube-apiserver", "kubectl", "etcd")
VERSIONS_MARKER = "VERSIONS"  # written last by build-binaries.sh: present means all three were built


class ControlPlaneError(RuntimeError):
    """The control plane could not be started, did not become ready, or died."""


class BinariesMissingError(ControlPlaneError):
    """kube-apiserver, kubectl or etcd is not built for the pinned versions (run e2e/build-binaries.sh)."""


def pinned_versions() -> tuple[str, str]:
    """``(kubernetes, etcd)`` module versions as pinned in the wrapper ``go.mod`` files.

    Read from the same files build-binaries.sh reads, so the two always agree on the cache directory.
    """
    return (
        required_version(TOOLS_DIR / "kube" / "go.mod", "k8s.io/kubernetes"),
        required_version(TOOLS_DIR / "etcd" / "go.mod", "go.etcd.io/etcd/server/v3"),
    )


def required_version(go_mod: Path, module: str) -> str:
    """The version ``go_mod`` requires ``module`` at (the line build-binaries.sh's sed reads)."""
    try:
        text = go_mod.read_text()
    except OSError as exc:
        raise ControlPlaneError(f"cannot read {go_mod}: {exc.strerror or exc}") from exc
    found = re.search(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", text, re.MULTILINE)
    if found is None:
        raise ControlPlaneError(f"{module} is not required in {go_mod}")
    return found.group(1)


def cache_bin_root() -> Path:
    """``${TASGATE_CACHE:-~/.cache/tasgate}/bin``: build-binaries.sh's output dirs live under it."""
    root = os.environ.get("TASGATE_CACHE") or str(Path.home() / ".cache" / "tasgate")
    return Path(root) / "bin"


def cache_dir() -> Path:
    """Where build-binaries.sh puts the binaries for the pinned versions (``$TASGATE_CACHE`` aware)."""
    kube, etcd = pinned_versions()
    return cache_bin_root() / f"kube-{kube}_etcd-{etcd}"


@dataclass(frozen=True)
class Binaries:
    """Absolute paths of the three executables the harness runs."""

    directory: Path
    kube_apiserver: Path
    kubectl: Path
    etcd: Path


def find_binaries() -> Binaries:
    """The binaries from ``$TASGATE_E2E_BIN`` if set, else from the build cache; never a silent skip.

    ``$TASGATE_E2E_BIN`` is trusted as is (someone pointed at binaries on purpose); the cache must also
    hold build-binaries.sh's marker, which it writes only after all three binaries linked.
    """
    override = os.environ.get("TASGATE_E2E_BIN")
    directory = Path(override).expanduser() if override else cache_dir()
    missing = [name for name in BINARY_NAMES if not os.access(directory / name, os.X_OK)]
    if not override and not missing and not (directory / VERSIONS_MARKER).is_file():
        missing.append(f"{VERSIONS_MARKER} (build-binaries.sh did not finish)")
    if missing:
        source = "TASGATE_E2E_BIN" if override else "the build cache for the pinned versions"
        raise BinariesMissingError(
            f"end-to-end binaries missing from {directory} ({source}): {', '.join(missing)}. "
            f"Build them with `bash {display_path(BUILD_SCRIPT)}` (cold build: tens of minutes on 2 cores; "
            "cached afterwards), or set TASGATE_E2E_BIN to a directory holding kube-apiserver, kubectl "
            "and etcd."
        )
    return Binaries(directory, directory / "kube-apiserver", directory / "kubectl", directory / "etcd")


def display_path(path: Path) -> str:
    with contextlib.suppress(ValueError):
        return str(path.relative_to(Path.cwd()))
    return str(path)
