"""`tasgate check -o text|json|yaml|patched`: one writer per format, all from the same results.

The YAML document is the JSON document, converted: orjson writes the report once (enums as their
values, tuples as lists), and YAML is made from what it wrote, so the two can never disagree and
a type YAML cannot represent never reaches it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

import orjson
import yaml

from webhook.cli import check, render
from webhook.decide.patch import apply_entries
from webhook.state.rejected import Rejected

FORMATS = ("text", "json", "yaml", "patched")


def write(results: Sequence[check.Result], rejected: Sequence[Rejected], output: str) -> None:
    WRITERS[output](results, rejected)


def _text(results: Sequence[check.Result], rejected: Sequence[Rejected]) -> None:
    print(render.render(results))


def _json(results: Sequence[check.Result], rejected: Sequence[Rejected]) -> None:
    document = check.report(results, rejected)
    sys.stdout.write(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n")


def _yaml(results: Sequence[check.Result], rejected: Sequence[Rejected]) -> None:
    sys.stdout.write(yaml.safe_dump(_plain(check.report(results, rejected)), sort_keys=False))


def _patched(results: Sequence[check.Result], rejected: Sequence[Rejected]) -> None:
    """Only what the API server would store, as it would store it after the mutation, on stdout
    (a denied object is never stored: piped to ``kubectl apply`` it must not be applied); what
    was left out, and why, on stderr."""
    stored = [r for r in results if r.obj is not None and r.decision is not None and r.decision.allowed]
    patched = [apply_entries(r.obj, r.decision.patch) for r in stored if r.obj and r.decision]
    sys.stdout.write(yaml.safe_dump_all(patched, sort_keys=False))  # as read: YAML's own types
    for r in results:
        if r.outcome == "error":
            print(f"tasgate: error: {r.error}", file=sys.stderr)
        elif r.decision is not None and not r.decision.allowed:
            d = r.decision
            print(
                f"tasgate: left out {d.kind} {d.namespace}/{d.name} [{r.source}]: denied "
                f"({d.reason.value}), the API server would not store it",
                file=sys.stderr,
            )
    print(check.summary_line(results), file=sys.stderr)


def _plain(document: Any) -> Any:
    """Only what JSON has (str, int, float, bool, None, list, dict): what YAML can always write."""
    return orjson.loads(orjson.dumps(document))


WRITERS: dict[str, Callable[[Sequence[check.Result], Sequence[Rejected]], None]] = {
    "text": _text,
    "json": _json,
    "yaml": _yaml,
    "patched": _patched,
}
