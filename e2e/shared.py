"""Where ``shared/`` is: the real CRDs (``crds/``) and upstream manifests (``examples/``) the suites read.

It lies beside the checkout (``../shared``). A clone made elsewhere (``git clone . /tmp/x``) finds
the one beside the checkout it was cloned from (its ``origin``); ``$TASGATE_SHARED`` overrides
both. Nothing falls back to a copy: a suite that cannot find it fails, naming where it looked.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def shared_dir() -> Path:
    override = os.environ.get("TASGATE_SHARED")
    if override:
        return Path(override).expanduser()
    beside = REPO_ROOT.parent / "shared"
    if beside.is_dir():
        return beside
    origin = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "remote", "get-url", "origin"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    if origin and Path(origin).is_dir():
        candidate = Path(origin).resolve().parent / "shared"
        if candidate.is_dir():
            return candidate
    return beside  # missing: whoever reads it fails and names this path


def shared_path(*parts: str) -> Path:
    """A file or directory under ``shared/`` that must exist (AssertionError naming it otherwise)."""
    path = shared_dir().joinpath(*parts)
    assert path.exists(), (
        f"{path} is missing: the suites read the real CRDs and upstream manifests from shared/ beside "
        "the checkout (or set TASGATE_SHARED)"
    )
    return path


def main() -> None:
    """`python -m e2e.shared`: exit 1 with the reason when shared/ is not where the suites look."""
    for part in ("crds", "examples"):
        try:
            shared_path(part)
        except AssertionError as exc:
            raise SystemExit(f"CI: {exc}") from None
    print(shared_dir())


if __name__ == "__main__":
    main()
