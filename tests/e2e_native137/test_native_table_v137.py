"""The v1.37 proof table of issue 39: tasgate's native verdicts and placements against
kube-scheduler v1.37.0 (``bash e2e/build-binaries.sh native137``), whatever ``$TASGATE_NATIVE_K8S`` says.

Every row of e2e/native_rows_v137.py runs on its own v1.37.0 cluster (e2e/native_scenario.py's 12
nodes and blockers, the PriorityClasses) through e2e/native_table.py, the v1.36 table's harness:
the table is printed (``-s``) and the test fails on any row where tasgate and the scheduler
disagree (verdict, false denial, pods per domain of the key, a never-fit group without the
scheduler's ``Unschedulable``, or ``SchedulerError`` for the mixed-priority row), where the
scheduler's fate is not the one the row was written for, or where tasgate admits, says "waits"
for, or crashes on objects the API server refuses (the v1alpha2 row; its verdict is printed).
``$TASGATE_NATIVE_ROWS`` runs only the rows it names. Missing binaries fail the module with the
build command (never a skip).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from e2e.native_row import FITS, NAMESPACE, NEVER, REFUSED, WAITS
from e2e.native_rows import selected_rows
from e2e.native_rows_v137 import ROWS_V137, SCHEDULER_ERROR
from e2e.native_table import run_row, table
from e2e.native_world import NativeWorld

pytestmark = pytest.mark.e2e_native


@pytest.fixture(scope="module")
def world137(v137: NativeWorld) -> NativeWorld:
    """The module's v1.37.0 cluster (conftest) with the table's namespace."""
    v137.cp.kubectl("create", "namespace", NAMESPACE)
    return v137


def test_tasgate_predicts_the_v137_scheduler(world137: NativeWorld, tmp_path: Path) -> None:
    rows = selected_rows(ROWS_V137)
    outcomes = [run_row(world137, row, tmp_path) for row in rows]
    printed = table(outcomes)
    print("\n" + printed)
    assert len(ROWS_V137) >= 30
    assert not world137.pods(NAMESPACE), "a row left pods behind"
    if rows == ROWS_V137:
        seen = {o.fate.kind for o in outcomes}
        assert {FITS, WAITS, NEVER, REFUSED} <= seen, f"the table showed only {sorted(seen)}"
        composites = [o for o in outcomes if o.row.composite and o.fate.kind in (FITS, WAITS, NEVER)]
        assert {o.fate.kind for o in composites} == {FITS, WAITS, NEVER}, "a composite fate is missing"
        errors = [o for o in outcomes if (o.fate.condition or {}).get("reason") == SCHEDULER_ERROR]
        assert errors, "no row showed the scheduler refusing a mixed-priority group"
        assert [o for o in outcomes if "preempted" in o.fate.text], "no row showed group preemption"
    assert not [o for o in outcomes if o.problems], printed
