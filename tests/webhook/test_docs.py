"""The README's reason table is the code's: generated from the one Reason enum."""

from __future__ import annotations

from pathlib import Path

from webhook.decide.reasons import MEANING, Reason, reason_table

README = Path(__file__).resolve().parents[2] / "README.md"


def test_every_reason_has_a_meaning() -> None:
    assert set(MEANING) == set(Reason)


def test_readme_reason_table_is_generated_from_the_enum() -> None:
    text = README.read_text()
    start, end = "<!-- reasons:start -->\n", "\n<!-- reasons:end -->"
    assert start in text and end in text
    documented = text[text.index(start) + len(start) : text.index(end)]
    assert documented == reason_table(), "regenerate the README table from webhook.decide.reasons"
