"""`tasgate version`: the client, its build, and what it was proven against, as ``kubectl version``.

The Kueue, Kubernetes and scheduler-plugins versions are not typed here: they are read from the
one place that pins them, the wrapper modules the end-to-end suites build their binaries from
(``e2e/tools/*/go.mod``, the lines ``e2e/build-binaries.sh`` reads), so a bump of a pin is a bump
of what this command says. An installed wheel carries no ``e2e/``: it says so, rather than a
version nobody proved.

With ``--live``, ``--kubeconfig`` or ``--context`` (kubectl's ``serverVersion``) it also says which
Kueue the cluster runs and with which feature gates, read from the very objects live mode reads
for them (Kueue's controller Deployment and Configuration ConfigMap, `state.kueue_release`), and
the one line each verdict would carry when they differ from what tasgate is proven against
(`decide.kueue.release`), so an operator sees before any review which gates tasgate follows.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import re
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import orjson
import yaml

from scorer import IMPLEMENTATION
from webhook.cli.options import add_kubeconfig_arguments, live_kubeconfig
from webhook.cli.sources import list_kinds
from webhook.decide.kueue.release import flipped, release_warning
from webhook.live.kinds import CONFIG_MAPS, DEPLOYMENTS, kinds
from webhook.state.cluster import build_state
from webhook.state.kueue_release import KueueRelease

TOOLS = Path(__file__).resolve().parents[2] / "e2e" / "tools"
# what was proven -> (the wrapper module's directory under e2e/tools, the Go module it requires)
PINS = {
    "kueue": ("kueue", "sigs.k8s.io/kueue"),
    "kubernetes": ("kube", "k8s.io/kubernetes"),
    "schedulerPlugins": ("scheduler", "sigs.k8s.io/scheduler-plugins"),
}
NAMES = {"kueue": "Kueue", "kubernetes": "Kubernetes", "schedulerPlugins": "scheduler-plugins (Coscheduling)"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-o", "--output", choices=("text", "json", "yaml"), default="text", help="output format"
    )
    parser.add_argument(
        "--live", action="store_true",
        help="also say the Kueue release and feature gates of a cluster (--kubeconfig, else "
        "$KUBECONFIG, else ~/.kube/config); implied by --kubeconfig and --context",
    )  # fmt: skip
    add_kubeconfig_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    info = version_info()
    kubeconfig = live_kubeconfig(args)
    if kubeconfig:  # an API server that cannot be read is a LoadError: one line, exit 2
        info["cluster"] = cluster_info(asyncio.run(read_release(kubeconfig, args.context)))
    if args.output == "json":
        sys.stdout.write(orjson.dumps(info, option=orjson.OPT_INDENT_2).decode() + "\n")
    elif args.output == "yaml":
        sys.stdout.write(yaml.safe_dump(info, sort_keys=False))
    else:
        print(text(info))
    return 0


def version_info(tools: Path = TOOLS) -> dict[str, Any]:
    """kubectl's ``clientVersion`` shape, and ``provenAgainst`` from the go.mod pins."""
    proven: dict[str, Any] = {name: pinned(tools, *where) for name, where in PINS.items()}
    found = any(proven.values())
    proven["source"] = "e2e/tools/*/go.mod" if found else "unknown: not a source checkout (no e2e/tools)"
    return {
        "clientVersion": {
            "version": client_version(),
            "python": platform.python_version(),
            "platform": f"{sys.platform}/{platform.machine()}",
            "scorer": IMPLEMENTATION,  # compiled, or its pure-Python twin when the build is missing
        },
        "provenAgainst": proven,
    }


async def read_release(kubeconfig: str, context: str | None) -> KueueRelease:
    """The cluster's Kueue release and gates, from one list of each kind live mode reads them from
    (a kind the API server refuses or does not serve leaves the release unknown, as there)."""
    wanted = [kind for kind in kinds() if kind.name in (DEPLOYMENTS, CONFIG_MAPS)]
    found, _ = await list_kinds(kubeconfig, context, wanted)
    return build_state([obj for items in found.values() for obj in items]).kueue_release


def cluster_info(release: KueueRelease) -> dict[str, Any]:
    """kubectl's ``serverVersion`` for Kueue: what is read, the gates that differ, and the line."""
    gates = flipped(release.gates or {})
    return {
        "kueue": release.version,
        **{k: v for k, v in release.as_json().items() if k != "version"},
        "placementGates": dict(gates),  # as Kueue resolves them (AllAlpha, AllBeta), off default
        "differs": release_warning(release),
    }


def text(info: dict[str, Any]) -> str:
    client, proven = info["clientVersion"], info["provenAgainst"]
    pins = [f"{NAMES[name]} {proven[name]}" for name in PINS if proven[name]]
    lines = [
        f"Client Version: {client['version']}",
        f"Build: Python {client['python']} on {client['platform']}, scorer {client['scorer']}",
        f"Proven against: {', '.join(pins) if pins else '-'} ({proven['source']})",
    ]
    cluster = info.get("cluster")
    return "\n".join(lines if cluster is None else [*lines, *cluster_text(cluster)])


def cluster_text(cluster: dict[str, Any]) -> list[str]:
    """The cluster's Kueue in three lines: release, gates (where each was read), difference."""
    where = f" ({cluster['readFrom']})" if cluster["readFrom"] else ""
    kueue = f"{cluster['kueue']}{where}" if cluster["kueue"] else f"unknown ({cluster['note'] or 'not read'})"
    gates = cluster["gates"]
    if gates is None:
        said = f"unknown ({cluster['note']})" if cluster["note"] else "unknown"
    elif gates:
        said = ", ".join(f"{k}={str(v).lower()}" for k, v in gates.items()) + f" ({cluster['gatesFrom']})"
    else:
        said = "Kueue's defaults"
    return [
        f"Cluster Kueue: {kueue}",
        f"Cluster feature gates: {said}",
        f"Differs: {cluster['differs'] or '-'}",
    ]


def client_version() -> str:
    try:
        return metadata.version("tasgate")
    except metadata.PackageNotFoundError:
        return "unknown"


def pinned(tools: Path, directory: str, module: str) -> str | None:
    """The version ``tools/directory/go.mod`` requires ``module`` at; None when it is not there."""
    try:
        text = (tools / directory / "go.mod").read_text()
    except OSError:
        return None
    found = re.search(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", text, re.MULTILINE)
    return found.group(1) if found else None
