"""A Workload of the wrong shape (a hand-made or truncated dump: the API server's schema forbids
these) is left out of the state alone and recorded, never a traceback; and its quota is read as
Kueue reads it when the assignment leaves the count out."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.webhook.conftest import GPU
from tests.webhook.quota_world import admitted
from webhook.live.parsed import workload_found
from webhook.state.cluster import build_state
from webhook.state.quota_usage import quota_charge
from webhook.state.rejected import Rejected


def _broken(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    obj = copy.deepcopy(admitted("bad", "cq", {GPU: "8"}, "gpu"))
    into = obj
    for key in path[:-1]:
        into = into[key]
    into[path[-1]] = value
    return obj


SHAPES = {
    "status a list": (("status",), []),
    "spec a list": (("spec",), ["x"]),
    "admission a string": (("status", "admission"), "yes"),
    "admission a list": (("status", "admission"), [1]),
    "conditions a string": (("status", "conditions"), "QuotaReserved"),
}


@pytest.mark.parametrize("case", sorted(SHAPES))
def test_a_misshapen_workload_is_left_out_alone(case: str) -> None:
    path, value = SHAPES[case]
    good = admitted("good", "cq", {GPU: "8"}, "gpu")
    state = build_state([_broken(path, value), good])
    assert [r.name for r in state.rejected] == ["bad"], state.rejected
    assert isinstance(workload_found(_broken(path, value)), Rejected)  # live mode: the same


def test_an_assignment_without_a_count_is_the_spec_count_as_kueue_defaults_it() -> None:
    """``ptr.Deref(psa.Count, totalCounts[name])``: reclaimable pods then shrink the usage."""
    obj = admitted("w", "cq", {GPU: "32"}, "gpu", count=4)
    del obj["status"]["admission"]["podSetAssignments"][0]["count"]
    obj["status"]["reclaimablePods"] = [{"name": "main", "count": 1}]
    charge = quota_charge(obj)
    assert charge is not None and dict(charge.amounts) == {("gpu", GPU): 24}
