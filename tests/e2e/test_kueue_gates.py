"""The placement gates' v0.19.2 defaults tasgate is proven against (`state.kueue_proven`) are
Kueue's own: read from the source of the module the e2e suite builds Kueue from (fetched with
``go mod download`` when absent; no Go or no module is a failure, never a skip)."""

from __future__ import annotations

import re

import pytest

from e2e.kueue_source import module_source_dir, pinned_kueue_version
from webhook.state.kueue_proven import PLACEMENT_GATES, PROVEN_RELEASE

pytestmark = pytest.mark.e2e


def test_the_gate_defaults_are_kueues_own() -> None:
    """Each gate's last versioned entry (the default at Kubernetes' emulation version) in Kueue's source."""
    assert pinned_kueue_version() == PROVEN_RELEASE
    source = (module_source_dir() / "pkg/features/kube_features.go").read_text()
    for name, gate in PLACEMENT_GATES.items():
        block = re.search(rf"\n\t{name}: \{{(.*?)\n\t\}},", source, re.S)
        assert block is not None, name
        last = re.findall(r"Default: (true|false), PreRelease: featuregate\.(\w+)", block.group(1))[-1]
        assert last == (str(gate.default).lower(), gate.stage), name
