"""Reading the API server's audit log: which webhooks ran on a request and what tasgate said."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from e2e.fidelity_world import MUTATE, VALIDATE

# --- the API server's audit log --------------------------------------------------------------------


class AuditTail:
    """Reads cp.audit_log incrementally; keeps every event seen (the log only grows)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""
        self.events: list[dict[str, Any]] = []

    def read(self) -> list[dict[str, Any]]:
        """Events appended since the last call (they are also added to ``events``)."""
        try:
            with self.path.open("rb") as log:
                log.seek(self._offset)
                chunk = log.read()
        except FileNotFoundError:
            return []
        self._offset += len(chunk)
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()
        fresh = [json.loads(line) for line in lines if line.strip()]
        self.events.extend(fresh)
        return fresh

    def all(self) -> list[dict[str, Any]]:
        self.read()
        return self.events


def tasgate_annotations(event: Mapping[str, Any], webhook: str = MUTATE) -> dict[str, str]:
    """The audit annotations tasgate's ``webhook`` returned for this request (prefix stripped)."""
    prefix = f"{webhook}/"
    notes = event.get("annotations") or {}
    return {key[len(prefix) :]: str(value) for key, value in notes.items() if key.startswith(prefix)}


def mutating_webhooks_called(event: Mapping[str, Any]) -> list[str]:
    """The mutating webhooks the API server called for this request, in call order (round, index).

    From its own ``mutation.webhook.admission.k8s.io/round_<r>_index_<i>`` audit annotations.
    """
    calls: list[tuple[int, int, str]] = []
    for key, value in (event.get("annotations") or {}).items():
        prefix, _, position = key.partition("/")
        if prefix != "mutation.webhook.admission.k8s.io" or not position.startswith("round_"):
            continue
        _, round_number, _, index = position.split("_")
        with contextlib.suppress(ValueError, AttributeError):
            calls.append((int(round_number), int(index), str(json.loads(value).get("webhook"))))
    return [name for _, _, name in sorted(calls)]


def tasgate_called(event: Mapping[str, Any]) -> bool:
    """Whether the API server called tasgate's mutating webhook for this request."""
    return MUTATE in mutating_webhooks_called(event)


def live_summary(notes: Mapping[str, str]) -> str:
    """``allow/fits``: tasgate's decision and reason code from its audit annotations."""
    return f"{notes.get('decision')}/{notes.get('reason')}"


def tasgate_denial(event: Mapping[str, Any]) -> str | None:
    """The message when one of tasgate's webhooks denied this request, else None."""
    status = event.get("responseStatus") or {}
    message = str(status.get("message") or "")
    for webhook in (MUTATE, VALIDATE):
        if f'admission webhook "{webhook}" denied' in message:
            return message
    return None
