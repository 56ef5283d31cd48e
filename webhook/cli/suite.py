"""`tasgate test`: policy test suites, as ``kyverno test`` runs them for Kyverno policies.

A suite is a YAML document ``apiVersion: tasgate.io/v1alpha1, kind: Test`` with an optional
``state`` (files, relative to the suite; default the embedded sample cluster), a ``policy``
(``default``, ``none`` or a file) and ``cases``: each a ``manifest`` file and what to
``expect`` of it: ``outcome`` (admitted, waits, denied, not-checked), and optionally ``reason``,
``messageContains``, ``warningContains`` and ``injects`` (annotation/label keys the patch adds).
Every case prints one line; the run ends with ``N passed, M failed`` and exits 1 on a failure.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from webhook.cli.check import Result, check_all
from webhook.decide.patch import added_keys
from webhook.files.loader import LoadError, load, load_each
from webhook.files.policy import load_policy
from webhook.files.sources import cluster_state

API_VERSION = "tasgate.io/v1alpha1"
EXPECT_KEYS = frozenset({"outcome", "reason", "messageContains", "warningContains", "injects"})


def run(args: argparse.Namespace) -> int:
    passed = failed = 0
    for suite_path, suite in _suites(args.paths):
        for line, ok in _run_suite(suite_path, suite):
            print(line)
            passed, failed = passed + ok, failed + (not ok)
    if passed + failed == 0:
        raise LoadError(
            "no test cases found (a suite is a document with apiVersion tasgate.io/v1alpha1, kind Test)"
        )
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


def _suites(paths: list[str]) -> Iterator[tuple[Path, Mapping[str, Any]]]:
    for doc in load(paths):
        if doc.obj.get("apiVersion") == API_VERSION and doc.obj.get("kind") == "Test":
            yield Path(doc.source.split(" (document", 1)[0]), doc.obj


def _run_suite(path: Path, suite: Mapping[str, Any]) -> Iterator[tuple[str, bool]]:
    name = str((suite.get("metadata") or {}).get("name") or path.name)
    base = path.parent
    state_files = [str(base / f) for f in suite.get("state") or []]
    state = cluster_state(state_files or None)
    policy_ref = str(suite.get("policy") or "default")
    policy = load_policy(policy_ref if policy_ref in ("default", "none") else str(base / policy_ref))
    for i, case in enumerate(suite.get("cases") or []):
        label = f"{name} / {case.get('name') or i}"
        results = check_all(load_each([str(base / str(case.get("manifest", "")))]), state, policy, "default")
        problems = _problems(results, case.get("expect") or {})
        yield (f"PASS {label}" if not problems else f"FAIL {label}: {'; '.join(problems)}"), not problems


def _problems(results: list[Result], expect: Mapping[str, Any]) -> list[str]:
    unknown = set(expect) - EXPECT_KEYS
    if unknown:
        return [f"unknown expectation(s) {sorted(unknown)}"]
    if len(results) != 1:
        return [f"the manifest must hold exactly one workload, found {len(results)}"]
    (r,) = results
    if r.decision is None:
        return [f"error: {r.error}"]
    d, out = r.decision, []
    if "outcome" in expect and r.outcome != expect["outcome"]:
        out.append(f"outcome {r.outcome}, expected {expect['outcome']}")
    if "reason" in expect and d.reason.value != expect["reason"]:
        out.append(f"reason {d.reason.value}, expected {expect['reason']}")
    if "messageContains" in expect and str(expect["messageContains"]) not in d.message:
        out.append(f"message {d.message!r} lacks {expect['messageContains']!r}")
    if "warningContains" in expect and not any(str(expect["warningContains"]) in w for w in d.warnings):
        out.append(f"no warning contains {expect['warningContains']!r}")
    added = {k for op in d.patch for k in added_keys(op)}
    for key in expect.get("injects") or []:
        if key not in added:
            out.append(f"the patch adds no {key}")
    return out
