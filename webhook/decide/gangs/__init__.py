"""The registered gang backends (``gangs.base``), by the name a policy gives them."""

from __future__ import annotations

from collections.abc import Mapping

from webhook.decide.gangs.base import GangBackend
from webhook.decide.gangs.coscheduling import Coscheduling
from webhook.decide.gangs.volcano import Volcano

GANG_BACKENDS: Mapping[str, GangBackend] = {b.name: b for b in (Coscheduling(), Volcano())}


def by_api_version(api_version: str) -> GangBackend | None:
    """The backend whose PodGroup has this apiVersion (None: not one tasgate writes)."""
    return next((b for b in GANG_BACKENDS.values() if b.api_version == api_version), None)
