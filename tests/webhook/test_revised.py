"""`verdicts.revised`: the decision path's cheap ``dataclasses.replace``."""

from __future__ import annotations

from dataclasses import replace

import pytest

from webhook.decide.reasons import Reason
from webhook.decide.verdicts import Decision, revised


def test_revised_is_what_replace_makes() -> None:
    base = Decision("batch/v1", "Job", "ns", "j", True, Reason.FITS, warnings=("w",), queue="q")
    changes = {"allowed": False, "reason": Reason.NEVER_FITS, "message": "m", "audit": {"a": "b"}}
    made, wanted = revised(base, **changes), replace(base, **changes)
    assert made == wanted and vars(made) == vars(wanted) and type(made) is Decision
    assert base.allowed and base.message == ""  # the original is left as it was
    with pytest.raises(TypeError, match="no field colour"):
        revised(base, colour="red")
