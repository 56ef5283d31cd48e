"""The API server's ``?timeout=`` on a webhook call, read by the project's one Go-duration parser.

The API server writes the call's remaining budget with Go's ``Duration.String``: ``10s``, a
fraction when the request already spent some (``9.873456789s``), ``500ms`` below a second,
``1m0s`` at a minute. Anything else, or a budget over a minute, leaves the default.
"""

from __future__ import annotations

import pytest

from webhook.wire.admission import parse_timeout


@pytest.mark.parametrize(
    ("raw", "seconds"),
    [
        ("10s", 10.0),
        ("30s", 30.0),
        ("9.873456789s", 9.873456789),
        ("500ms", 0.5),
        ("1m0s", 60.0),
        ("1m30s", 7.0),  # over a minute: not a webhook budget
        ("0s", 7.0),
        ("", 7.0),
        (None, 7.0),
        ("ten", 7.0),
        ("10", 7.0),
        ("-5s", 7.0),
    ],
)
def test_the_api_servers_timeout_is_read_as_a_go_duration(raw: str | None, seconds: float) -> None:
    assert parse_timeout(raw, default=7.0) == pytest.approx(seconds)
