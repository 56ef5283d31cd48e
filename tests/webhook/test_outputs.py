"""Every `tasgate check -o` format for every outcome, through the real ``main()`` and argparse.

Each run checks one workload whose outcome is known, and asserts what the format promises and
the exit code of the contract (``check.exit_code``): 0 unless an outcome listed in ``--fail-on``
occurred (1), 2 on unreadable input. ``-o yaml`` is the ``-o json`` document, value for value.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.webhook.conftest import COSCHED_LABEL, MANIFESTS, REPO
from webhook.cli import output
from webhook.cli.main import main
from webhook.cli.render import VERDICT

EXAMPLES = REPO / "examples"
# outcome -> (manifest, reason code); the error's manifest is a file that is not there.
CASES: dict[str, tuple[Path, str | None]] = {
    "admitted": (EXAMPLES / "job-rack.yaml", "fits"),
    "waits": (EXAMPLES / "pytorchjob-waits.yaml", "waits"),
    "denied": (EXAMPLES / "jobset-never-fits.yaml", "never-fits"),
    "not-checked": (MANIFESTS / "unknown-kind.yaml", "unknown-kind"),
    "error": (MANIFESTS / "no-such-manifest.yaml", None),
}
STRICT = "denied,waits,unchecked"
EXIT = {  # --fail-on -> outcome -> exit code
    "denied": {"admitted": 0, "waits": 0, "denied": 1, "not-checked": 0, "error": 2},
    STRICT: {"admitted": 0, "waits": 1, "denied": 1, "not-checked": 1, "error": 2},
}
JUDGED = ("admitted", "waits", "denied")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["check", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def summary_line(outcome: str) -> str:
    n = {o: int(o == outcome) for o in CASES}
    return (
        f"checked {sum(n[o] for o in JUDGED)}: {n['admitted']} admitted, {n['waits']} waits, "
        f"{n['denied']} denied; {n['not-checked']} not checked; "
        f"{n['error']} error{'' if n['error'] == 1 else 's'}"
    )


def test_the_formats_are_the_ones_argparse_offers() -> None:
    assert output.FORMATS == ("text", "json", "yaml", "patched")


@pytest.mark.parametrize("fail_on", list(EXIT))
@pytest.mark.parametrize("outcome", list(CASES))
@pytest.mark.parametrize("fmt", output.FORMATS)
def test_every_output_of_every_outcome(
    capsys: pytest.CaptureFixture[str], fmt: str, outcome: str, fail_on: str
) -> None:
    manifest, reason = CASES[outcome]
    code, out, err = run(capsys, "-f", str(manifest), "-o", fmt, "--fail-on", fail_on)
    assert code == EXIT[fail_on][outcome], (out, err)
    assert "Traceback" not in out + err
    if fmt == "text":
        _text(out, outcome, reason)
    elif fmt == "json":
        _report(json.loads(out), outcome, reason)
    elif fmt == "yaml":
        document = yaml.safe_load(out)
        _report(document, outcome, reason)
        same = run(capsys, "-f", str(manifest), "-o", "json", "--fail-on", fail_on)
        assert document == json.loads(same[1]), "-o yaml is the -o json document"
    else:
        _patched(out, err, outcome, manifest)


def _text(out: str, outcome: str, reason: str | None) -> None:
    lines = out.splitlines()
    assert lines[-1] == summary_line(outcome)
    if reason is None:
        assert lines[0].startswith("ERROR ") and "no such file or directory" in lines[1]
    else:
        assert f": {VERDICT[outcome]} ({reason})  [" in lines[0]


def _report(document: dict[str, Any], outcome: str, reason: str | None) -> None:
    assert (document["apiVersion"], document["kind"]) == ("tasgate.io/v1", "CheckReport")
    wanted = {o: int(o == outcome) for o in CASES}
    assert document["summary"] == {
        "checked": sum(wanted[o] for o in JUDGED),
        "admitted": wanted["admitted"],
        "waits": wanted["waits"],
        "denied": wanted["denied"],
        "notChecked": wanted["not-checked"],
        "errors": wanted["error"],
    }
    (result,) = document["results"]
    assert result["outcome"] == outcome
    if reason is None:
        assert "no such file or directory" in result["error"]
    else:
        assert (result["reason"], result["allowed"]) == (reason, outcome != "denied")
        assert result["auditAnnotations"]["reason"] == reason


def _patched(out: str, err: str, outcome: str, manifest: Path) -> None:
    docs = [d for d in yaml.safe_load_all(out) if d is not None]
    assert err.splitlines()[-1] == summary_line(outcome), "the summary goes to stderr"
    if outcome == "error":
        assert docs == [] and f"tasgate: error: {manifest}: no such file or directory" in err
        return
    original = yaml.safe_load(manifest.read_text())
    if outcome == "denied":  # the API server would never store it: piped to kubectl, never applied
        assert docs == [], "a denied object is not printed"
        kind, name = original["kind"], original["metadata"]["name"]
        assert f"tasgate: left out {kind} default/{name} [{manifest} (document 1)]: denied" in err
        return
    (obj,) = docs
    assert (obj["kind"], obj["metadata"]["name"]) == (original["kind"], original["metadata"]["name"])
    if outcome == "admitted":
        assert obj["spec"]["template"]["metadata"]["labels"][COSCHED_LABEL] == "resnet-rack"
    if outcome == "not-checked":
        assert obj == original, "nothing is injected into what is not judged"
