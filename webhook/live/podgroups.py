"""The PodGroup writer's public names; the writer itself is ``live.reconcile.Reconciler``.

``Creator`` is the old name, with the old argument order and ``submit``, kept only so the
server keeps working until it wires ``Reconciler`` (its watches, ``run`` under the leader
election, ``hint`` from the validating review). Delete it then.
"""

from __future__ import annotations

from collections.abc import Callable

from kubernetes_asyncio import client

from webhook.live.reconcile import Compute, Intent, NotReadyError, PodGroups, Reconciler

__all__ = ["Compute", "Creator", "Intent", "NotReadyError", "PodGroups", "Reconciler"]


class Creator(Reconciler):
    """``Reconciler(api, compute, record)`` under its old name: hints only until it is fed."""

    def __init__(self, api: client.ApiClient, record: Callable[[str], None], compute: Compute) -> None:
        super().__init__(api, compute, record)

    def submit(self, intent: Intent) -> None:
        self.hint(intent)
