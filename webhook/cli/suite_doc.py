"""A `tasgate test` suite document, read into what it asks before any of its cases runs.

Every file a suite names (``state``, ``policy``, each case's ``manifest``) is relative to the suite
file. ``state`` is one file or directory or a list of them (the spelling a person reaches for
first, ``state: ../cluster.yaml``, is as good as a list); ``policy`` is ``default``, ``none`` or a
file, also as a one-item list. A field of the wrong shape, an unknown field (a misspelt ``cases``
would otherwise leave a suite that tests nothing) or a suite without cases is a ``SuiteError``
naming the field: that suite is not run, the others are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

API_VERSION = "tasgate.io/v1alpha1"
SUITE_KEYS = ("apiVersion", "kind", "metadata", "state", "policy", "cases")
CASE_KEYS = ("name", "manifest", "expect")
POLICY_KEYWORDS = ("default", "none")


class SuiteError(Exception):
    """A suite that cannot be run as written; the message names the field."""


@dataclass(frozen=True)
class Case:
    label: str
    manifest: str  # resolved against the suite's directory
    expect: Mapping[str, Any]


@dataclass(frozen=True)
class Suite:
    name: str
    state: tuple[str, ...]  # resolved files or directories; () is the embedded sample cluster
    policy: str  # "default", "none" or a resolved file
    cases: tuple[Case, ...]


def is_suite(obj: Mapping[str, Any]) -> bool:
    return obj.get("apiVersion") == API_VERSION and obj.get("kind") == "Test"


def read_suite(path: Path, doc: Mapping[str, Any]) -> Suite:
    _known(doc, SUITE_KEYS, "")
    base = path.parent
    meta = doc.get("metadata") or {}
    if not isinstance(meta, Mapping):
        raise SuiteError(f"metadata: must be a mapping, got {_shape(meta)}")
    name = str(meta.get("name") or path.name)
    state = tuple(str(base / f) for f in _files(doc.get("state"), "state"))
    return Suite(name, state, _policy(doc.get("policy"), base), _cases(doc.get("cases"), base, name))


def _files(value: Any, field: str, what: str = "file name") -> list[str]:
    """A string or a list of them (``None``: none); never a string read a character at a time."""
    if value is None:
        return []
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
        raise SuiteError(f"{field}: must be a {what} or a list of them, got {_shape(value)}")
    return names


def _policy(value: Any, base: Path) -> str:
    names = _files(value, "policy") or ["default"]
    if len(names) != 1:
        raise SuiteError(f"policy: one policy per suite (default, none or a file), got {len(names)}")
    (name,) = names
    return name if name in POLICY_KEYWORDS else str(base / name)


def _cases(value: Any, base: Path, suite: str) -> tuple[Case, ...]:
    if not isinstance(value, list) or not value:
        raise SuiteError(f"cases: must be a non-empty list of cases, got {_shape(value)}")
    return tuple(_case(item, i, base, suite) for i, item in enumerate(value))


def _case(item: Any, index: int, base: Path, suite: str) -> Case:
    where = f"cases[{index}]"
    if not isinstance(item, Mapping):
        raise SuiteError(f"{where}: must be a mapping with manifest and expect, got {_shape(item)}")
    _known(item, CASE_KEYS, f"{where}.")
    manifest = item.get("manifest")
    if not isinstance(manifest, str) or not manifest:
        raise SuiteError(f"{where}.manifest: must be a file name, got {_shape(manifest)}")
    expect = item.get("expect")
    if not isinstance(expect, Mapping):
        raise SuiteError(f"{where}.expect: must be a mapping, got {_shape(expect)}")
    injects = expect.get("injects")
    if injects is not None:
        expect = {**expect, "injects": _files(injects, f"{where}.expect.injects", "key")}
    outcome = expect.get("outcome")
    if not isinstance(outcome, str) or not outcome:  # without one a case passes whatever happens
        got = _shape(outcome)
        raise SuiteError(f"{where}.expect.outcome: required (admitted, waits, denied …), got {got}")
    label = f"{suite} / {item.get('name') or index}"
    return Case(label, str(base / manifest), expect)


def _known(doc: Mapping[str, Any], keys: Sequence[str], prefix: str) -> None:
    unknown = sorted(str(k) for k in doc if k not in keys)
    if unknown:
        fields = ", ".join(f"{prefix}{k}" for k in unknown)
        raise SuiteError(f"unknown field(s) {fields}; the fields are {', '.join(keys)}")


def _shape(value: Any) -> str:
    """How a wrong value looks, short: its type, and the value when it is a scalar."""
    if isinstance(value, Mapping | list):
        return f"a {type(value).__name__} of {len(value)}"
    return "nothing" if value is None else f"{type(value).__name__} {value!r}"
