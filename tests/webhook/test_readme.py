"""The README's sample output is the code's: regenerated here, and a drift fails."""

from __future__ import annotations

import json
import os
import re
import subprocess
from typing import Any

from tests.webhook.conftest import REPO, TASGATE
from webhook.files.policy import load_policy
from webhook.files.sample import sample_objects
from webhook.serve.app import create_app
from webhook.serve.keys import Settings, StateSource

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


REVIEW_START, REVIEW_END = "<!-- sample:review -->\n```json\n", "```\n<!-- sample:review-end -->"


async def test_readme_review_sample_is_what_the_server_answers(aiohttp_client: Any) -> None:
    """What `make run` answers the curl in docs/serving.md: the same app, the same sample cluster."""
    app = create_app(Settings(policy=load_policy("default")), [].append, StateSource(sample_objects()))
    client = await aiohttp_client(app)
    body = (REPO / "examples" / "admission-review.json").read_bytes()
    resp = await client.post("/mutate?timeout=10s", data=body, headers={"Content-Type": "application/json"})
    answer = await resp.json()
    text = (REPO / "docs" / "serving.md").read_text()
    documented = text[text.index(REVIEW_START) + len(REVIEW_START) : text.index(REVIEW_END)]
    assert json.loads(documented) == answer, json.dumps(answer, indent=1)
