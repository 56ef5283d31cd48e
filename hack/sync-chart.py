#!/usr/bin/env python3
"""Copy the files the Helm chart shares with the kustomize manifests into charts/tasgate/files/.

Helm reads only files inside the chart, so the policy, the PrometheusRule and the Grafana dashboard
live twice; the manifests are the one source and this script makes the copies. tests/webhook/
test_chart.py fails when a copy differs and names this command. ``--check`` only compares.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILES = ROOT / "charts" / "tasgate" / "files"
# chart copy (relative to charts/tasgate/files) -> its source (relative to the repository)
COPIES = {
    "policy.yaml": "manifests/base/policy.yaml",
    "prometheusrule.yaml": "manifests/overlays/monitoring/prometheusrule.yaml",
    "dashboards/tasgate.json": "manifests/overlays/monitoring/dashboards/tasgate.json",
    "datadog/dashboard.json": "manifests/monitoring/datadog/dashboard.json",
    "datadog/monitors.json": "manifests/monitoring/datadog/monitors.json",
}


def stale() -> list[str]:
    """The copies whose bytes differ from their source (or are missing)."""
    out = []
    for copy, source in COPIES.items():
        target = FILES / copy
        if not target.is_file() or target.read_bytes() != (ROOT / source).read_bytes():
            out.append(copy)
    return out


def main(argv: list[str]) -> int:
    if argv not in ([], ["--check"]):
        print("usage: hack/sync-chart.py [--check]", file=sys.stderr)
        return 2
    differing = stale()
    if argv == ["--check"]:
        for copy in differing:
            print(f"charts/tasgate/files/{copy} differs from {COPIES[copy]}", file=sys.stderr)
        return 1 if differing else 0
    for copy in differing:
        target = FILES / copy
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((ROOT / COPIES[copy]).read_bytes())
        print(f"charts/tasgate/files/{copy} <- {COPIES[copy]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
