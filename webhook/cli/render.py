"""`tasgate check`'s text output: one block per workload, columns that say what they count.

Its facts are the JSON report's (``figures.report``): "fits now" is whether the PodSet can start
now, and when quota in use holds the workload back it says so beside whether the topology has
room, as ``fitsNow``/``topologyFitsNow``/``quotaNow`` do; a podset group's leader names the
PodSet its figures belong to instead of printing them as its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scorer.model import Mode, Placement
from webhook.cli.check import Result, summary_line
from webhook.decide.gangs.plan import partial_minimum
from webhook.decide.messages import plural, short_level
from webhook.decide.patch import added_keys
from webhook.decide.verdicts import Decision, PodSetVerdict
from webhook.figures.report import field_errors, fits_now, group_partners, levels_json, quota_held
from webhook.model.quantity import format_quantity

VERDICT = {"admitted": "ADMITTED", "waits": "WAITS", "denied": "DENIED", "not-checked": "NOT CHECKED"}


def render(results: Sequence[Result]) -> str:
    blocks = [_block(r) for r in results]
    return "\n".join([*blocks, summary_line(results)])


def _block(r: Result) -> str:
    if r.decision is None:
        return f"ERROR {r.source}\n  {r.error}"
    d = r.decision
    lines = [f"{d.kind} {d.namespace}/{d.name}: {VERDICT[r.outcome]} ({d.reason.value})  [{r.source}]"]
    if d.queue or d.topology:
        lines.append(f"  {_where(d)}")
    lines += _message(d)
    lines += [f"  warning: {w}" for w in d.warnings]
    held, partners = quota_held(d), group_partners(d)
    for v in d.pod_sets:
        lines += _pod_set(v, _unplaced(r), held, partners.get(v.name))
    if d.patch:
        keys = ", ".join(sorted({key for op in d.patch for key in added_keys(op)}))
        lines.append(f"  patch: {plural(len(d.patch), 'op')} adding {keys}")
    lines += [
        f"  {g['kind'].lower()}: {g['kind']} {g['metadata']['name']}{_group_size(g)}" for g in d.pod_groups
    ]
    return "\n".join(lines)


def _message(d: Decision) -> list[str]:
    """The verdict's message; an invalid object's field errors one per line."""
    errors = field_errors(d)
    if len(errors) > 1:
        return [f"  {plural(len(errors), 'invalid field')}:", *(f"    {e}" for e in errors)]
    return [f"  {d.message}"] if d.message else []


def _group_size(group: Mapping[str, Any]) -> str:
    """A Coscheduling/Volcano PodGroup's ``minMember``, else the native gang's ``minCount`` (of
    the PodGroup itself or of each template of a Workload): whichever the object carries."""
    spec = group.get("spec") or {}
    if "minMember" in spec:
        least = partial_minimum(group)  # Kueue may admit fewer: the reconciler follows its count
        follows = f" (as few as {least} if Kueue admits partially; set from the Workload's admission)"
        return f" minMember={spec['minMember']}" + (follows if least is not None else "")
    templates = spec.get("podGroupTemplates", ())
    policies = [spec.get("schedulingPolicy"), *(t.get("schedulingPolicy") for t in templates)]
    counts = [str(p["gang"]["minCount"]) for p in policies if isinstance(p, Mapping) and "gang" in p]
    return f" minCount={','.join(counts)}" if counts else ""


def _where(d: Decision) -> str:
    parts = []
    if d.queue:
        parts.append(f"queue {d.queue}" + (f" → ClusterQueue {d.cluster_queue}" if d.cluster_queue else ""))
    flavor = next((v.flavor for v in d.pod_sets if v.flavor), None)
    if flavor:
        parts.append(f"flavor {flavor}")
    if d.topology:
        parts.append(f"topology {d.topology}")
    return " · ".join(parts)


def _unplaced(r: Result) -> str:
    """Why a PodSet of this result has no placement: not checked (what Kueue will be asked for),
    denied before it was placed, or placed without TAS in a queue that mixes flavors."""
    if r.decision is not None and r.decision.topology is not None:
        return "not placed by TAS: no TAS annotation in a queue that mixes TAS and other flavors"
    if r.outcome == "not-checked":
        return "not checked: this is what Kueue will be asked for"
    return "not placed: denied before placement"


def _pod_set(v: PodSetVerdict, unplaced: str, held: str, workers: str | None) -> list[str]:
    per_pod = ", ".join(f"{r} {format_quantity(r, n)}" for r, n in sorted(v.requests.items())) or "nothing"
    head = f"  PodSet {v.name}: {plural(v.count, 'pod')}, {_how(v)}; per pod {per_pod}"
    if not v.judged:
        return [head, f"    {unplaced}"]
    now = "yes" if fits_now(v, held) else "no"
    if held:  # both facts: the topology's room, and the quota that holds the workload back
        now += (
            f" (the topology {'has' if _yes(v.now) == 'yes' else 'has no'} room; quota in use holds it back)"
        )
    lines = [head, f"    fits now: {now} · fits when empty: {_yes(v.never)}{_partial(v)}"]
    if workers is not None:
        return [*lines, f"    {_leader(v, workers)}"]
    rows = levels_json(v)
    if rows:
        width = max(len(short_level(r["level"])) for r in rows)
        lines.append(
            f"    {'level'.ljust(width)}  {'pods now':>9}  {'pods empty':>10}  domains holding it (empty)"
        )
        for r in rows:
            level = short_level(r["level"]).ljust(width)
            lines.append(
                f"    {level}  {r['nowMaxPods']:>9}  {r['whenEmptyMaxPods']:>10}"
                f"  {r['whenEmptyFittingDomains']} of {r['domains']}"
            )
    return lines


def _leader(v: PodSetVerdict, workers: str) -> str:
    """A group leader's own place; its level table would be the group's, counted in workers."""
    where = ", ".join(
        f"{when} on {_hosts(p)}" for when, p in (("now", v.now), ("when empty", v.never)) if _hosts(p)
    )
    own = f": {where}" if where else ""
    return (
        f"placed with PodSet {workers} as one podset group ({v.request.group}){own}; "
        f"the per-level figures are the group's, under {workers}"
    )


def _hosts(p: Placement | None) -> str:
    a = p.assignment if p is not None and p.fits else None
    return ", ".join(",".join(d.values) for d in a.domains) if a else ""


def _how(v: PodSetVerdict) -> str:
    req = v.request
    if req.mode is Mode.IMPLIED:
        return "implied (no annotation)"
    if req.mode is Mode.NONE:  # not judged: whether Kueue implies TAS depends on the queue's flavors
        return "no TAS annotation"
    how = str(req.mode.value) + (f" {short_level(req.level)}" if req.level else "")
    if req.slice_size and req.slice_level:
        how += f", slices of {req.slice_size} per {short_level(req.slice_level)}"
    return how + (", injected" if v.injected else "")


def _yes(p: Placement | None) -> str:
    return "yes" if p is not None and p.fits else "no"


def _partial(v: PodSetVerdict) -> str:
    if v.admitted is not None:
        return f" (partial admission: {v.admitted} of {v.count} now)"
    if v.admissible is not None:
        return f" (partial admission: at most {v.admissible} of {v.count})"
    return ""
