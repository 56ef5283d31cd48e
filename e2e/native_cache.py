"""What the kube-scheduler's own cache holds, read from the scheduler itself.

A row is judged on a dump of the API server; the scheduler places it on its cache, which its pod
informer fills. Binding a sentinel pod shows its queue has seen every earlier pod, but the
informer delivers assigned and unassigned pods to separate handlers, each at its own pace, so a
sentinel cannot prove that the cache handler has removed the last row's pods. (Once, in CI, a
row was placed on the rack the last row had filled, as if its deleted pods were still cached.)

The scheduler's cache debugger (pkg/scheduler/backend/cache/debugger, v1.36.5) logs the whole
cache on SIGUSR2: ``"Dump of cached NodeInfo" nodes=<`` then, per node, ``Node name: X`` and
one ``name: P, namespace: N, uid: ...`` line per pod it holds there (then any ``Nominated Pods``),
closed by a lone ``>``. This module asks for that dump and reads it.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

DUMP_MARKER = '"Dump of cached NodeInfo" nodes=<'
DUMP_TIMEOUT = 10.0


def cached_pods(text: str) -> dict[str, str] | None:
    """The last complete cache dump in the log ``text``: "namespace/name" -> node; None without one."""
    start = text.rfind(DUMP_MARKER)
    if start < 0:
        return None
    placed: dict[str, str] = {}
    node, nominated = "", False
    for raw in text[start + len(DUMP_MARKER) :].splitlines():
        line = raw.strip()
        if line == ">":
            return placed
        if line.startswith("Node name: "):
            node, nominated = line.removeprefix("Node name: "), False
        elif line.startswith("Nominated Pods("):
            nominated = True
        elif line.startswith("name: ") and not nominated:
            fields = dict(part.split(": ", 1) for part in line.split(", ") if ": " in part)
            placed[f"{fields['namespace']}/{fields['name']}"] = node
    return None  # the dump is still being written


def scheduler_cache(pid: int, log: Path, timeout: float = DUMP_TIMEOUT) -> dict[str, str]:
    """Ask the scheduler ``pid`` for a cache dump and read it from its ``log`` once complete."""
    offset = log.stat().st_size
    os.kill(pid, signal.SIGUSR2)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with log.open("rb") as f:
            f.seek(offset)
            found = cached_pods(f.read().decode(errors="replace"))
        if found is not None:
            return found
        time.sleep(0.1)
    raise AssertionError(f"the scheduler wrote no cache dump within {timeout:g}s of SIGUSR2 (log {log})")
