"""Kueue's own Go code as a peer: the same cluster and PodSets tasgate's scorer is given, as JSON.

``bench/kueue_peer/build.sh`` builds a small Go program that feeds one JSON document to Kueue
v0.19.2's TAS cache (``SyncNode`` per Node, ``Update`` per bound pod), its snapshot build and
``FindTopologyAssignmentsForFlavor``, and prints the assignments and timings. This module writes
that document from tasgate's own inputs (`scorer.model.Node`, `scorer.model.PodSetRequest`:
exactly what `scorer.Cluster.build` and ``View.place`` are given), runs the program, and puts
both answers in one comparable form, so the benchmark (bench/bench_peer.py) and the
differential test (tests/e2e/test_kueue_peer.py) share one translation and cannot drift apart.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scorer.model import Mode, Node, Placement, PodSetRequest, SelectorTerm, Toleration, TopologyRequest

PEER_DIR = Path(__file__).resolve().with_name("kueue_peer")
PODS = "pods"


def kueue_version() -> str:
    """The sigs.k8s.io/kueue version bench/kueue_peer/go.mod requires (what build.sh builds)."""
    text = (PEER_DIR / "go.mod").read_text()
    found = re.search(r"^\s*(?:require\s+)?sigs\.k8s\.io/kueue\s+(v\S+)", text, re.MULTILINE)
    if found is None:
        raise RuntimeError(f"sigs.k8s.io/kueue is not required in {PEER_DIR / 'go.mod'}")
    return found.group(1)


def peer_binary() -> Path:
    """Where build.sh puts the peer; a loud error (never a skip) when it is not built."""
    root = Path(os.environ.get("TASGATE_CACHE", Path.home() / ".cache" / "tasgate"))
    binary = root / "bin" / f"kueue-peer-{kueue_version()}" / "kueue-peer"
    if not os.access(binary, os.X_OK):
        raise FileNotFoundError(f"{binary} is not built: run bash bench/kueue_peer/build.sh")
    return binary


# ---- tasgate's input as the peer's JSON ------------------------------------------------------


def _toleration(t: Toleration) -> dict[str, str]:
    out = {"key": t.key, "operator": t.operator, "value": t.value, "effect": t.effect}
    return {k: v for k, v in out.items() if v}


def _pods_of(node: Node, usage: Mapping[str, int]) -> tuple[list[dict[str, Any]], dict[str, int] | None]:
    """A node's usage as bound pods, the way Kueue's informers would see them.

    Kueue's non-TAS pod cache adds each pod's requests and one ``pods``. Usage of ``pods: p`` is
    one pod holding every other resource and ``p - 1`` empty ones. Usage that no set of pods
    could produce (resources used by fewer than one pod, or a negative amount) is returned as
    is, for the peer to put straight into the per-node totals that cache keeps.
    """
    used = {r: v for r, v in usage.items() if v}
    pods = used.pop(PODS, 0)
    if not used and not pods:
        return [], None
    if pods < 1 or any(v < 0 for v in used.values()):
        return [], {**used, PODS: pods}
    out: list[dict[str, Any]] = [{"node": node.name, "requests": used, "count": 1}]
    if pods > 1:
        out.append({"node": node.name, "count": pods - 1})
    return out, None


def cluster_document(
    levels: Sequence[str],
    nodes: Sequence[Node],
    topology_name: str = "default",
    flavor_node_labels: Mapping[str, str] | None = None,
    flavor_tolerations: Sequence[Toleration] = (),
    usage: Mapping[str, Mapping[str, int]] | None = None,
) -> dict[str, Any]:
    """The arguments of `scorer.Cluster.build` as the peer's ``cluster``: every node, ready or
    not (Kueue's node cache drops NotReady and cordoned ones itself), and its usage as pods."""
    out_nodes, pods = [], []
    for node in nodes:
        entry: dict[str, Any] = {
            "name": node.name,
            "labels": dict(node.labels),
            "allocatable": dict(node.allocatable),
            "ready": node.ready,
            "unschedulable": node.unschedulable,
        }
        if node.taints:
            entry["taints"] = [{"key": t.key, "value": t.value, "effect": t.effect} for t in node.taints]
        node_pods, direct = _pods_of(node, node.usage if usage is None else usage.get(node.name, {}))
        if direct is not None:
            entry["usage"] = direct
        pods.extend(node_pods)
        out_nodes.append(entry)
    return {
        "topologyName": topology_name,
        "levels": list(levels),
        "flavorNodeLabels": dict(flavor_node_labels or {}),
        "flavorTolerations": [_toleration(t) for t in flavor_tolerations],
        "nodes": out_nodes,
        "pods": pods,
    }


def _topology_request(t: TopologyRequest) -> tuple[dict[str, Any] | None, bool]:
    """Kueue's PodSetTopologyRequest for tasgate's parsed annotations, and ``Implied``.

    Kueue implies TAS (``Implied``, lowest level, unconstrained) only when a PodSet names no TAS
    field at all; a group name alone does not count (workload.IsExplicitlyRequestingTAS).
    """
    req: dict[str, Any] = {}
    if t.mode is Mode.REQUIRED:
        req["required"] = t.level
    elif t.mode is Mode.PREFERRED:
        req["preferred"] = t.level
    elif t.mode is Mode.UNCONSTRAINED:
        req["unconstrained"] = True
    if t.slice_layers:
        req["podsetSliceRequiredTopologyConstraints"] = [
            {"topology": layer.level, "size": layer.size} for layer in t.slice_layers
        ]
    elif t.slice_level is not None:
        req["podSetSliceRequiredTopology"] = t.slice_level
        if t.slice_size is not None:
            req["podSetSliceSize"] = t.slice_size
    implied = t.mode is Mode.IMPLIED and not req
    if t.group is not None:
        req["podSetGroupName"] = t.group
    return (req or None), implied


def _affinity(terms: Sequence[SelectorTerm]) -> dict[str, Any]:
    def reqs(rs: Iterable[Any]) -> list[dict[str, Any]]:
        return [{"key": r.key, "operator": r.operator, "values": list(r.values)} for r in rs]

    return {
        "nodeSelectorTerms": [
            {"matchExpressions": reqs(t.match_expressions), "matchFields": reqs(t.match_fields)}
            for t in terms
        ]
    }


def pod_set_document(p: PodSetRequest) -> dict[str, Any]:
    """One PodSet as the peer's ``podSets`` entry: its pod template's requests, tolerations,
    nodeSelector and required node affinity, and its topology request."""
    topology, implied = _topology_request(p.topology)
    out: dict[str, Any] = {
        "name": p.name,
        "count": p.count,
        "requests": {k: v for k, v in p.requests.items()},
    }
    if topology is not None:
        out["topologyRequest"] = topology
    if implied:
        out["implied"] = True
    if p.tolerations:
        out["tolerations"] = [_toleration(t) for t in p.tolerations]
    if p.node_selector:
        out["nodeSelector"] = dict(p.node_selector)
    if p.affinity is not None:
        out["affinity"] = _affinity(p.affinity)
    return out


def document(
    cluster: Mapping[str, Any],
    workloads: Mapping[str, Sequence[PodSetRequest]],
    build_repeats: int = 0,
    place_repeats: int = 0,
) -> dict[str, Any]:
    """One peer input: a cluster, named workloads (each placed in one call), timing repeats."""
    return {
        "cluster": cluster,
        "workloads": [
            {"name": name, "podSets": [pod_set_document(p) for p in pod_sets]}
            for name, pod_sets in workloads.items()
        ],
        "buildRepeats": build_repeats,
        "placeRepeats": place_repeats,
    }


def run(documents: Sequence[Mapping[str, Any]], binary: Path | None = None) -> list[dict[str, Any]]:
    """Run the peer once over all documents; one answer per document, in order."""
    stdin = "".join(json.dumps(d, separators=(",", ":")) + "\n" for d in documents)
    done = subprocess.run(
        [str(binary or peer_binary())], input=stdin, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"kueue-peer exited {done.returncode}: {done.stderr.strip()}")
    answers = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    if len(answers) != len(documents):
        raise RuntimeError(f"kueue-peer answered {len(answers)} of {len(documents)} documents")
    return answers


# ---- one comparable form for both answers ----------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """One PodSet's outcome: ``fit`` with the assignment, ``no-fit`` with Kueue's message, or
    ``anomaly`` (tasgate's flag for where Kueue breaks its own assumptions, logs an error and
    admits a short assignment, which tasgate does not reproduce domain by domain)."""

    name: str
    kind: str
    levels: tuple[str, ...] = ()
    domains: tuple[tuple[tuple[str, ...], int], ...] = ()
    reason: str = ""
    # Kueue's answer only: an assignment of fewer pods than the PodSet has (what its "code
    # assumptions violated" case leaves, and also a count that whole slices do not fill).
    short: bool = field(default=False, compare=False)

    def __str__(self) -> str:
        if self.kind == "fit":
            shown = ", ".join(f"{'/'.join(v)}={c}" for v, c in self.domains)
            return f"{self.name}: fit {list(self.levels)} [{shown}]"
        return f"{self.name}: {self.kind} {self.reason!r}"


def tasgate_outcomes(placements: Sequence[Placement]) -> list[Outcome]:
    out = []
    for p in placements:
        if p.anomaly:
            out.append(Outcome(p.name, "anomaly"))
        elif p.fits and p.assignment is not None:
            domains = tuple((d.values, d.count) for d in p.assignment.domains)
            out.append(Outcome(p.name, "fit", p.assignment.levels, domains))
        else:
            out.append(Outcome(p.name, "no-fit", reason=p.reason))
    return out


def kueue_outcomes(answer: Mapping[str, Any], pod_sets: Sequence[PodSetRequest]) -> list[Outcome]:
    """Kueue's answer for one workload; PodSets after the first failing group are absent (it
    returns at the first failure), so the list may be shorter than ``pod_sets``."""
    counts = {p.name: p.count for p in pod_sets}
    out = []
    for entry in answer["podSets"]:
        if not entry["present"]:
            continue
        name, assignment = entry["name"], entry["assignment"]
        if entry["failure"]:
            out.append(Outcome(name, "no-fit", reason=entry["failure"]))
            continue
        if assignment is None:
            out.append(Outcome(name, "anomaly"))
            continue
        domains = tuple((tuple(d["values"]), d["count"]) for d in assignment["domains"])
        short = sum(c for _, c in domains) != counts[name]
        out.append(Outcome(name, "fit", tuple(assignment["levels"]), domains, short=short))
    return out


def _same(ours: Outcome | None, theirs: Outcome) -> bool:
    """Equal, or tasgate's anomaly flag where Kueue admitted a short assignment."""
    if ours is not None and ours.kind == "anomaly" and theirs.kind in ("fit", "anomaly"):
        return theirs.kind == "anomaly" or theirs.short
    return ours == theirs


def differences(tasgate: Sequence[Outcome], kueue: Sequence[Outcome]) -> list[str]:
    """Where the two disagree: every PodSet Kueue looked at must match, and tasgate must fail
    exactly where Kueue stopped (tasgate places the later groups too; Kueue does not)."""
    ours = {o.name: o for o in tasgate}
    out = [f"tasgate {ours.get(k.name)} | kueue {k}" for k in kueue if not _same(ours.get(k.name), k)]
    seen = {k.name for k in kueue}
    first_missing = next((o for o in tasgate if o.name not in seen), None)
    if first_missing is not None and not any(k.kind == "no-fit" for k in kueue):
        out.append(f"kueue never answered for {first_missing.name} though no earlier PodSet failed")
    return out
