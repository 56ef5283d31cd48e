"""The documentation is the code's: generated tables equal their sources, links resolve, and the
README stays a short front page whose table of contents is its headings."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bench import summary
from webhook.decide.policy import PolicyError
from webhook.decide.policy_text import parse_policy
from webhook.decide.reasons import MEANING, Reason, reason_table

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
DOCS = REPO / "docs"
README_MAX_LINES = 250
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _between(text: str, start: str, end: str) -> str:
    assert start in text and end in text, f"markers {start!r} … {end!r} are missing"
    return text[text.index(start) + len(start) : text.index(end)]


def test_every_reason_has_a_meaning() -> None:
    assert set(MEANING) == set(Reason)


def test_reason_table_is_generated_from_the_enum() -> None:
    documented = _between(
        (DOCS / "reasons.md").read_text(), "<!-- reasons:start -->\n", "\n<!-- reasons:end -->"
    )
    assert documented == reason_table(), "regenerate docs/reasons.md's table from webhook.decide.reasons"


def test_readme_performance_table_is_generated_from_the_bench_summary() -> None:
    """The figures are make bench's, not typed by hand: bench/summary.json renders the table."""
    figures = json.loads((REPO / "bench" / "summary.json").read_text())
    shown = _between(README.read_text(), summary.START + "\n", "\n" + summary.END)
    assert shown == summary.table(figures), "run python bench/summary.py --write-readme"


def test_readme_is_short() -> None:
    lines = README.read_text().count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines: move detail into docs/"


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def _headings(text: str) -> list[tuple[int, str]]:
    body = re.sub(r"```.*?```", "", text, flags=re.S)
    return [(len(m.group(1)), m.group(2)) for m in re.finditer(r"^(#{1,6}) (.+)$", body, re.M)]


def test_readme_table_of_contents_is_its_sections_in_order() -> None:
    text = README.read_text()
    toc = _between(text, "<!-- toc -->\n", "<!-- toc-end -->")
    listed = re.findall(r"^- \[(.+?)\]\(#([^)]+)\)$", toc, re.M)
    sections = [h for level, h in _headings(text) if level == 2]
    assert [name for name, _ in listed] == sections
    assert [anchor for _, anchor in listed] == [slug(h) for h in sections]


def _markdown_files() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


@pytest.mark.parametrize("page", _markdown_files(), ids=lambda p: p.name)
def test_every_relative_link_resolves(page: Path) -> None:
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        assert file.exists(), f"{page.name}: link to {target} names no file"
        if anchor and file.suffix == ".md":
            anchors = {slug(h) for _, h in _headings(file.read_text())}
            assert anchor in anchors, f"{page.name}: {target} names no heading of {file.name}"


def test_every_page_of_docs_is_linked_from_the_readme() -> None:
    linked = {(README.parent / t.partition("#")[0]).resolve() for t in LINK.findall(README.read_text())}
    unlinked = [p.name for p in DOCS.glob("*.md") if p.resolve() not in linked]
    assert not unlinked, f"docs not reachable from the README: {unlinked}"


def test_shipped_policy_in_the_docs_is_the_default_file() -> None:
    documented = _between(
        (DOCS / "policy.md").read_text(), "<!-- policy:start -->\n```yaml\n", "```\n<!-- policy:end -->"
    )
    assert documented == (REPO / "webhook" / "data" / "default-policy.yaml").read_text()


# Where an unknown field is planted to make the loader list the fields it allows at that path.
POLICY_PATHS = {
    "spec": "spec: {zz: 1}",
    "rules": "spec: {rules: [{zz: 1}]}",
    "match": "spec: {rules: [{match: {zz: 1}}]}",
    "inject": "spec: {rules: [{inject: {zz: 1}}]}",
    "gang": "spec: {rules: [{gang: {zz: 1}}]}",
    "defaultTopology": "spec: {defaultTopology: {name: d, zz: 1}}",
    "gangShapes": "spec: {gangShapes: [{zz: 1}]}",
}


def _documented_fields(table: str) -> set[str]:
    rows = [line for line in table.splitlines() if line.startswith("| `") and "." not in line.split("|")[1]]
    return {name for row in rows for name in re.findall(r"`([A-Za-z]+)`", row.split("|")[1])}


@pytest.mark.parametrize("where", sorted(POLICY_PATHS))
def test_policy_reference_lists_exactly_the_fields_the_loader_accepts(where: str) -> None:
    doc = f"apiVersion: tasgate.io/v1alpha1\nkind: AdmissionPolicy\n{POLICY_PATHS[where]}\n"
    with pytest.raises(PolicyError, match="allowed: ") as err:
        parse_policy(doc, "p")
    accepted = set(str(err.value).split("allowed: ")[1].split(", "))
    text = (DOCS / "policy.md").read_text()
    table = text.split(f"<!-- policy-fields:{where} -->\n")[1].split("\n\n")[0]
    assert _documented_fields(table) == accepted
