"""Go-style durations (``5m``, ``90s``, ``1h30m``, ``9.5s``): as Kubernetes users write them in
policy files, and as the API server writes a webhook call's ``?timeout=`` (Go's ``Duration.String``)."""

from __future__ import annotations

import re

_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
MAX_SECONDS = 7 * 24 * 3600.0  # a week: anything longer is a typo, not a bound


def parse_duration(text: object) -> float:
    """Seconds in ``text`` (> 0, at most a week); ValueError saying what is wrong."""
    if not isinstance(text, str) or not text:
        raise ValueError(f"must be a duration such as 5m or 90s, got {text!r}")
    total, at = 0.0, 0
    for match in _PART.finditer(text):
        if match.start() != at:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        at = match.end()
    if at != len(text):
        raise ValueError(f"must be a duration such as 5m or 90s (units h, m, s, ms), got {text!r}")
    if not 0 < total <= MAX_SECONDS:
        raise ValueError(f"must be more than 0s and at most 168h, got {text!r}")
    return total
