"""Lenient readers of fields the API server (or a controller) wrote, for the tracker's records.

The API server is authoritative for what it stores, so a missing or odd value is read as
"nothing yet" rather than refused: a negative or non-numeric count is 0, a non-mapping is empty,
and every text kept is clipped so a record's size is bound whatever an object carries.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

TEXT_LIMIT = 300


def timestamp(value: object) -> float | None:
    """An RFC 3339 time (``2026-01-01T00:00:00Z``) as seconds since the epoch; None if absent or bad."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        return None


def map_of(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def list_of(value: object) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else []


def int_of(value: object) -> int:
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return max(value, 0)
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return 0


def clip(value: object) -> str:
    text = "" if value is None else str(value)
    return text if len(text) <= TEXT_LIMIT else text[: TEXT_LIMIT - 1] + "…"
