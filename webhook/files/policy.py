"""Where a policy comes from: `none`, the shipped default, or a file."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from webhook.decide.policy import NONE_POLICY, Policy, PolicyError
from webhook.decide.policy_text import parse_policy


def load_policy(ref: str) -> Policy:
    """`none`, `default` (shipped with the package), or a path to a policy file."""
    if ref == "none":
        return NONE_POLICY
    if ref == "default":
        text = resources.files("webhook").joinpath("data/default-policy.yaml").read_text()
        return parse_policy(text, "default policy")
    try:
        text = Path(ref).read_text()
    except OSError as exc:
        raise PolicyError(f"cannot read policy file {ref}: {exc.strerror}") from None
    return parse_policy(text, ref)
