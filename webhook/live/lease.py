"""The Lease the leader election takes, and what this replica says about taking it.

kubernetes-asyncio's election logs every failed attempt as it happens — a failed create is an
ERROR with a full traceback every retry period — and none of it names the cause's fix. A
replica that can never take the Lease (its namespace does not exist, as outside a pod with the
default ``--lease-namespace``; or RBAC does not grant leases) still answers every review, so it
stays ready, but no replica writes PodGroups or Events: the one thing an operator must hear.

So the lock here reports instead of the library: each distinct cause once (a WARNING naming the
flag or the Role that fixes it), its recovery once, and `Standing` holds the current cause for
``/readyz`` and the leader gauge. The library's own lines for these failures are filtered out.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import orjson
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.leaderelection.leaderelectionrecord import LeaderElectionRecord
from kubernetes_asyncio.leaderelection.resourcelock.leaselock import LeaseLock


class LeaseTerms(Protocol):
    """What the lock reads of the election's settings (``leader.Campaign`` is one): named here so
    the lock needs nothing from the module that runs the election."""

    @property
    def lease_name(self) -> str: ...
    @property
    def lease_namespace(self) -> str: ...
    @property
    def renew_seconds(self) -> float: ...


log = logging.getLogger("tasgate.leader")
ROLE = "tasgate-leader-election"  # the Role the chart and manifests grant the Lease through
_LIBRARY_SAYS = frozenset(  # what the library logs per failed attempt; `Standing` says it once
    {"%s failed to create lock", "%s failed to acquire lease", "Error retrieving resource lock %s as %s"}
)


class LeaseError(Exception):
    """The Lease cannot be read: the campaign backs off (the message is the cause, in words)."""


class Standing:
    """This replica's part in the election, as its log, ``/readyz`` and ``tasgate_leader`` say it."""

    def __init__(self, campaign: LeaseTerms) -> None:
        self.where = f"{campaign.lease_namespace}/{campaign.lease_name}"
        self.leading = False
        self.problem: str | None = None  # why the Lease cannot be taken; None when it can

    def blocked(self, why: str) -> None:
        """Say a cause once; the same cause again (every retry) is already said. A leader whose
        renewal fails still leads until its renew deadline (the library retries meanwhile)."""
        if why != self.problem and self.leading:
            log.warning("leading, but %s; renewing again until it can or the term ends", why)
        elif why != self.problem:
            log.warning("not leading: %s; campaigning again until it can", why)
        self.problem = why

    def cleared(self) -> None:
        if self.problem is not None:
            log.info("the Lease %s can be taken again (was: %s)", self.where, self.problem)
        self.problem = None

    def detail(self) -> str | None:
        """For ``/readyz``: a note, not a failure (answering reviews needs no Lease)."""
        if self.problem is None:
            return None
        return f"{'leading, but' if self.leading else 'not leading:'} {self.problem}"


def cause(exc: ApiException, verb: str, campaign: LeaseTerms) -> str:
    """An API error on the Lease in the words that fix it."""
    status = _status_of(exc)
    where = f"{campaign.lease_namespace}/{campaign.lease_name}"
    details = status.get("details") or {}
    message = str(status.get("message") or exc.reason or "")[:300]
    if exc.status == 404 and details.get("kind") == "namespaces":
        return (
            f'cannot {verb} the Lease {where}: namespace "{campaign.lease_namespace}" does not exist, so no '
            "replica writes PodGroups or Events; set --lease-namespace to an existing namespace (in a pod, "
            "its own), or --no-leader-elect where one replica runs"
        )
    if exc.status == 403:
        return (
            f"cannot {verb} the Lease {where}: forbidden ({message}), so no replica writes PodGroups or "
            f"Events; grant get, create and update on leases.coordination.k8s.io in "
            f"{campaign.lease_namespace} (the Role {ROLE})"
        )
    return f"cannot {verb} the Lease {where}: {exc.status} {exc.reason or ''}: {message}".rstrip(": ")


def _status_of(exc: ApiException) -> dict[str, Any]:
    try:
        parsed = orjson.loads(exc.body or b"{}")
    except orjson.JSONDecodeError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


class Lock(LeaseLock):
    """The library's Lease lock with bounded requests, the time of the last successful write
    (taken when it was sent: the conservative end), and failures reported to `Standing`."""

    def __init__(
        self, campaign: LeaseTerms, identity: str, api: client.ApiClient, standing: Standing
    ) -> None:
        super().__init__(campaign.lease_name, campaign.lease_namespace, identity, api)
        self.campaign, self.standing = campaign, standing
        self.timeout = campaign.renew_seconds / 2
        self.renewed = -math.inf

    async def get(self, name: str, namespace: str) -> Any:
        """A 404 is the library's to handle (it creates the Lease); any other refusal ends this
        round (`LeaseError`), so the library never parses an error body it may choke on."""
        async with asyncio.timeout(self.timeout):
            found, record = await super().get(name, namespace)
        if not found and isinstance(record, ApiException) and record.status != 404:
            raise LeaseError(cause(record, "read", self.campaign))
        if found and self._held_elsewhere():
            self.standing.cleared()  # another replica leads: the writers run there
        return found, record

    async def create(self, name: str, namespace: str, election_record: LeaderElectionRecord) -> bool:
        body = client.V1Lease(
            metadata=client.V1ObjectMeta(name=name), spec=self.update_lease(election_record)
        )
        return await self._write("create", self.api_instance.create_namespaced_lease(namespace, body))

    async def update(self, name: str, namespace: str, updated_record: LeaderElectionRecord) -> bool:
        assert self.lease_reference is not None
        self.lease_reference.spec = self.update_lease(updated_record, self.lease_reference.spec)
        replace = self.api_instance.replace_namespaced_lease(name, namespace, self.lease_reference)
        return await self._write("update", replace)

    async def _write(self, verb: str, request: Any) -> bool:
        """One bounded write; a conflict is another candidate's win (no problem), anything else
        is said once through `Standing` and the library retries as it does for any failure."""
        sent = time.monotonic()
        try:
            async with asyncio.timeout(self.timeout):
                await request
        except ApiException as exc:
            if exc.status != 409:
                self.standing.blocked(cause(exc, verb, self.campaign))
            return False
        self.renewed = sent
        self.standing.cleared()
        return True

    def _held_elsewhere(self) -> bool:
        """The Lease names another holder whose term has not run out."""
        spec = self.lease_reference.spec if self.lease_reference is not None else None
        if spec is None or not spec.holder_identity or spec.holder_identity == self.identity:
            return False
        renewed, seconds = spec.renew_time, spec.lease_duration_seconds or 0
        return renewed is not None and renewed + timedelta(seconds=seconds) > datetime.now(UTC)


class _Unsaid(logging.Filter):
    """Drops the library's per-attempt failure lines: `Standing` says each cause once."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg not in _LIBRARY_SAYS


def quiet_the_library() -> None:
    library = logging.getLogger("kubernetes_asyncio.leaderelection.leaderelection")
    if not any(isinstance(f, _Unsaid) for f in library.filters):
        library.addFilter(_Unsaid())
