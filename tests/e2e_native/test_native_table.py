"""The proof table of issue 22: tasgate's native verdicts and placements against kube-scheduler v1.36.5.

Every row of e2e/native_table.py runs on the real cluster; the table is printed (``-s``) and the
test fails on any row where tasgate and the scheduler disagree: the verdict (admitted / waits /
denied against bound / waited, then bound / never), a false denial, the pods per domain of the
topology key, or a never-fit group that is not the scheduler's ``Unschedulable``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from e2e.native_rows import NAMESPACE, NEVER, ROWS, selected_rows
from e2e.native_table import run_row, table
from e2e.native_world import NativeWorld

pytestmark = pytest.mark.e2e_native


def test_tasgate_predicts_the_native_scheduler(world: NativeWorld, tmp_path: Path) -> None:
    rows = selected_rows()
    outcomes = [run_row(world, row, tmp_path) for row in rows]
    printed = table(outcomes)
    print("\n" + printed)
    assert len(ROWS) >= 20
    assert not world.pods(NAMESPACE), "a row left pods behind"
    if rows == ROWS:
        assert [o for o in outcomes if o.fate.kind == NEVER], "no row showed a group never placed"
    assert not [o for o in outcomes if o.problems], printed
