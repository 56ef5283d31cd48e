"""`tasgate version`: the client, its build, and what it was proven against, as ``kubectl version``.

The Kueue, Kubernetes and scheduler-plugins versions are not typed here: they are read from the
one place that pins them, the wrapper modules the end-to-end suites build their binaries from
(``e2e/tools/*/go.mod``, the lines ``e2e/build-binaries.sh`` reads), so a bump of a pin is a bump
of what this command says. An installed wheel carries no ``e2e/``: it says so, rather than a
version nobody proved.
"""

from __future__ import annotations

import argparse
import platform
import re
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import orjson
import yaml

from scorer import IMPLEMENTATION

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
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    info = version_info()
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


def text(info: dict[str, Any]) -> str:
    client, proven = info["clientVersion"], info["provenAgainst"]
    pins = [f"{NAMES[name]} {proven[name]}" for name in PINS if proven[name]]
    return "\n".join(
        [
            f"Client Version: {client['version']}",
            f"Build: Python {client['python']} on {client['platform']}, scorer {client['scorer']}",
            f"Proven against: {', '.join(pins) if pins else '-'} ({proven['source']})",
        ]
    )


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
