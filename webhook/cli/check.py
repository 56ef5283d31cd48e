"""`tasgate check`: the webhook's verdicts offline, as a pipeline step.

Every input document gets a result naming where it came from (file and document number); a
file that cannot be read is an error result and the rest of the input is still checked. The
outcome of each result is one of ``OUTCOMES``; ``--fail-on`` says which make the run fail
(exit 1), errors always exit 2, and so does a run that checked no workload at all (a pipeline
pointed at the wrong directory must not pass).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from webhook.cli.inputs import failure_text
from webhook.decide.decision import decide
from webhook.decide.messages import plural
from webhook.decide.policy import Policy
from webhook.decide.reasons import Reason
from webhook.decide.verdicts import Decision, Review
from webhook.figures.report import decision_json
from webhook.files.loader import Document, LoadFailure
from webhook.state.cluster import ClusterState
from webhook.state.native import with_applied
from webhook.state.rejected import Rejected

API_VERSION = "tasgate.io/v1"
REPORT_KIND = "CheckReport"
OUTCOMES = ("admitted", "waits", "denied", "not-checked", "error")
DEFAULT_FAIL_ON = ("denied",)
EXIT_OK, EXIT_FAILED, EXIT_ERROR = 0, 1, 2
# Reasons under which the object was not judged at all (the result says why).
NOT_CHECKED = frozenset(
    {
        Reason.UNKNOWN_KIND,
        Reason.KUEUE_CONFIG,
        Reason.OBJECT_REJECTED,
        Reason.UNRESOLVED,
        Reason.NATIVE_UNKNOWN,
        Reason.NO_TAS,
        Reason.EXEMPT,
        Reason.OWNED,
    }
)


@dataclass(frozen=True)
class Result:
    source: str
    outcome: str
    decision: Decision | None = None
    obj: Mapping[str, Any] | None = None
    error: str = ""


def check_all(
    inputs: Iterable[Document | LoadFailure], state: ClusterState, policy: Policy, namespace: str
) -> list[Result]:
    """One result per workload (or unreadable input); objects that are not workloads are left out."""
    results = []
    items = list(inputs)
    applied = [i.obj for i in items if isinstance(i, Document)]
    state = replace(state, native=with_applied(state.native, applied, namespace))
    for item in items:
        if isinstance(item, LoadFailure):
            results.append(Result(item.source, "error", error=failure_text(item)))
            continue
        d = decide(Review(item.obj, namespace=namespace), state, policy)
        if d.reason is not Reason.NOT_A_WORKLOAD:
            results.append(Result(item.source, outcome_of(d), d, item.obj))
    return results


def outcome_of(d: Decision) -> str:
    if not d.allowed:
        return "denied"
    if d.reason in NOT_CHECKED:
        return "not-checked"
    return "waits" if d.reason is Reason.WAITS else "admitted"


def summary(results: Sequence[Result]) -> dict[str, int]:
    counts = {o: sum(r.outcome == o for r in results) for o in OUTCOMES}
    return {
        "checked": counts["admitted"] + counts["waits"] + counts["denied"],
        "admitted": counts["admitted"],
        "waits": counts["waits"],
        "denied": counts["denied"],
        "notChecked": counts["not-checked"],
        "errors": counts["error"],
    }


def summary_line(results: Sequence[Result]) -> str:
    s = summary(results)
    return (
        f"checked {s['checked']}: {s['admitted']} admitted, {s['waits']} waits, {s['denied']} denied; "
        f"{s['notChecked']} not checked; {plural(s['errors'], 'error')}"
    )


def exit_code(results: Sequence[Result], fail_on: Sequence[str]) -> int:
    s = summary(results)
    if s["errors"] or s["checked"] + s["notChecked"] == 0:
        return EXIT_ERROR
    failing = {"unchecked": "not-checked"}
    wanted = {failing.get(name, name) for name in fail_on}
    return EXIT_FAILED if any(r.outcome in wanted for r in results) else EXIT_OK


def report(results: Sequence[Result], rejected: Sequence[Rejected] = ()) -> dict[str, Any]:
    """The versioned JSON/YAML document (`-o json`, `-o yaml`); ``rejected``: the objects the
    cluster state left out (``state.rejected``), listed when there are any."""
    doc: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": REPORT_KIND,
        "summary": summary(results),
        "results": [_result_json(r) for r in results],
    }
    if rejected:
        doc["rejected"] = [r.as_json() for r in rejected]
    return doc


def _result_json(r: Result) -> dict[str, Any]:
    out: dict[str, Any] = {"source": r.source, "outcome": r.outcome}
    if r.error:
        out["error"] = r.error
    if r.decision is not None:
        out.update(decision_json(r.decision))
    return out
