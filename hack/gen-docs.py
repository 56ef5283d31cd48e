#!/usr/bin/env python3
"""Write the documentation tables that have a source in the code, so they cannot drift from it.

- The cluster dump commands (README.md, docs/cli.md, docs/install.md, between
  ``<!-- dump:start -->`` and ``<!-- dump:end -->``): made from the kinds ``tasgate check --live``
  lists (``webhook.cli.dump``).
- The Helm values table (docs/install.md, between ``<!-- values:start -->`` and
  ``<!-- values:end -->``): a row per leaf of ``charts/tasgate/values.schema.json`` in its order,
  its default from ``values.yaml``, what it accepts from the schema, and what it does from the
  comment above it in ``values.yaml``, with ``NOTES`` for what a comment does not say.
- The Datadog tables (docs/monitoring.md, between ``<!-- datadog:start -->`` and
  ``<!-- datadog:end -->``): every metric and service check the Datadog Agent's openmetrics check
  sent from a live tasgate, read from ``tests/webhook/fixtures/datadog-check.json``, which
  ``tests/webhook/test_datadog_check.py`` keeps equal to a run of that check (this script starts no
  server: the fixture is the run's record).

``.venv/bin/python hack/gen-docs.py`` rewrites the files; ``--check`` only says which differ (exit 1).
``tests/webhook/test_generated_docs.py`` fails when a committed text is not what this writes.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from webhook.cli.dump import dump_block

REPO = Path(__file__).resolve().parents[1]
CHART = REPO / "charts" / "tasgate"
DUMP = ("<!-- dump:start -->\n", "\n<!-- dump:end -->")
VALUES = ("<!-- values:start -->\n", "\n<!-- values:end -->")
DATADOG = ("<!-- datadog:start -->\n", "\n<!-- datadog:end -->")
DATADOG_CHECK = REPO / "tests" / "webhook" / "fixtures" / "datadog-check.json"
TARGETS = {
    "README.md": (DUMP,),
    "docs/cli.md": (DUMP,),
    "docs/install.md": (DUMP, VALUES),
    "docs/monitoring.md": (DATADOG,),
}
# What a value does, where values.yaml has no comment above it, or its comment leaves out
# something a person installing must know (appended to the comment).
NOTES = {
    "imagePullSecrets": "for a private registry",
    "priorityClassQuota.enabled": "a ResourceQuota scoped to `priorityClassName` (needed on GKE): "
    "see [Priority class](#priority-class-and-the-resourcequota-caveat)",
    "policy": "A gang backend (Coscheduling, Volcano) gets its label and PodGroup, never "
    "`spec.schedulerName`: the pods meet their gang only under the scheduler that runs the "
    "plugin (`volcano`, or the scheduler-plugins scheduler unless Coscheduling is built into the "
    "default one), so set `schedulerName` in the pod templates; without it they never meet their gang",
    "certificates.tlsCrt": "`provided`: the serving certificate, PEM (`--set-file`)",
    "certificates.tlsKey": "`provided`: its key, PEM (`--set-file`)",
    "certificates.caCrt": "`provided`: the CA the API server trusts, PEM (`--set-file`)",
    "webhooks.timeoutSeconds": "the API server's timeout for one review; tasgate answers at 80% of it",
    "nodeSelector": "for tasgate's pods",
    "tolerations": "for tasgate's pods",
    "monitoring.dashboard": 'the Grafana dashboard ConfigMap (label `grafana_dashboard: "1"`), in '
    "tasgate's namespace: Grafana's dashboard sidecar loads it only if its `searchNamespace` reaches "
    "`tasgate-system` (`ALL`, or a list naming it; the Grafana chart's default is Grafana's own namespace)",
}


def values_table(schema: Mapping[str, Any], values_text: str) -> str:
    defaults = yaml.safe_load(values_text)
    comments = yaml_comments(values_text)
    rows = ["| value | default | accepts | what |", "|---|---|---|---|"]
    for key, spec in leaves(schema):
        default = _lookup(defaults, key)
        what = " ".join(x for x in (comments.get(key, ""), NOTES.get(key, "")) if x)
        rows.append(f"| `{key}` | {_default(default)} | {accepts(spec)} | {_cell(what)} |")
    return "\n".join(rows)


def leaves(schema: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every settable value, dotted, in the schema's order: an object with properties is not one."""
    for name, spec in schema.get("properties", {}).items():
        key = f"{prefix}{name}"
        if "properties" in spec:
            yield from leaves(spec, f"{key}.")
        else:
            yield key, spec


def yaml_comments(text: str) -> dict[str, str]:
    """The ``#`` lines right above each key of a values file (no blank line between), joined."""
    found: dict[str, str] = {}
    block: list[str] = []
    stack: list[tuple[int, str]] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            block.append(stripped.lstrip("#").strip())
            continue
        key = re.match(r"^( *)([A-Za-z][\w-]*):", line)
        if key is not None:
            indent = len(key.group(1))
            stack = [(i, k) for i, k in stack if i < indent] + [(indent, key.group(2))]
            if block:
                found[".".join(k for _, k in stack)] = " ".join(" ".join(block).split())
        block = []
    return found


def accepts(spec: Mapping[str, Any]) -> str:
    if "enum" in spec:
        return ", ".join(f"`{v}`" if v != "" else '`""`' for v in spec["enum"])
    kind = spec.get("type", "any")
    words = {"integer": "integer", "number": "number", "boolean": "`true`, `false`", "string": "string"}
    text: str = {"object": "map", "array": "list"}.get(kind, words.get(kind, kind))
    bounds = [
        f"{sign} {spec[name]}"
        for name, sign in (
            ("minimum", "≥"),
            ("exclusiveMinimum", ">"),
            ("maximum", "≤"),
            ("minLength", "length ≥"),
        )
        if name in spec
    ]
    if spec.get("minItems"):
        bounds.append(f"at least {spec['minItems']}")
    if "pattern" in spec:
        bounds.append(f"matching `{spec['pattern']}`")
    return text + (f" ({', '.join(bounds)})" if bounds else "")


def _lookup(values: Any, key: str) -> Any:
    for part in key.split("."):
        values = values.get(part) if isinstance(values, Mapping) else None
    return values


def _default(value: Any) -> str:
    if value == "":
        return '`""`'
    if isinstance(value, list) and all(isinstance(v, str) and ", " not in v for v in value):
        return f"`[{', '.join(value)}]`"  # as a person writes it in values.yaml, unquoted
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000, sort_keys=False).strip()
    return f"`{text.removesuffix('...').strip()}`"


def datadog_tables(sent: Mapping[str, Any]) -> str:
    """The metrics (name, Datadog type, tag names) and the service checks (status while tasgate is
    ready and while it is not, tag names) the Agent's check sent, as recorded in ``sent``."""
    rows = ["| Datadog metric | type | tags |", "|---|---|---|"]
    for name, spec in sorted(sent["metrics"].items()):
        rows.append(f"| `{name}` | {spec['type']} | {_names(spec['tags'])} |")
    rows += ["", "| service check | ready | not ready | tags |", "|---|---|---|---|"]
    for name, spec in sorted(sent["service_checks"].items()):
        rows.append(f"| `{name}` | {spec['ready']} | {spec['not ready']} | {_names(spec['tags'])} |")
    return "\n".join(rows)


def _names(tags: list[str]) -> str:
    return ", ".join(f"`{tag}`" for tag in tags)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def generated(text: str, markers: tuple[str, str], body: str) -> str:
    """``text`` with ``body`` between every pair of ``markers`` (there must be one), indented as
    the start marker is (inside a list item the block belongs to the item)."""
    start, end = (m.strip() for m in markers)
    pair = re.compile(rf"^( *){re.escape(start)}\n.*?^\1{re.escape(end)}$", re.S | re.M)
    if not pair.search(text):
        raise SystemExit(f"markers {start} … {end} are missing")

    def filled(found: re.Match[str]) -> str:
        indent = found.group(1)
        inner = "\n".join(indent + line if line else line for line in body.split("\n"))
        return f"{indent}{start}\n{inner}\n{indent}{end}"

    return pair.sub(filled, text)


def bodies() -> dict[tuple[str, str], str]:
    schema = json.loads((CHART / "values.schema.json").read_text())
    return {
        DUMP: dump_block(),
        VALUES: values_table(schema, (CHART / "values.yaml").read_text()),
        DATADOG: datadog_tables(json.loads(DATADOG_CHECK.read_text())),
    }


def expected(path: str) -> str:
    text = (REPO / path).read_text()
    made = bodies()
    for markers in TARGETS[path]:
        text = generated(text, markers, made[markers])
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only report the files that differ")
    args = parser.parse_args()
    differ = [path for path in TARGETS if expected(path) != (REPO / path).read_text()]
    if args.check:
        for path in differ:
            print(f"{path}: differs from what hack/gen-docs.py writes", file=sys.stderr)
        return 1 if differ else 0
    for path in differ:
        (REPO / path).write_text(expected(path))
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
