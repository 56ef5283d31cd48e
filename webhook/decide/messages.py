"""What tasgate says to people: the real cause in numbers, and advice that fits it.

A denial or warning names what actually stops the gang, in this order: no node the flavor
selects at all; a pod larger than the largest node; nodes left out by taints, the nodeSelector or
required node affinity (with Kueue's counts); and only then capacity, with numbers taken from
the same rule Kueue uses for the mode (a required level counts its best domain; preferred,
unconstrained and implied may spread, so they count the whole topology; slices count slices).
Texts are complete here; the admission edge shortens warnings to Kubernetes' limit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from scorer.model import HOSTNAME_LABEL, PODS, LevelCapacity, Mode, Placement, TopologyRequest
from webhook.model.quantity import format_quantity
from webhook.state.rejected import Rejected

ADMISSION_WARNING_LIMIT = 256  # the API server truncates longer warnings
HEADLINE_FALLBACK = ("cpu", "memory")
NODE_EXCLUSIONS = ("taint ", "nodeSelector", "affinity")


def plural(n: int, noun: str, many: str = "") -> str:
    """``1 pod``, ``2 pods``, ``0 errors``: a count with its noun in the right number (every text a
    person reads says "1 pod", never "1 pods")."""
    return f"{n} {noun if n == 1 else many or noun + 's'}"


def short_level(level: str) -> str:
    """`cloud.provider.com/topology-rack` reads as "rack"; hostname as "node"."""
    if level == HOSTNAME_LABEL:
        return "node"
    tail = level.rsplit("/", 1)[-1]
    for prefix in ("topology-", "topology."):
        if tail.startswith(prefix):
            return tail[len(prefix) :]
    return tail


def request_summary(requests: Mapping[str, int], gpu_resources: Sequence[str]) -> str:
    """The resources that decide placement: accelerators if any, else cpu and memory."""
    names = [r for r in requests if r in gpu_resources or ("/" in r and r != PODS)]
    if not names:
        names = [r for r in HEADLINE_FALLBACK if r in requests]
    if not names:
        return "no resources"
    return ", ".join(f"{r}: {format_quantity(r, requests[r])}" for r in sorted(names))


@dataclass(frozen=True)
class Where:
    """What the PodSet was judged on: the flavor, its node selection, and its nodes."""

    flavor: str  # "" for the policy's default topology
    flavor_labels: Mapping[str, str]
    topology: str
    nodes: int  # how many nodes the flavor selects that carry every level label
    largest: Mapping[str, int]  # the most of each resource one of those nodes offers


def blocking_cause(where: Where, requests: Mapping[str, int], when_empty: Placement) -> str | None:
    """What stops even one pod from being placed, beyond capacity: None when only capacity does."""
    if not where.nodes:
        selected = ", ".join(f"{k}={v}" for k, v in sorted(where.flavor_labels.items()))
        flavor = f'ResourceFlavor "{where.flavor}"' + (f" (nodeLabels {selected})" if selected else "")
        subject = flavor if where.flavor else "the policy's default topology"
        return (
            f'no node is selected by {subject} and carries every level label of Topology "{where.topology}": '
            "label the nodes, or fix the flavor's nodeLabels"
        )
    for resource, amount in sorted(requests.items()):
        largest = where.largest.get(resource, 0)
        if amount > largest:
            have = format_quantity(resource, largest)
            return (
                f"one pod asks {resource}: {format_quantity(resource, amount)}, more than the largest node "
                f"offers ({have}): shrink the pod"
            )
    if when_empty.fit_count == 0:
        return _exclusion_cause(when_empty)
    return None


def _exclusion_cause(placement: Placement) -> str | None:
    blocking = [(r, n) for r, n in placement.excluded if r.startswith(NODE_EXCLUSIONS)]
    if not blocking:
        return None
    total = placement.total_nodes
    parts = [f"{_exclusion_name(r)} excludes {n} of {plural(total, 'node')}" for r, n in blocking]
    advice = sorted({_advice(r) for r, _ in blocking})
    rest = [f"{r}: {n}" for r, n in placement.excluded if not r.startswith(NODE_EXCLUSIONS)]
    others = f" (and {', '.join(rest)})" if rest else ""
    return f"no node can take these pods: {'; '.join(parts)}{others}; {' and '.join(advice)}"


def _exclusion_name(reason: str) -> str:
    if reason == "nodeSelector":
        return "the nodeSelector"
    if reason == "affinity":
        return "required node affinity"
    return reason  # 'taint "k=v:NoSchedule"'


def _advice(reason: str) -> str:
    if reason.startswith("taint "):
        return "tolerate the taint (in the pod template, or in the ResourceFlavor's tolerations)"
    if reason == "nodeSelector":
        return "fix the nodeSelector"
    return "fix the required node affinity"


def exclusion_note(placement: Placement) -> str:
    """The nodes Kueue left out for a reason the user can change (a taint, the nodeSelector,
    required node affinity), with the change, for a message whose main cause is capacity.

    Nodes left out for lack of a resource are not named: that is the capacity the message
    already counts ("limited by nvidia.com/gpu"), and "Kueue left out resource nvidia.com/gpu: 1"
    after it gives nobody anything to do."""
    blocking = [(r, n) for r, n in placement.excluded if r.startswith(NODE_EXCLUSIONS)]
    if not blocking:
        return ""
    listed = "; ".join(f"{_exclusion_name(r)} excludes {plural(n, 'node')}" for r, n in blocking)
    advice = " and ".join(sorted({_advice(r) for r, _ in blocking}))
    them = "it" if sum(n for _, n in blocking) == 1 else "them"
    return f" Of {plural(placement.total_nodes, 'node')}, {listed}: {advice} to use {them}."


@dataclass(frozen=True, slots=True)
class Slices:
    """A sliced request's outermost slice: ``size`` pods inside one ``level`` domain each."""

    size: int
    level: str

    def pods(self, slices: int) -> str:
        return f"{plural(slices, 'slice')} of {self.size} ({plural(slices * self.size, 'pod')})"


def slices_of(request: TopologyRequest) -> Slices | None:
    """The outermost slice as Kueue reads it (the first constraint layer wins); None unsliced."""
    layer = request.slice_layers[0] if request.slice_layers else None
    size = layer.size if layer else request.slice_size
    level = layer.level if layer else request.slice_level
    return Slices(size, level) if size and level and size > 1 else None


def spread_request(request: TopologyRequest, top: str) -> TopologyRequest:
    """The request spread over the whole topology (preferred at ``top``), its slices kept."""
    return replace(request, mode=Mode.PREFERRED, level=top, group=None)


def pods_held(placement: Placement, slices: Slices | None) -> int:
    """The pods a placement's ``fit_count`` stands for (slices hold ``size`` pods each)."""
    return placement.fit_count * (slices.size if slices and placement.unit != "pod" else 1)


def never_fits(
    pod_set: str,
    count: int,
    summary: str,
    level: str,
    never: Placement,
    limiting: str | None,
    whole_topology: int | None,
    spreads: bool = False,
    cause: str | None = None,
    slices: Slices | None = None,
    request_level: str | None = None,
) -> str:
    """The deny message: the request, what stops it, and what would fit.

    ``spreads``: the request may spread over domains (preferred, unconstrained, implied), so
    Kueue's own count over the whole topology is the limit worth naming. ``whole_topology``: the
    pods the whole topology holds when empty (in whole slices for a sliced request);
    ``request_level`` the level the PodSet names (None: implied or unconstrained). A sliced
    request is counted in slices everywhere: a domain's pods say nothing about the slices it holds.
    """
    head = f'PodSet "{pod_set}" ({plural(count, "pod")} × {summary}'
    head += f", in slices of {slices.size} per {short_level(slices.level)})" if slices else ")"
    if cause is not None:
        return f"{head} can never be placed: {cause}."
    if slices is not None and not _holds_a_slice(never, slices):
        why = _no_slice(never, slices, request_level)
        return f"{head} can never be placed: {why}.{exclusion_note(never)}"
    if spreads:
        held = never.fit_count
        unit = slices.pods(held) if slices else plural(held, "such pod", "such pods")
        ask = slices.pods(held) if slices else plural(held, "pod")
        return (
            f"{head} can never be placed: the whole topology holds only {unit} even when empty; "
            f"ask for at most {ask}.{exclusion_note(never)}"
        )
    row = never.level_row(level)
    if row is None or not never.levels:
        return f"{head} can never be placed: {never.reason}"
    limited = f" (limited by {limiting})" if limiting else ""
    largest = f"the largest {short_level(level)} holds {_held(row, slices)} even when empty{limited}"
    hint = _required_hint(never, row, count, whole_topology, slices)
    return f'{head} can never fit one "{level}" domain: {largest}.{hint}{exclusion_note(never)}'


def _held(row: LevelCapacity, slices: Slices | None) -> str:
    return slices.pods(row.max_slices) if slices else plural(row.max_pods, "such pod", "such pods")


def _at_most(row: LevelCapacity, slices: Slices | None) -> str:
    return slices.pods(row.max_slices) if slices else plural(row.max_pods, "pod")


def _required_hint(
    never: Placement, row: LevelCapacity, count: int, whole: int | None, slices: Slices | None
) -> str:
    """A coarser level that holds it, else spreading, else the most the whole topology holds."""
    table = never.levels
    index = [r.level for r in table].index(row.level)
    looser = next((r for r in reversed(table[:index]) if r.fitting_domains > 0), None)
    if looser is not None:
        held = looser.max_slices if slices else looser.max_pods
        unit = " slices" if slices else ""
        return (
            f' A "{looser.level}" domain holds {held}{unit}; use that level, '
            f"podset-preferred-topology, or at most {_at_most(row, slices)}."
        )
    wanted = count // slices.size * slices.size if slices else count
    if whole is not None and whole >= wanted:
        return (
            " No single domain holds it; use podset-preferred-topology to spread,"
            f" or at most {_at_most(row, slices)}."
        )
    total = whole if whole is not None else table[0].max_pods
    if slices:
        total = total // slices.size * slices.size
        whole_slices = slices.pods(total // slices.size)
        return (
            f" The whole topology holds only {whole_slices} even when empty; ask for at most "
            f"{plural(total, 'pod')}."
        )
    most = plural(total, "such pod", "such pods")
    return f" The whole topology holds only {most} even when empty; ask for at most {total}."


def _holds_a_slice(never: Placement, slices: Slices) -> bool:
    row = never.level_row(slices.level)
    return row is None or row.max_slices > 0


def _no_slice(never: Placement, slices: Slices, level: str | None) -> str:
    """No domain of the slice level holds one slice: smaller slices, or a coarser slice level (and
    a coarser PodSet level with it when the slice level would pass it: Kueue refuses a slice level
    above the PodSet's)."""
    row = never.level_row(slices.level)
    most = row.max_pods if row else 0
    where = short_level(slices.level)
    names = [r.level for r in never.levels]
    above = never.levels[: names.index(slices.level)]
    coarser = next((r for r in reversed(above) if r.max_pods >= slices.size), None)
    advice = [f"slices of at most {plural(most, 'pod')}"] if most >= 1 else []
    if coarser is not None:
        both = level is not None and level in names and names.index(coarser.level) < names.index(level)
        what = "level for the PodSet and its slices" if both else "slice level"
        advice.append(f'"{coarser.level}" as the {what} (one holds {plural(coarser.max_pods, "pod")})')
    fix = f"; use {' or '.join(advice)}" if advice else ""
    one = plural(slices.size, "pod")
    return f"no {where} holds one slice of {one} even when empty (the largest holds {most}){fix}"


def waits(pod_set: str, level: str, now: Placement, required: bool) -> str:
    """Fits the empty cluster, not the current free capacity: Kueue's own numbers for the mode."""
    where = f"the best {short_level(level)}" if required else "the topology"
    figure = room(where, now.fit_count, now.total_count, now.unit == "pod")
    return f'PodSet "{pod_set}" must wait: {figure}; it fits when capacity frees up'


def room(where: str, held: int, needed: int, pods: bool) -> str:
    """The must-wait figure in words, "the best block has room for 10 of 15 pods now (5 short)":
    the warning and `map` both say it through here (``pods`` False: counted in slices)."""
    noun = plural(needed, "pod" if pods else "slice")
    return f"{where} has room for {held} of {noun} now ({max(needed - held, 0)} short)"


def left_out(rejected: Rejected) -> str:
    """Why a workload is not judged: the object its verdict depends on, and what is wrong with it."""
    return f"{rejected.subject} is left out of tasgate's cluster state as unusable: {rejected.why}"


def clip(text: str, limit: int = ADMISSION_WARNING_LIMIT) -> str:
    """Shorten an admission warning to ``limit``; the numbers and the fix come first in every text."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def near_miss_held(pod_set: str, keys: Sequence[str]) -> str:
    """The policy's topology annotation is not added over what looks like the user's own."""
    listed = ", ".join(f'"{k}"' for k in keys)
    return f'PodSet "{pod_set}": no topology annotation added over {listed}, a misspelt or misplaced TAS key'
