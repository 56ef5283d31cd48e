"""The README's sample output is the code's: regenerated here, and a drift fails."""

from __future__ import annotations

import os
import re
import subprocess

from tests.webhook.conftest import REPO, TASGATE

START, END = "<!-- sample:check -->\n", "<!-- sample:end -->"


def test_readme_check_sample_is_what_tasgate_prints() -> None:
    text = (REPO / "README.md").read_text()
    block = text[text.index(START) + len(START) : text.index(END)]
    command = re.search(r"^\$ tasgate (.+)$", block, re.M)
    assert command is not None
    args = command.group(1).split()
    env = {**os.environ, "COLUMNS": "200"}
    run = subprocess.run(
        [str(TASGATE), *args], cwd=REPO, env=env, capture_output=True, text=True, check=False
    )
    want = f"```\n$ tasgate {command.group(1)}\n{run.stdout}```\n"
    assert block == want, "the README sample drifted: paste what the command prints now"
