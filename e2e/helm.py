"""The Helm client the chart tests run (built by ``e2e/build-binaries.sh helm``), and the comparison of
what ``charts/tasgate`` renders with what ``kubectl kustomize`` renders of the manifests.

Helm is compiled from the module pinned in ``e2e/tools/helm/go.mod`` into
``${TASGATE_CACHE:-~/.cache/tasgate}/bin/helm-<version>/``, like the control plane's binaries; a missing
build raises ``BinariesMissingError`` (the tests fail, never skip). Each :class:`Helm` has its own
config, cache and data directories, so no ``~/.config/helm`` or repository index is read or written.
"""

from __future__ import annotations

import base64
import copy
import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from e2e.binaries import (
    BUILD_SCRIPT,
    TOOLS_DIR,
    VERSIONS_MARKER,
    BinariesMissingError,
    cache_bin_root,
    display_path,
    required_version,
)

ROOT = TOOLS_DIR.parents[1]
CHART = ROOT / "charts" / "tasgate"
HELM_MODULE = "helm.sh/helm/v3"
HELM_BIN_ENV = "TASGATE_HELM"  # a helm executable to use instead of the cache's
RELEASE = "tasgate"
NAMESPACE = "tasgate-system"
# Labels Helm charts carry by convention and kustomize has no counterpart for: release bookkeeping.
HELM_LABELS = frozenset(
    {
        "helm.sh/chart",
        "app.kubernetes.io/managed-by",
        "app.kubernetes.io/instance",
        "app.kubernetes.io/version",
    }
)


def pinned_helm_version() -> str:
    return required_version(TOOLS_DIR / "helm" / "go.mod", HELM_MODULE)


def helm_cache_dir() -> Path:
    return cache_bin_root() / f"helm-{pinned_helm_version()}"


def find_helm() -> Path:
    """``$TASGATE_HELM`` if set, else the cache's helm with build-binaries.sh's VERSIONS marker."""
    override = os.environ.get(HELM_BIN_ENV)
    binary = Path(override).expanduser() if override else helm_cache_dir() / "helm"
    missing = not os.access(binary, os.X_OK) or (
        not override and not (binary.parent / VERSIONS_MARKER).is_file()
    )
    if missing:
        raise BinariesMissingError(
            f"helm {pinned_helm_version()} missing from {binary.parent} (or its {VERSIONS_MARKER} marker): "
            f"build it with `bash {display_path(BUILD_SCRIPT)} helm` (about 4 min cold on 2 cores), "
            f"or set {HELM_BIN_ENV} to a helm executable."
        )
    return binary


class HelmError(RuntimeError):
    """A helm command failed; the message has its argv, stdout and stderr."""


class Helm:
    """helm with private config/cache/data directories under ``home`` and an optional kubeconfig."""

    def __init__(self, home: Path, kubeconfig: Path | None = None, binary: Path | None = None) -> None:
        self.binary = binary or find_helm()
        self.home = home
        self.kubeconfig = kubeconfig

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("HELM_") and k != "KUBECONFIG"}
        for name in ("config", "cache", "data"):
            env[f"HELM_{name.upper()}_HOME"] = str(self.home / name)
        if self.kubeconfig is not None:
            env["KUBECONFIG"] = str(self.kubeconfig)
        env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
        return env

    def run(self, *args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        argv = [str(self.binary), *args]
        done = subprocess.run(
            argv, env=self.env(), capture_output=True, text=True, timeout=timeout, check=False, cwd=ROOT
        )
        if check and done.returncode != 0:
            raise HelmError(f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
        return done

    def template(self, *flags: str, namespace: str = NAMESPACE) -> list[dict[str, Any]]:
        """``helm template`` of the chart with ``flags`` (--set, --set-file, -f), parsed."""
        out = self.run("template", RELEASE, str(CHART), "--namespace", namespace, *flags).stdout
        return [d for d in yaml.safe_load_all(out) if d]


def value_flags(values: Mapping[str, str], files: Mapping[str, Path] | None = None) -> list[str]:
    """--set KEY=VALUE (each on its own, so no value is split at a comma) and --set-file KEY=PATH."""
    flags = [f"--set={key}={value}" for key, value in values.items()]
    flags += [f"--set-file={key}={path}" for key, path in (files or {}).items()]
    return flags


# --- comparison with kustomize ---------------------------------------------------------------------


def key(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    meta = obj["metadata"]
    return (obj["kind"], meta.get("namespace", ""), meta["name"])


def normalized(obj: Mapping[str, Any], *, chart: bool) -> dict[str, Any]:
    """``obj`` without what differs by construction: Helm's bookkeeping labels on the chart's side;
    empty ``labels``/``annotations`` maps dropped on both; matchCondition expressions with their
    whitespace collapsed (CEL ignores it, and kustomize re-emits a folded scalar's more-indented
    lines with an extra line break, so its own output differs from its input file there); a
    Secret's data decoded (kustomize wraps base64 at 76 columns)."""
    out = copy.deepcopy(dict(obj))
    meta = out["metadata"]
    if out["kind"] == "Secret":
        out["data"] = {k: base64.b64decode(v) for k, v in (out.get("data") or {}).items()}
    for hook in out.get("webhooks") or []:
        for condition in hook.get("matchConditions") or []:
            condition["expression"] = " ".join(condition["expression"].split())
    if chart:
        meta["labels"] = {k: v for k, v in (meta.get("labels") or {}).items() if k not in HELM_LABELS}
    for field in ("labels", "annotations"):
        if not meta.get(field):
            meta.pop(field, None)
    return out


def differences(
    chart: Sequence[Mapping[str, Any]],
    kustomize: Sequence[Mapping[str, Any]],
    *,
    kustomize_only: Sequence[tuple[str, str, str]] = (),
    unlabelled: Sequence[tuple[str, str, str]] = (),
) -> list[str]:
    """One line per object that is in one rendering only or differs between them ('' lines: none).

    ``kustomize_only``: objects only the kustomize build has, by (kind, namespace, name): they must
    be there and are not compared. ``unlabelled``: objects the kustomize files leave without labels,
    which the chart labels ``app.kubernetes.io/name: tasgate`` like every other object of it.
    """
    mine = {key(o): normalized(o, chart=True) for o in chart}
    theirs = {key(o): normalized(o, chart=False) for o in kustomize}
    problems = [f"kustomize renders no {k} (expected only there)" for k in kustomize_only if k not in theirs]
    for k in kustomize_only:
        theirs.pop(k, None)
    for k in unlabelled:
        if k in mine and k in theirs and "labels" not in theirs[k]["metadata"]:
            theirs[k]["metadata"]["labels"] = {"app.kubernetes.io/name": "tasgate"}
    problems += [f"only the chart renders {k}" for k in sorted(mine.keys() - theirs.keys())]
    problems += [f"only kustomize renders {k}" for k in sorted(theirs.keys() - mine.keys())]
    for k in sorted(mine.keys() & theirs.keys()):
        if mine[k] != theirs[k]:
            problems.append(f"{k} differs:\n{diff(theirs[k], mine[k])}")
    return problems


def diff(kustomize: Any, chart: Any, path: str = "") -> str:
    """The paths where two parsed objects differ, with both values (kustomize first)."""
    if isinstance(kustomize, dict) and isinstance(chart, dict):
        return "".join(
            diff(kustomize.get(k), chart.get(k), f"{path}.{k}") for k in sorted({*kustomize, *chart})
        )
    if isinstance(kustomize, list) and isinstance(chart, list) and len(kustomize) == len(chart):
        return "".join(
            diff(a, b, f"{path}[{i}]") for i, (a, b) in enumerate(zip(kustomize, chart, strict=True))
        )
    if kustomize == chart:
        return ""
    return f"  {path or '.'}: kustomize {kustomize!r}\n  {' ' * len(path or '.')}  chart     {chart!r}\n"
