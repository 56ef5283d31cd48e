"""The admission log: one JSON line per decision, the record auditors and log pipelines read.

The schema is documented in the README ("Audit log"); keep the two in step.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TextIO

import orjson

from webhook.decide.messages import request_summary
from webhook.decide.policy import DEFAULT_GPU_RESOURCES
from webhook.decide.review import Outcome
from webhook.wire.admission import AdmissionRequest

SCHEMA = "tasgate.io/audit/v1"


def audit_record(
    req: AdmissionRequest, outcome: Outcome, endpoint: str, latency_us: int, generation: int | None
) -> dict[str, Any]:
    d = outcome.decision
    pod_sets = []
    for v in d.pod_sets if d else ():
        level = v.request.level or ""
        row = v.never.level_row(level) if v.never else None
        best = row.best_domain if row else None
        pod_sets.append(
            {
                "name": v.name,
                "count": v.count,
                "requests": request_summary(v.requests, DEFAULT_GPU_RESOURCES),
                "mode": v.request.mode.value,
                "level": level or None,
                "injected": v.injected,
                "fitsNow": bool(v.now and v.now.fits),
                "fitsWhenEmpty": bool(v.never and v.never.fits),
                "bestDomain": "/".join(best) if best else None,
            }
        )
    return {
        "schema": SCHEMA,
        "time": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "uid": req.uid,
        "endpoint": endpoint,
        "operation": req.operation,
        "user": req.user,
        "kind": req.kind,
        "namespace": req.namespace,
        "name": req.name or (d.name if d else ""),
        "dryRun": req.dry_run,
        "allowed": outcome.allowed,
        "decision": "allow" if outcome.allowed else "deny",
        "reason": outcome.reason,
        "message": outcome.message,
        "warnings": list(outcome.warnings),
        "podSets": pod_sets,
        "topology": d.topology if d else None,
        "queue": d.queue if d else None,
        "clusterQueue": d.cluster_queue if d else None,
        "generation": generation,
        "latencyMicros": latency_us,
    }


def line_writer(stream: TextIO) -> Callable[[dict[str, Any]], None]:
    """Write records as single JSON lines, flushed, so a crash loses at most the current one."""

    def write(record: dict[str, Any]) -> None:
        stream.write(orjson.dumps(record).decode() + "\n")
        stream.flush()

    return write
