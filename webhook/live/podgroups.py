"""The PodGroup writer's public names; the writer itself is ``live.reconcile.Reconciler``."""

from __future__ import annotations

from webhook.live.reconcile import Compute, Intent, NotReadyError, PodGroups, Reconciler

__all__ = ["Compute", "Intent", "NotReadyError", "PodGroups", "Reconciler"]
