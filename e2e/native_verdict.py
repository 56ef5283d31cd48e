"""tasgate's side of the native proof table (e2e/native_table.py): ``tasgate check -o json`` on a
row's manifest, read as one verdict and the pods per domain it predicts.

A row's manifest holds up to three judged documents (Job, Workload, PodGroup). They need not
agree, and the row's verdict is what the user meets:

- a **denial** of any of them stops the group (a denied Workload also keeps its PodGroups out:
  the API server's PodGroupWorkloadExists admission refuses a PodGroup whose Workload is missing);
- otherwise the **PodGroup**'s verdict, the object the kube-scheduler reads (its own policy and
  ``schedulingConstraints``), else the Job's (the Job controller makes the PodGroup), else the
  Workload's. A Workload whose template key never fits but whose PodGroup has none is admitted
  with a warning, and the PodGroup's verdict is the one compared.

A v1.37 CompositePodGroup row holds the composite and several PodGroups (each placing its own
pods): the scheduler places them together, so they are read together: ``waits`` if any of them
(the CompositePodGroup included) waits, else ``admitted``, and the pods per domain summed over
the PodGroups.
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from e2e.serving import TASGATE

GROUP_KINDS = ("Job", "Workload", "PodGroup", "CompositePodGroup")
JUDGED = ("admitted", "waits", "denied")
# whose verdict the scheduler's fate follows
READ_FIRST = ("PodGroup", "CompositePodGroup", "Job", "Workload")


@dataclass(frozen=True)
class Verdict:
    """What ``tasgate check -o json`` said about a row's manifest."""

    outcome: str
    detail: str
    now: dict[str, int] | None = None  # pods per domain of the row's key, as tasgate placed them now
    when_empty: dict[str, int] | None = None
    others: str = ""  # the other judged documents' outcomes, for the table


def start_check(manifest: Path, state: Path) -> subprocess.Popen[str]:
    """``tasgate check -o json`` on ``manifest`` against the dump, in the background: it reads only
    the files, so it runs while the row is submitted and watched."""
    argv = [str(TASGATE), "check", "-f", str(manifest), "--state", str(state), "-o", "json"]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish_check(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=120)
    if proc.returncode not in (0, 1):
        raise AssertionError(f"tasgate check ({proc.args!r}) exited {proc.returncode}:\n{err[-3000:]}")
    return dict(json.loads(out))


def verdict(report: Mapping[str, Any], key: str | None, hosts: Mapping[str, Mapping[str, str]]) -> Verdict:
    """The row's verdict (see the module docstring). Pods of a hand-written group are not judged
    on their own."""
    results = [r for r in report.get("results") or () if r.get("kind") in GROUP_KINDS]
    judged = [r for r in results if r.get("outcome") in JUDGED]
    if not judged:
        first = results[0] if results else {"outcome": "no result", "reason": ""}
        return Verdict(str(first.get("outcome")), str(first.get("reason") or first.get("message") or ""))
    denied = [r for r in judged if r.get("outcome") == "denied"]
    order = sorted(judged, key=lambda r: READ_FIRST.index(str(r.get("kind"))))
    chosen = (denied or order)[0]
    groups = [r for r in judged if r.get("kind") == "PodGroup"]
    if not denied and len(groups) > 1:
        return together(groups, [r for r in judged if r.get("kind") == "CompositePodGroup"], key, hosts)
    others = ", ".join(f"{r['kind']} {r['outcome']}" for r in judged if r is not chosen)
    podsets = chosen.get("podSets") or []
    return Verdict(
        str(chosen["outcome"]),
        f"{chosen.get('kind')}: {said(chosen)}",
        placement(podsets, "now", key, hosts),
        placement(podsets, "whenEmpty", key, hosts),
        others,
    )


def said(result: Mapping[str, Any]) -> str:
    return str(result.get("message") or result.get("reason") or "")


def together(
    groups: Sequence[Mapping[str, Any]],
    composites: Sequence[Mapping[str, Any]],
    key: str | None,
    hosts: Mapping[str, Mapping[str, str]],
) -> Verdict:
    """A composite row's PodGroups (none denied) read as one group (see the module docstring)."""
    waiting = [r for r in (*groups, *composites) if r.get("outcome") == "waits"]
    podsets = [podset for r in groups for podset in r.get("podSets") or ()]
    detail = "; ".join(
        f"{r.get('kind')} {r.get('name')}: {r.get('outcome')} {said(r)}".rstrip() for r in waiting
    )
    return Verdict(
        "waits" if waiting else "admitted",
        detail or f"{len(groups)} PodGroups admitted",
        placement(podsets, "now", key, hosts),
        placement(podsets, "whenEmpty", key, hosts),
        ", ".join(f"{r.get('kind')} {r.get('name')} {r.get('outcome')}" for r in (*composites, *groups)),
    )


def placement(
    podsets: Sequence[Mapping[str, Any]], which: str, key: str | None, hosts: Mapping[str, Mapping[str, str]]
) -> dict[str, int] | None:
    """Pods per domain of ``key`` (``*`` for a keyless row) in tasgate's ``which`` assignment."""
    total: Counter[str] = Counter()
    for podset in podsets:
        mode = podset.get(which) or {}
        levels = list(mode.get("assignmentLevels") or ())
        assignment = mode.get("assignment")
        if not assignment:
            continue
        for domain in assignment:
            total[domain_of(domain.get("values") or [], levels, key, hosts)] += int(domain.get("count", 0))
    return dict(total) if total else None


def domain_of(
    values: Sequence[str], levels: Sequence[str], key: str | None, hosts: Mapping[str, Mapping[str, str]]
) -> str:
    """The value of ``key`` for one assignment entry: read directly, or through the labels of the
    nodes it names (a host, or a finer domain all of whose nodes share one value of ``key``: a
    composite row's block from its children's racks)."""
    if key is None:
        return "*"
    if key in levels and levels.index(key) < len(values):
        return str(values[levels.index(key)])
    named = dict(zip(levels, values, strict=False))
    found = {
        labels.get(key, "?")
        for labels in hosts.values()
        if named and all(labels.get(level) == value for level, value in named.items())
    }
    return str(found.pop()) if len(found) == 1 else "?"
