"""`tasgate test`: policy test suites, as ``kyverno test`` runs them for Kyverno policies.

A suite is a YAML document ``apiVersion: tasgate.io/v1alpha1, kind: Test`` with an optional
``state`` (a file or a list of them, relative to the suite; default the embedded sample cluster),
a ``policy`` (``default``, ``none`` or a file) and ``cases``: each a ``manifest`` file and what to
``expect`` of it: ``outcome`` (admitted, waits, denied, not-checked), and optionally ``reason``,
``messageContains``, ``warningContains`` and ``injects`` (annotation/label keys the patch adds).
Every case prints one line. A suite that cannot be run (a bad shape, an unreadable state or
policy: ``suite_doc``) prints one ``ERROR`` line and the other suites still run. The run ends with
``N passed, M failed`` (and how many suites could not run) and exits 1 on a failure, 2 when a
suite could not run (unreadable input, as in `tasgate check`). ``-o junit`` and ``-o json`` print
the same results for a CI system to read (``suite_report``), the summary line then on stderr.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from webhook.cli.check import Result, check_all
from webhook.cli.inputs import failure_text
from webhook.cli.sources import checkable
from webhook.cli.suite_doc import Case, Suite, SuiteError, is_suite, read_suite
from webhook.cli.suite_report import CaseRun, SuiteRun, write
from webhook.decide.messages import plural
from webhook.decide.patch import added_keys
from webhook.decide.policy import Policy, PolicyError
from webhook.files.loader import Document, LoadError, load_each
from webhook.files.policy import load_policy
from webhook.files.sources import cluster_state
from webhook.state.cluster import ClusterState
from webhook.wire.errors import BadRequest, InvalidObject

EXPECT_KEYS = frozenset({"outcome", "reason", "messageContains", "warningContains", "injects"})
EXIT_OK, EXIT_FAILED, EXIT_ERROR = 0, 1, 2
# What makes one suite unrunnable, not the whole run.
SUITE_ERRORS = (SuiteError, LoadError, PolicyError, InvalidObject, BadRequest)


FORMATS = ("text", "json", "junit")


@dataclass
class Tally:
    passed: int = 0
    failed: int = 0
    errors: int = 0

    def line(self) -> str:
        unrun = f", {plural(self.errors, 'suite')} could not run" if self.errors else ""
        return f"{self.passed} passed, {self.failed} failed{unrun}"

    def code(self) -> int:
        return EXIT_ERROR if self.errors else EXIT_FAILED if self.failed else EXIT_OK


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths", nargs="+", metavar="DIR|FILE", help="suite files, or directories holding them"
    )
    parser.add_argument(
        "-o", "--output", choices=FORMATS, default="text",
        help="text: a line per case; junit: JUnit XML for a CI system; json: a TestReport document",
    )  # fmt: skip
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    tally, runs = Tally(), []
    text = getattr(args, "output", "text") == "text"
    for source, found in _suites(args.paths):
        done = _run_suite(source, found)
        runs.append(done)
        if done.error:
            tally.errors += 1
        for case in done.cases:
            tally.passed, tally.failed = tally.passed + case.passed, tally.failed + (not case.passed)
        if text:
            print("\n".join(_lines(done)))
    if not (tally.passed or tally.failed or tally.errors):
        raise LoadError(
            "no test cases found (a suite is a document with apiVersion tasgate.io/v1alpha1, kind Test)"
        )
    if not text:
        write(runs, args.output)
    print(tally.line(), file=sys.stdout if text else sys.stderr)
    return tally.code()


def _run_suite(source: str, found: Document | str) -> SuiteRun:
    """One suite's cases run, or why it could not run (an unreadable file's message names it)."""
    file = source.split(" (document", 1)[0]
    try:
        suite, state, policy = _prepare(source, found)
    except SUITE_ERRORS as exc:
        why = f"{exc}" if isinstance(found, str) else f"{source}: {exc}"
        return SuiteRun(source, file, (), why)
    cases = []
    for case in suite.cases:
        start = time.perf_counter()
        problems = _run_case(case, state, policy)
        cases.append(CaseRun(case.label, case.manifest, tuple(problems), time.perf_counter() - start))
    return SuiteRun(suite.name, file, tuple(cases))


def _lines(done: SuiteRun) -> list[str]:
    if done.error:
        return [f"ERROR {done.error}"]
    return [f"PASS {c.label}" if c.passed else f"FAIL {c.label}: {'; '.join(c.problems)}" for c in done.cases]


def _suites(paths: list[str]) -> Iterator[tuple[str, Document | str]]:
    """(where, suite document) per suite found, or (where, why) per input that cannot be read."""
    for item in load_each(paths):
        if not isinstance(item, Document):
            yield item.source, failure_text(item)
        elif is_suite(item.obj):
            yield item.source, item


def _prepare(source: str, found: Document | str) -> tuple[Suite, ClusterState, Policy]:
    if isinstance(found, str):
        raise LoadError(found)
    suite = read_suite(Path(source.split(" (document", 1)[0]), found.obj)
    policy = load_policy(suite.policy)
    try:
        state = cluster_state(suite.state or None)
    except LoadError as exc:
        raise LoadError(f"state: {exc}") from None
    where = f"state {', '.join(suite.state)}" if suite.state else "the sample cluster"
    return suite, checkable(state, where), policy


def _run_case(case: Case, state: ClusterState, policy: Policy) -> list[str]:
    return _problems(check_all(load_each([case.manifest]), state, policy, "default"), case.expect)


def _problems(results: list[Result], expect: Mapping[str, Any]) -> list[str]:
    unknown = set(expect) - EXPECT_KEYS
    if unknown:
        return [f"unknown expectation{'s' if len(unknown) > 1 else ''} {sorted(unknown)}"]
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
    out += [f"the patch adds no {key}" for key in expect.get("injects") or [] if key not in added]
    return out
