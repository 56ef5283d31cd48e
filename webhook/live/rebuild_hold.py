"""Test-only (``--test-fault-hook``): hold the Mirror's next rebuild, to prove on a real cluster
what arrives while a rebuild runs.

A quota charge that lands while a rebuild has taken its copy must survive into the state that
rebuild publishes (`live.usage`). On a real API server and Kueue that window is milliseconds, so
the end-to-end row (tests/e2e/test_kueue_quota_rebuild.py) opens it on purpose: ``arm``, cause a
rebuild, let Kueue admit a Workload, see its charge land (``charged``), ``release``. Never used
in production: the routes exist only with the fault hook (`serve.debug`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

HANG_GUARD_SECONDS = 120.0  # a test that dies while holding must not leave the thread waiting forever

Made = TypeVar("Made", bound=Callable[..., Any])


class RebuildHold:
    def __init__(self) -> None:
        self.armed = False
        self.held = False  # a rebuild waits on its thread now
        self.charged: list[str] = []  # Workloads whose quota charge landed while held
        self._go = threading.Event()

    def arm(self) -> None:
        """Hold the next rebuild (the next `wrap`)."""
        self.armed, self.charged = True, []
        self._go.clear()

    def release(self) -> None:
        self._go.set()

    def wrap(self, made: Made) -> Made:
        """``made`` itself, or, when armed, ``made`` after waiting for `release`."""
        if not self.armed:
            return made
        self.armed = False

        def held(*args: Any) -> Any:
            self.held = True
            try:
                self._go.wait(HANG_GUARD_SECONDS)
            finally:
                self.held = False
            return made(*args)

        return held  # type: ignore[return-value]

    def charge_landed(self, key: str) -> None:
        if self.held:
            self.charged.append(key)

    def report(self) -> dict[str, Any]:
        return {"armed": self.armed, "held": self.held, "charged": list(self.charged)}
