"""`tasgate test -o junit|json`: the suites' results for a CI system, not a person, to read.

JUnit XML is what GitLab, Jenkins, GitHub's test reporters and Tekton read: one ``testsuite`` per
suite document, one ``testcase`` per case, a ``failure`` with what differed, and a suite that
could not run as one ``testcase`` with an ``error`` (so a broken suite is never a green report).
The JSON document (``kind: TestReport``) carries the same facts for a script.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

API_VERSION = "tasgate.io/v1"
REPORT_KIND = "TestReport"


@dataclass(frozen=True)
class CaseRun:
    label: str  # "suite / case", as the text output prints it
    manifest: str
    problems: tuple[str, ...]
    seconds: float

    @property
    def passed(self) -> bool:
        return not self.problems


@dataclass(frozen=True)
class SuiteRun:
    name: str
    file: str
    cases: tuple[CaseRun, ...]
    error: str = ""  # why the suite could not run at all

    def case_name(self, case: CaseRun) -> str:
        prefix = f"{self.name} / "
        return case.label[len(prefix) :] if case.label.startswith(prefix) else case.label


def write(runs: Sequence[SuiteRun], output: str) -> None:
    sys.stdout.write(junit(runs) if output == "junit" else json_text(runs))


def junit(runs: Sequence[SuiteRun]) -> str:
    root = ET.Element("testsuites", {"name": "tasgate test", **_counts(runs)})
    for run in runs:
        suite = ET.SubElement(root, "testsuite", {"name": run.name, "file": run.file, **_counts([run])})
        if run.error:
            case = ET.SubElement(suite, "testcase", name="(the suite)", classname=run.name, file=run.file)
            ET.SubElement(case, "error", message=run.error, type="SuiteError").text = run.error
        for c in run.cases:
            case = ET.SubElement(
                suite, "testcase", name=run.case_name(c), classname=run.name, file=run.file,
                time=f"{c.seconds:.3f}",
            )  # fmt: skip
            if c.problems:
                text = "; ".join(c.problems)
                ET.SubElement(case, "failure", message=text, type="ExpectationFailed").text = text
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _counts(runs: Sequence[SuiteRun]) -> dict[str, str]:
    cases = [c for r in runs for c in r.cases]
    errors = sum(1 for r in runs if r.error)
    return {
        "tests": str(len(cases) + errors),
        "failures": str(sum(1 for c in cases if not c.passed)),
        "errors": str(errors),
        "time": f"{sum(c.seconds for c in cases):.3f}",
    }


def report(runs: Sequence[SuiteRun]) -> dict[str, Any]:
    cases = [c for r in runs for c in r.cases]
    return {
        "apiVersion": API_VERSION,
        "kind": REPORT_KIND,
        "summary": {
            "passed": sum(1 for c in cases if c.passed),
            "failed": sum(1 for c in cases if not c.passed),
            "errors": sum(1 for r in runs if r.error),
        },
        "suites": [
            {
                "name": r.name,
                "file": r.file,
                "error": r.error or None,
                "cases": [
                    {
                        "name": r.case_name(c),
                        "manifest": c.manifest,
                        "result": "pass" if c.passed else "fail",
                        "problems": list(c.problems),
                        "seconds": round(c.seconds, 3),
                    }
                    for c in r.cases
                ],
            }
            for r in runs
        ],
    }


def json_text(runs: Sequence[SuiteRun]) -> str:
    return orjson.dumps(report(runs), option=orjson.OPT_INDENT_2).decode() + "\n"
