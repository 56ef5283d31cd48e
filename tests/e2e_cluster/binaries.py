"""The cluster suites' one check that the binaries they run are built."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from e2e.controlplane import BinariesMissingError


def require(*finders: Callable[[], object]) -> None:
    """Fail (never skip) the module's tests, saying how to build it, when a binary is missing."""
    try:
        for find in finders:
            find()
    except BinariesMissingError as exc:
        pytest.fail(str(exc), pytrace=False)
