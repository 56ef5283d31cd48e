"""The fault suite's table: one row per fault, filled as the test runs, written whatever happens.

A test opens its row with ``with table.row("...") as row:``; it sets the figures as it measures
them and states each invariant with ``row.check(ok, why)``. A failed check does not stop the
test (the other figures are still worth having), but the row ends FAIL and the test raises at
the end of the ``with`` with every failed check. An exception inside the body ends the row FAIL
with its first line. So the table always has every row, and a row says PASS only when every
invariant of that fault held.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

HEADER = (
    "| fault | reviews answered | wrong | refused / unchecked | recovery (s) | PodGroups per admitted "
    "workload | duplicate Events | tasgate restarts | result | notes |"
)


@dataclass
class Row:
    fault: str
    answered: int = 0
    wrong: int = 0
    refused: int = 0
    unchecked: int = 0
    recovery_s: float | None = None
    podgroups: str = "n/a"
    duplicate_events: int | None = None
    restarts: str = "0"
    notes: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    ended: float | None = None

    @property
    def seconds(self) -> float:
        return (self.ended or time.monotonic()) - self.started

    def check(self, ok: bool, why: str) -> bool:
        if not ok:
            self.failures.append(why)
        return ok

    def note(self, text: str) -> None:
        self.notes.append(text)

    @property
    def result(self) -> str:
        return "FAIL" if self.failures else "PASS"

    def markdown(self) -> str:
        recovery = "-" if self.recovery_s is None else f"{self.recovery_s:.2f}"
        events = "n/a" if self.duplicate_events is None else str(self.duplicate_events)
        notes = "; ".join(self.notes + [f"FAILED: {f}" for f in self.failures]).replace("|", "/")
        cells = [
            self.fault,
            str(self.answered),
            str(self.wrong),
            f"{self.refused} / {self.unchecked}",
            recovery,
            self.podgroups,
            events,
            self.restarts,
            f"{self.result} ({self.seconds:.0f}s)",
            notes,
        ]
        return "| " + " | ".join(cells) + " |"


class Table:
    def __init__(self, caption: str = "") -> None:
        self.rows: list[Row] = []
        self.caption = caption  # one line above the table: the world it was measured on

    @contextmanager
    def row(self, fault: str) -> Iterator[Row]:
        row = Row(fault)
        self.rows.append(row)
        try:
            yield row
        except Exception as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            row.failures.append(f"{type(exc).__name__}: {first[:400]}")
            raise
        finally:
            row.ended = time.monotonic()
        if row.failures:
            raise AssertionError(f"{fault}: " + "; ".join(row.failures))

    def markdown(self) -> str:
        separator = "|" + "---|" * HEADER.count(" | ") + "---|"
        caption = [self.caption, ""] if self.caption else []
        return "\n".join([*caption, HEADER, separator, *(r.markdown() for r in self.rows)])

    def write(self, directory: Path | None = None) -> list[Path]:
        """The table as markdown in ``~/.cache/tasgate/faults-table.md`` (``$TASGATE_CACHE``) and in
        ``directory`` if given; the paths written."""
        cache = Path(os.environ.get("TASGATE_CACHE", Path.home() / ".cache" / "tasgate"))
        paths = [cache / "faults-table.md"] + ([directory / "faults-table.md"] if directory else [])
        text = self.markdown() + "\n"
        for path in paths:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        return paths
