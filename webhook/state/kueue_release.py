"""Which Kueue runs on the cluster, and with which feature gates: the release tasgate judges for.

Kueue's TAS answers differ between releases and gates (docs/design.md, "Kueue compatibility"),
so a verdict says when the cluster's Kueue is not the one tasgate is proven against
(`state.kueue_proven`, `decide.kueue.release`). The release is read from Kueue's own controller
Deployment and Configuration ConfigMap (`state.kueue_manager` reads them), in live mode and
from dumps alike. What cannot be read is "unknown", never a guess: a verdict then carries no
warning, and whatever reports the release says ``unknown``. The placement gates verdicts follow
(``placement``) are resolved once, here, as Kueue resolves them (`state.kueue_gates`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from webhook.state.kueue_gates import DEFAULTS, PlacementGates, judged_gates
from webhook.state.kueue_manager import VERSION_LABEL, ConfigGates, Controller

_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)((?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?)$")


@dataclass(frozen=True, slots=True)
class KueueRelease:
    """The Kueue release and feature gates the cluster runs, and where each was read."""

    version: str | None = None  # "v0.19.2"; None: not readable (no Deployment, a tag like "main")
    # Gates set explicitly, by the flag or the Configuration; {} for Kueue's defaults; None: unknown.
    gates: Mapping[str, bool] | None = None
    read_from: str = ""  # where the version was read ("" when nothing was)
    gates_from: str = ""  # where the gates were read ("" when none are set, or unknown)
    note: str = ""  # why the version or the gates are unknown
    # Derived from version and gates: the gates verdicts follow, and why Kueue refuses to start.
    placement: PlacementGates = field(default=DEFAULTS, init=False, compare=False)
    refused: tuple[str, ...] = field(default=(), init=False, compare=False)

    def __post_init__(self) -> None:
        placement, refused = judged_gates(self.version, self.gates)
        object.__setattr__(self, "placement", placement)
        object.__setattr__(self, "refused", refused)

    def describe(self) -> str:
        """``v0.19.2``, or ``unknown`` (with why, when known): as reports name the release."""
        if self.version is not None:
            return self.version
        return f"unknown ({self.note})" if self.note else "unknown"

    def as_json(self) -> dict[str, Any]:
        """The release as JSON reports carry it (``version`` null when unknown)."""
        return {
            "version": self.version,
            "gates": None if self.gates is None else dict(sorted(self.gates.items())),
            "readFrom": self.read_from,
            "gatesFrom": self.gates_from,
            "note": self.note,
            "refused": list(self.refused),
        }


UNKNOWN = KueueRelease()


def version_tuple(version: str) -> tuple[int, int, int] | None:
    """(major, minor, patch) of a plain release (``v0.19.2``); None for a pre-release or build."""
    found = _VERSION.match(version)
    if found is None or found.group(4):
        return None
    return int(found.group(1)), int(found.group(2)), int(found.group(3))


def release_version(tag: str) -> str | None:
    """A release tag as Kueue names its releases (``v0.19.2``, ``v0.20.0-rc.1``); None otherwise."""
    found = _VERSION.match(tag)
    return f"v{tag.removeprefix('v')}" if found else None


def release_of(
    controllers: Sequence[Controller], configs: Mapping[tuple[str, str], ConfigGates]
) -> KueueRelease:
    """The release of the cluster's Kueue controller, its gates as Kueue itself resolves them.

    Kueue v0.19.2 (``cmd/kueue/main.go``, ``config.LoadAndValidateFeatureGates``) applies the
    ``--feature-gates`` flag when it is set, else the Configuration's ``featureGates``; with both
    set it refuses to start ("conflicting feature gates detected"), so the gates of whatever Kueue
    still runs are unknown. Several controllers: the first by namespace and name.
    """
    if not controllers:
        return UNKNOWN
    found = min(controllers, key=lambda c: (c.namespace, c.name))
    source, tag = _version_source(found)
    version = release_version(tag) if tag else None
    read_from = f"{source} {tag} of Deployment {found.qualified_name}" if tag else ""
    gates, gates_from, note = _gates(found, configs)
    if version is None:
        named = f"Deployment {found.qualified_name}"
        note = f"{read_from} names no Kueue release" if tag else f"{named} has no image tag"
    return KueueRelease(version, gates, read_from, gates_from, note)


def _version_source(found: Controller) -> tuple[str, str]:
    """(where, tag) the version is read from: the manager's image tag; for an image pinned by
    digest alone, the Helm chart's version label (a tag such as ``main`` is never overruled by
    the label: the chart's version says nothing of an image built from a branch)."""
    if found.image_tag:
        return "image tag", found.image_tag
    return (f"label {VERSION_LABEL}", found.version_label) if found.version_label else ("", "")


def _gates(
    found: Controller, configs: Mapping[tuple[str, str], ConfigGates]
) -> tuple[Mapping[str, bool] | None, str, str]:
    """(gates, where read, why unknown) of one controller."""
    flag_from = f"--feature-gates of Deployment {found.qualified_name}"
    if found.config_file is None:  # no --config: Kueue's default Configuration, no featureGates
        return (found.flag_gates, flag_from, "") if found.flag_gates is not None else ({}, "", "")
    if found.config_map is None:
        return None, "", f"its --config file {found.config_file} is in no ConfigMap volume"
    config = configs.get((found.namespace, found.config_map[0]))
    where = f"ConfigMap {found.namespace}/{found.config_map[0]}"
    if config is None or config.key != found.config_map[1]:
        return None, "", f"its Configuration ({where}, key {found.config_map[1]}) was not read"
    if found.flag_gates is not None and config.gates is not None:
        return None, "", f"Kueue refuses to start with both --feature-gates and featureGates in {where}"
    if found.flag_gates is not None:
        return found.flag_gates, flag_from, ""
    if config.gates is not None:
        return config.gates, f"featureGates of {where}", ""
    return {}, "", ""
