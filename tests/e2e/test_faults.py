"""The fault suite (issue 17 point 7): real faults on the real control plane, one test per fault.

Each fault is made with a real part where one can be made (FAULTS.md's recipes, e2e/faults*.py):
SIGKILL and SIGSTOP of real processes, an API server restarted with its own flags, etcd compacted
through its gateway, API Priority and Fairness answering 429, a ClusterQueue the API server accepts
and tasgate cannot use. While it lasts, samplers count what was answered (e2e/faults_sample.py)
and the test states the invariants on its table row (e2e/faults_table.py):

- 0 wrong answers (an unchecked admission while --on-timeout says deny; an admission of what never
  fits; a judged denial of what fits);
- recovery without a restart of tasgate, timed from the fault's end to a correct, fresh verdict
  (or readiness) again; only the SIGKILL cases have a replica die, and the other one serves;
- exactly one PodGroup per admitted gang Job, and no Event posted twice.

The table is printed after each row, at the end of the module, in the terminal summary, and
written to ~/.cache/tasgate/faults-table.md and the module's tmp dir.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e import faults_apf as apf
from e2e import scale
from e2e.controlplane import ControlPlane
from e2e.faults import Options, Serving, Tasgate, compact_etcd, paused, running, wait_until
from e2e.faults_net import Forwarder
from e2e.faults_sample import (
    Answer,
    Flood,
    Probe,
    ReadinessSampler,
    ReviewSampler,
    correct_judgement,
    first_correct_after,
    in_flight,
    tally,
    via_api_server,
    via_tasgate,
)
from e2e.faults_table import Row, Table
from e2e.faults_world import (
    LEASE_NAMESPACE,
    NS,
    SHAPE,
    Api,
    Marker,
    build,
    duplicate_events,
    events,
    fits_job,
    jobs_path,
    kueue_workload,
    large_jobset,
    missing_or_extra,
    never_fitting_workload,
    never_job,
    review_body,
    webhook_configurations,
)
from e2e.kueue import KUEUE_API_VERSION
from e2e.kueue_scenario import FLAVOR, job, local_queue, setup_queues
from e2e.nodes import GPU
from tests.e2e.conftest import FAULT_TABLE

pytestmark = pytest.mark.e2e

ON_TIMEOUT = "deny"
STALE_AFTER = 10.0
FLOOD_THROUGH_API = int(os.environ.get("TASGATE_FAULTS_FLOOD_API", "0"))
# The flood's bound on the state's age: tasgate confirms an open watch by a heartbeat to the API
# server every 5 s (live.heartbeat), so a current state reads 0-5 s old; 2 s of slack on top. The
# flood runs with --stale-after FLOOD_STALE_AFTER, so the bound is well below it.
FRESH_BOUND_S = 5.0 + 2.0
FLOOD_STALE_AFTER = 30.0
SILENCE_BOUND_S = 3.0  # /metrics (the event loop that keeps the state) unanswered at most this long
CHANGE_BOUND_S = 5.0  # a node change during the flood reaches the verdicts within this (~1 s at rest)
CHANGE_TIMEOUT_S = 30.0
RECOVERY_TIMEOUT_S = 90.0  # after an outage: long enough to measure a slow recovery, still bounded
# A follower takes the Lease its duration after it last saw it renewed, at its next try: two retry
# periods (2 s, with the election library's 1.2 jitter) and a second of slack past the duration.
RETRY_BOUND_S = 2 * 2.0 * 1.2 + 1.0


@dataclass
class World:
    cp: ControlPlane
    api: Api
    serving: Serving
    forwarder: Forwarder
    workdir: Path

    def replica(self, name: str, options: Options | None = None, kubeconfig: Path | None = None) -> Tasgate:
        config = kubeconfig or self.cp.kubeconfig
        return Tasgate(name, self.workdir, config, self.serving, options or Options())


@pytest.fixture(scope="module")
def table(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Table]:
    found = Table(
        f"World: {SHAPE.nodes} Nodes, {SHAPE.pods} bound Pods (+ marker racks); tasgate --on-timeout "
        f"{ON_TIMEOUT}, --stale-after {STALE_AFTER:g}s unless the row says otherwise."
    )
    yield found
    text = found.markdown()
    paths = found.write(tmp_path_factory.getbasetemp())
    request.config.stash[FAULT_TABLE] = f"{text}\n(written to {', '.join(map(str, paths))})"
    print(f"\n\nfault suite:\n{text}\n")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    workdir = tmp_path_factory.mktemp("faults")
    # A cluster-sized world (TASGATE_FAULTS_NODES) needs the scale suite's API server flags: no
    # audit events for its 50,000 Pod and Node writes, more requests in flight.
    extra = scale.apiserver_args(workdir) if SHAPE.nodes > 1000 else []
    with ControlPlane(apiserver_args=extra) as cp:
        build(cp)
        serving = Serving.make(workdir / "serving")
        forwarder = Forwarder().start()
        try:
            hooks = webhook_configurations(forwarder.port, serving.ca_bundle)
            cp.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(hooks))
            yield World(cp, Api(cp), serving, forwarder, workdir)
        finally:
            forwarder.stop()


# --- helpers --------------------------------------------------------------------------------------


def probes() -> list[Probe]:
    return [Probe("fits", fits_job(), True), Probe("never", never_job(), False)]


def through_api_server(world: World, concurrency: int = 2) -> ReviewSampler:
    def make() -> Callable[[Probe], tuple[Answer, str]]:
        api = Api(world.cp, timeout=20)
        return lambda probe: via_api_server(api, probe)

    return ReviewSampler(make, probes(), concurrency)


def straight_to(replica: Tasgate, concurrency: int = 1) -> ReviewSampler:
    return ReviewSampler(lambda: lambda probe: via_tasgate(replica, probe), probes(), concurrency)


def serve_through(world: World, *replicas: Tasgate) -> None:
    """Point the webhook URL at ``replicas`` (first that accepts) and wait until the API server
    gets tasgate's verdict through it."""
    world.forwarder.route([r.port for r in replicas])
    api, probe = Api(world.cp), probes()[0]
    wait_until(
        "the API server to reach tasgate", lambda: via_api_server(api, probe)[0] is Answer.ADMITTED, 60
    )


def verdict_follows(
    replica: Tasgate, marker: Marker, since: float, timeout: float = CHANGE_TIMEOUT_S
) -> float:
    """Seconds from ``since`` until ``replica`` judges the marker's Job as the marker now is."""
    probe = Probe("marker", marker.job(), marker.fits)
    wait_until(
        f"tasgate to judge marker {marker.name} {'fits' if marker.fits else 'never-fits'}",
        lambda: correct_judgement(probe.fits, via_tasgate(replica, probe)[0]),
        timeout,
        every=0.1,
    )
    return time.monotonic() - since


def count_reviews(row: Row, *samplers: ReviewSampler) -> None:
    result = tally([s for sampler in samplers for s in sampler.snapshot()], ON_TIMEOUT)
    row.answered += result.answered
    row.wrong += result.wrong
    row.refused += result.refused
    row.unchecked += result.unchecked
    row.note("answers " + ", ".join(f"{k} {v}" for k, v in sorted(result.by_answer.items())))
    for s in result.wrong_samples[:3]:
        row.note(f"wrong: {s.probe} -> {s.answer.value} ({s.detail[:160]})")
    row.check(result.wrong == 0, f"{result.wrong} wrong answers")


def alive(row: Row, *replicas: Tasgate) -> None:
    dead = [r.name for r in replicas if not r.alive()]
    row.check(not dead, f"tasgate exited: {', '.join(dead)}")


def gang_namespace(world: World, name: str) -> str:
    namespace = f"faults-{name}"
    setup_queues(world.cp, namespace)
    return namespace


def create_gangs(world: World, namespace: str, prefix: str, count: int, pods: int = 2) -> list[str]:
    """``count`` real gang Jobs through the API server (so through tasgate), each with the Workload
    Kueue would write for it; the uids of those admitted."""
    # A Job sent before tasgate has seen its namespace's new LocalQueue is admitted as written
    # (no gang label, so no PodGroup), and the rows count PodGroups per admitted Job: wait until
    # tasgate judges a Job on the new queue.
    queued = Probe("queue-seen", job(f"{prefix}-probe", namespace, pods=pods), True)
    wait_until(
        f"tasgate to judge a Job on {namespace}'s LocalQueue",
        lambda: via_api_server(world.api, queued)[0] is Answer.ADMITTED,
        30,
    )
    admitted = []
    for i in range(count):
        reply = world.api.call("POST", jobs_path(namespace), job(f"{prefix}-{i}", namespace, pods=pods))
        if reply.status == 201:
            admitted.append(str(reply.body["metadata"]["uid"]))
            path = f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{namespace}/workloads"
            world.api.ok("POST", path, kueue_workload(reply.body))
        else:
            refused.append(f"{namespace}/{prefix}-{i}: {reply.status} {str(reply.body.get('message'))[:200]}")
    return admitted


refused: list[str] = []  # gang Jobs the API server did not admit (printed with the row: why)


def check_podgroups(
    world: World, row: Row, namespace: str, owners: Sequence[str], timeout: float = 60.0
) -> float:
    """Exactly one PodGroup per admitted Job (waiting up to ``timeout``); seconds it took."""
    started = time.monotonic()
    wrong_counts: dict[str, int] = {}

    def settled() -> bool:
        nonlocal wrong_counts
        wrong_counts = missing_or_extra(world.api, owners, namespace)
        return not wrong_counts

    with contextlib.suppress(AssertionError):
        wait_until("one PodGroup per admitted Job", settled, timeout, every=0.5)
    took = time.monotonic() - started
    time.sleep(1.0)  # a late second writer would show up now
    wrong_counts = missing_or_extra(world.api, owners, namespace)
    missing = sum(1 for n in wrong_counts.values() if n == 0)
    extra = sum(n - 1 for n in wrong_counts.values() if n > 1)
    row.podgroups = (
        f"1 each ({len(owners)} Jobs)"
        if not wrong_counts
        else f"{missing} missing, {extra} extra of {len(owners)}"
    )
    row.check(bool(owners), "no gang Job was admitted to check PodGroups on")
    row.check(not wrong_counts, f"PodGroups not exactly 1 per admitted Job: {missing} missing, {extra} extra")
    return took


def check_events(
    world: World,
    row: Row,
    namespace: str,
    expected: Sequence[str] = (),
    timeout: float = 60.0,
    require: bool = True,
) -> None:
    """No Event posted twice; the Workloads in ``expected`` each got their NeverFits Event (a
    failure with ``require``, else a note: the judged invariant is "never twice")."""

    def posted() -> set[str]:
        return {
            str((e.get("regarding") or {}).get("name"))
            for e in events(world.api, namespace)
            if e.get("reason") == "NeverFits"
        }

    try:
        wait_until(
            "a NeverFits Event per never-fitting Workload", lambda: set(expected) <= posted(), timeout, 0.5
        )
    except AssertionError:
        missing = sorted(set(expected) - posted())
        row.note(f"NeverFits Events never posted for {missing}")
        row.check(not require, f"NeverFits Events never posted for {missing}")
    time.sleep(1.0)
    dups = duplicate_events(events(world.api, namespace))
    row.duplicate_events = sum(n - 1 for n in dups.values())
    row.check(not dups, f"Events posted more than once: {sorted(dups.items())[:3]}")


def never_fitting(world: World, namespace: str, names: Sequence[str]) -> list[str]:
    path = f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{namespace}/workloads"
    for name in names:
        world.api.ok("POST", path, never_fitting_workload(name, namespace))
    return list(names)


def writes_hold(world: World, row: Row, name: str, jobs: int = 2, never: int = 1) -> None:
    """After (or during) a fault, the writers still work: ``jobs`` gang Jobs admitted through the API
    server get exactly one PodGroup each, ``never`` never-fitting Workloads one NeverFits Event each,
    and no Event twice. The webhook URL must lead to a replica (`serve_through`)."""
    namespace = gang_namespace(world, name)
    owners = create_gangs(world, namespace, "gang", jobs)
    expected = never_fitting(world, namespace, [f"never-{i}" for i in range(never)])
    check_podgroups(world, row, namespace, owners)
    check_events(world, row, namespace, expected)


def write_results(t: Tasgate) -> str:
    """What the replica's writers were answered, from its own counters."""
    parts = []
    for name in ("tasgate_podgroups_total", "tasgate_events_total"):
        by = {dict(labels).get("result", ""): v for (n, labels), v in t.metrics().items() if n == name}
        what = name.removeprefix("tasgate_").removesuffix("_total")
        parts.append(f"{what} " + (", ".join(f"{k} {v:g}" for k, v in sorted(by.items())) or "none"))
    return "; ".join(parts)


def show(row: Row) -> None:
    print(f"\n{row.markdown()}")
    for line in refused:
        print(f"  gang Job not admitted: {line}")
    refused.clear()


# --- the faults -----------------------------------------------------------------------------------


def test_1_sigkill_mid_review(world: World, table: Table) -> None:
    """Two replicas behind the one webhook URL; the one it reaches is frozen with reviews in flight,
    then SIGKILLed. failurePolicy Fail: what was in flight is refused, never admitted unchecked; the
    other replica answers the next review and (once leader) writes what was left."""
    with table.row("1. tasgate SIGKILLed mid-review") as row:
        namespace = gang_namespace(world, "kill")
        options = Options(lease_name="faults-kill")
        a, b = world.replica("kill-a", options), world.replica("kill-b", options)
        with running(a, b):
            serve_through(world, a, b)
            owners = create_gangs(world, namespace, "before", 2)
            with through_api_server(world, concurrency=4) as sampler:
                time.sleep(2)
                with paused(a.pid):
                    time.sleep(1.0)  # reviews pile up inside the frozen replica
                    killed = a.kill()
                owners += create_gangs(world, namespace, "after", 3)
                expected = never_fitting(world, namespace, ["never-after"])
                time.sleep(4)
            samples = sampler.snapshot()
            held = in_flight(samples, killed)
            answers = sorted({s.answer.value for s in held})
            row.note(f"{len(held)} in flight at the kill, answered {', '.join(answers) or '-'}")
            row.check(bool(held), "no review was in flight at the kill")
            row.check(all(s.answer is Answer.REFUSED for s in held), f"in-flight reviews answered {answers}")
            row.recovery_s = first_correct_after(samples, killed)
            row.check(row.recovery_s is not None, "no correct verdict after the kill")
            count_reviews(row, sampler)
            check_podgroups(world, row, namespace, owners)
            check_events(world, row, namespace, expected)
            row.restarts = "0 (kill-a killed by the test; kill-b served)"
            alive(row, b)
        show(row)


def test_2_api_server_restart(world: World, table: Table) -> None:
    """SIGTERM the kube-apiserver, start it with the same flags; a node change made after it is
    reflected and a review through the API server is judged again."""
    with table.row("2. API server restarted") as row:
        namespace = gang_namespace(world, "restart")
        t = world.replica("restart", Options(lease_name="faults-restart"))
        marker = Marker(world.api, "restart").create()
        with running(t):
            serve_through(world, t)
            verdict_follows(t, marker, time.monotonic())
            with straight_to(t) as direct, ReadinessSampler(t) as readiness:
                world.cp.restart_apiserver()
                back = time.monotonic()
                marker.delete(0)
                seen = verdict_follows(t, marker, back)
                with through_api_server(world) as sampler:
                    time.sleep(2)
                wait_until("/readyz 200", lambda: t.readyz()[0] == 200, 30)
                ready = time.monotonic() - back
            row.recovery_s = max(seen, ready)
            row.note(f"node deletion after the restart seen in {seen:.2f}s")
            row.check(
                first_correct_after(sampler.snapshot(), back) is not None,
                "no judged review via the API server",
            )
            texts = sorted({r.text for r in readiness.not_ready()})[:2]
            unready = len(readiness.not_ready())
            row.note(f"not ready in {unready} of {len(readiness.readings)} readings: {texts}")
            count_reviews(row, direct, sampler)
            owners = create_gangs(world, namespace, "after", 2)
            expected = never_fitting(world, namespace, ["never-after"])
            check_podgroups(world, row, namespace, owners)
            check_events(world, row, namespace, expected)
            alive(row, t)
        show(row)


def test_3_watch_expired_410(world: World, table: Table) -> None:
    """FAULTS.md: SIGSTOP tasgate, delete, compact etcd, restart the API server (its watch cache
    would serve the old window), SIGCONT: every watch resumes from an expired resourceVersion
    (410 Gone), re-lists, and the deletions are reflected.

    One more API server restart comes first, before the deletions: it ends tasgate's watch streams
    while tasgate is frozen, so the DELETED events are never written into sockets it would read on
    resume; the deletions can reach it only through the re-list the 410 forces."""
    with table.row("3. watch expired (410 after compaction)") as row:
        t = world.replica("expire", Options(lease_name="faults-expire"))
        marker = Marker(world.api, "expire").create()
        with running(t):
            verdict_follows(t, marker, time.monotonic())
            with paused(t.pid):
                world.cp.restart_apiserver()  # cut the streams: nothing below reaches them
                marker.delete(0)
                revision = compact_etcd(world.cp)
                world.cp.restart_apiserver()
            resumed = time.monotonic()
            row.recovery_s = verdict_follows(t, marker, resumed)
            gone = wait_until_logged(t, "expired (410 Gone)", 20)
            row.note(
                f"compacted at revision {revision}; deletion reflected {row.recovery_s:.2f}s after SIGCONT"
            )
            row.check(gone, "tasgate never logged a 410 Gone: the fault was not made")
            with straight_to(t) as direct:
                time.sleep(2)
            count_reviews(row, direct)
            row.check(t.readyz()[0] == 200, f"not ready after recovery: {t.readyz()[1]}")
            serve_through(world, t)
            writes_hold(world, row, "expire")
            alive(row, t)
        show(row)


def wait_until_logged(t: Tasgate, text: str, timeout: float) -> bool:
    try:
        wait_until(f"{text!r} in the log", lambda: text in t.log(), timeout)
    except AssertionError:
        return False
    return True


def outage_past_stale_after(world: World, row: Row, name: str, outage: Callable[[Tasgate], None]) -> None:
    """Run ``outage`` (it returns when the fault ends) against a replica with a short --stale-after;
    then /readyz must have turned 503 naming the staleness, reviews asked straight to tasgate must
    have followed --on-timeout=deny once stale, and after it a node change is reflected and the
    replica is ready again (the recovery)."""
    t = world.replica(name, Options(stale_after=STALE_AFTER, lease_name=f"faults-{name}"))
    marker = Marker(world.api, name).create()
    with running(t), straight_to(t) as direct, ReadinessSampler(t) as readiness:
        began = time.monotonic()
        outage(t)
        ended = time.monotonic()
        during = [r for r in readiness.readings if began <= r.at <= ended]
        stale = [r for r in during if r.ready == 503 and "old" in r.text]
        row.note(
            f"outage {ended - began:.1f}s; 503 naming staleness in {len(stale)} of {len(during)} readings"
        )
        said = sorted({r.text for r in during})[:2]
        row.note(f"state age read at most {readiness.max_age():.1f}s; /readyz said {said}")
        buckets: dict[int, set[str]] = {}
        for s in direct.snapshot():
            if began <= s.started <= ended:
                buckets.setdefault(int((s.started - began) // 5) * 5, set()).add(s.answer.value)
        row.note(
            "answers by 5 s of outage: " + ", ".join(f"{k}s {sorted(v)}" for k, v in sorted(buckets.items()))
        )
        row.check(bool(stale), f"/readyz never said the state was stale in a {ended - began:.0f}s outage")
        after = [s for s in direct.snapshot() if stale and stale[0].at <= s.started and s.ended <= ended]
        row.check(
            not stale or any(s.answer is Answer.UNCHECKED_DENY for s in after),
            "no review answered per --on-timeout=deny while stale",
        )
        count_reviews(row, direct)
        marker.delete(0)
        seen = verdict_follows(t, marker, ended, timeout=RECOVERY_TIMEOUT_S)
        wait_until("/readyz 200 again", lambda: t.readyz()[0] == 200, RECOVERY_TIMEOUT_S)
        row.recovery_s = max(seen, time.monotonic() - ended)
        if row.recovery_s > STALE_AFTER:
            row.note(f"slow: ready and current again only {row.recovery_s:.0f}s after the outage ended")
        serve_through(world, t)
        writes_hold(world, row, name)
        alive(row, t)


def test_4_api_server_paused_past_stale_after(world: World, table: Table) -> None:
    """SIGSTOP the kube-apiserver for longer than --stale-after: its sockets stay open, nothing
    answers (a frozen VM, a black-holed network). /readyz must turn 503 naming the staleness and
    reviews follow --on-timeout=deny (asked straight to tasgate: the API server is paused); after
    SIGCONT, ready and judged again. Paused until /readyz says stale (+3 s of stale answers), at
    most --stale-after + 10 s."""

    def pause(t: Tasgate) -> None:
        with paused(world.cp.apiserver_pid):
            if wait_until_state(lambda: t.readyz()[0] == 503 and "old" in t.readyz()[1], STALE_AFTER + 10):
                time.sleep(3)

    with table.row(f"4. API server paused (SIGSTOP) > --stale-after ({STALE_AFTER:g}s)") as row:
        outage_past_stale_after(world, row, "pause", pause)
        show(row)


def test_4b_api_server_down_past_stale_after(world: World, table: Table) -> None:
    """FAULTS.md's recipe for the same limit: the kube-apiserver process stopped (SIGTERM: every
    connection closes) for --stale-after + 6 s, then started with the same flags."""
    with table.row(f"4b. API server stopped > --stale-after ({STALE_AFTER:g}s)") as row:
        outage_past_stale_after(
            world, row, "down", lambda t: world.cp.restart_apiserver(down_seconds=STALE_AFTER + 6)
        )
        show(row)


def wait_until_state(check: Callable[[], bool], timeout: float) -> bool:
    try:
        wait_until("a state", check, timeout, every=0.25)
    except AssertionError:
        return False
    return True


def flood_straight(t: Tasgate, body: bytes) -> Callable[[], str]:
    """One large review straight to the replica's /mutate; what it answered (its reason)."""

    def send() -> str:
        try:
            answer = t.review(body, "/mutate", timeout=30)["response"]
        except (OSError, ValueError) as exc:
            return type(exc).__name__
        return str((answer.get("auditAnnotations") or {}).get("reason", answer.get("allowed")))

    return send


def flood_through_api(world: World, jobset: dict[str, Any]) -> Callable[[], str]:
    """One server-side dry run of the JobSet through the API server (a connection per thread)."""
    local = threading.local()
    path = f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{NS}/jobsets?dryRun=All"

    def send() -> str:
        if not hasattr(local, "api"):
            local.api = Api(world.cp, timeout=90)
        try:
            reply = local.api.call("POST", path, jobset)
        except OSError as exc:
            return type(exc).__name__
        return f"{reply.status} {str(reply.body.get('message', ''))[-40:]}"

    return send


def stayed_fresh(row: Row, readiness: ReadinessSampler, began: float, seen: Sequence[float | None]) -> None:
    """The flood's invariants, from ``began``: the state's age within FRESH_BOUND_S, /metrics never
    unanswered longer than SILENCE_BOUND_S, never unready, each change seen within CHANGE_BOUND_S."""
    age, silence = readiness.max_age(began), readiness.longest_silence(began)
    row.note(
        f"max state age {age:.2f}s in the flood ({readiness.max_age(0, began):.2f}s at rest), "
        f"longest unanswered {silence:.2f}s, "
        f"changes seen after {', '.join('-' if s is None else f'{s:.2f}s' for s in seen)}"
    )
    row.check(age <= FRESH_BOUND_S, f"state age reached {age:.1f}s")
    row.check(silence <= SILENCE_BOUND_S, f"/metrics unanswered for {silence:.1f}s")
    row.check(
        not readiness.not_ready(),
        f"/readyz 503: {sorted({r.text for r in readiness.not_ready()})[:2]}",
    )
    row.check(
        all(s is not None and s <= CHANGE_BOUND_S for s in seen),
        f"node changes during the flood seen after {seen}s",
    )


def test_5_flood_of_large_reviews(world: World, table: Table) -> None:
    """2.5 MB AdmissionReviews (a JobSet of 8,000 replicatedJobs) POSTed straight to tasgate 8 at a
    time for 20 s. The state must stay confirmed fresh throughout (age <= FRESH_BOUND_S, /metrics
    never unanswered for more than SILENCE_BOUND_S), readiness stay 200, and a node change made
    during the flood be seen within the bound.

    ``TASGATE_FAULTS_FLOOD_API=48`` adds FAULTS.md's own recipe after it (that many server-side dry
    runs of the JobSet through the API server, 8 at a time): off by default, because here the API
    server spends its full 60 s request timeout on each (504), a minute of the suite per wave.
    ``TASGATE_FAULTS_NODES``/``_PODS`` (e2e/faults_world.py) give the world FAULTS.md's size."""
    title = "5. flood of 2 MB reviews (8 in flight; "
    title += f"age bound {FRESH_BOUND_S:g}s, --stale-after {FLOOD_STALE_AFTER:g}s)"
    with table.row(title) as row:
        t = world.replica("flood", Options(stale_after=FLOOD_STALE_AFTER, lease_name="faults-flood"))
        marker = Marker(world.api, "flood").create()
        jobset = large_jobset("flood")
        body = review_body(jobset)

        straight, through_api = flood_straight(t, body), flood_through_api(world, jobset)
        seen: list[float | None] = []

        def change_seen(change: Callable[[int], None]) -> None:
            changed = time.monotonic()
            change(0)
            try:
                seen.append(verdict_follows(t, marker, changed, timeout=20))
            except AssertionError:
                seen.append(None)

        namespace = gang_namespace(world, "flood")
        with running(t):
            serve_through(world, t)
            verdict_follows(t, marker, time.monotonic())
            with ReadinessSampler(t) as readiness, straight_to(t) as direct:
                time.sleep(6)  # the age at rest, for comparison: a heartbeat period and a bit
                began = time.monotonic()
                with Flood(straight, threads=8, limit_s=20) as direct_flood:
                    time.sleep(5)
                    change_seen(marker.delete)
                    owners = create_gangs(world, namespace, "gang", 2)  # writers work during it
                    expected = never_fitting(world, namespace, ["never-0"])
                    direct_flood.join(30)
                with Flood(through_api, threads=8, total=FLOOD_THROUGH_API, limit_s=90) as api_flood:
                    if FLOOD_THROUGH_API:
                        time.sleep(1)
                        change_seen(marker.add)
                        api_flood.join(120)
                ended = time.monotonic()
                time.sleep(2)
            row.note(f"straight to tasgate: {direct_flood.answers}")
            if FLOOD_THROUGH_API:
                row.note(f"through the API server: {api_flood.answers}")
            stayed_fresh(row, readiness, began, seen)
            row.recovery_s = readiness.first_ready_after(ended)
            count_reviews(row, direct)
            check_podgroups(world, row, namespace, owners)
            check_events(world, row, namespace, expected)
            alive(row, t)
        show(row)


def test_6_background_task_raises(world: World, table: Table) -> None:
    """--test-fault-hook: POST /debug/raise/<task> makes the supervised task fail; it is counted in
    tasgate_task_restarts_total, restarted, and the next change is still reflected."""
    with table.row("6. task raises (watch-nodes, publish, track)") as row:
        namespace = gang_namespace(world, "raise")
        t = world.replica("raise", Options(lease_name="faults-raise"))
        marker = Marker(world.api, "raise").create()
        times = []
        with running(t):
            serve_through(world, t)
            verdict_follows(t, marker, time.monotonic())
            for task, change in (
                ("watch-nodes", marker.delete),
                ("publish", marker.add),
                ("track", marker.delete),
            ):
                before = t.metric("tasgate_task_restarts_total", task=task)
                status, text = t.raise_in(task)
                raised = time.monotonic()
                row.check(status == 200, f"/debug/raise/{task}: {status} {text.strip()}")
                change(0)
                times.append(verdict_follows(t, marker, raised))
                counted = wait_until_state(functools.partial(restarted, t, task, before), 10)
                row.check(counted, f"tasgate_task_restarts_total{{task={task}}} did not move")
                row.note(f"{task}: change seen {times[-1]:.2f}s after the raise")
            expected = never_fitting(world, namespace, ["after-track-raise"])
            check_events(world, row, namespace, expected, timeout=30)
            owners = create_gangs(world, namespace, "after", 2)
            check_podgroups(world, row, namespace, owners)
            row.check(t.readyz()[0] == 200, f"not ready: {t.readyz()[1]}")
            with straight_to(t) as direct:
                time.sleep(2)
            count_reviews(row, direct)
            alive(row, t)
        row.recovery_s = max(times) if times else None
        show(row)


def restarted(t: Tasgate, task: str, before: float) -> bool:
    return t.metric("tasgate_task_restarts_total", task=task) >= before + 1


def cluster_queue_with_cpu(name: str, cpu: str) -> list[dict[str, Any]]:
    """Like the suite's good ClusterQueue (same flavor, every resource covered) but for its cpu
    quota; with a LocalQueue ``<name>-queue`` in the probes' namespace."""
    quota = [
        {"name": "cpu", "nominalQuota": cpu},
        {"name": "memory", "nominalQuota": "10Ti"},
        {"name": GPU, "nominalQuota": "1000"},
    ]
    group = {"coveredResources": ["cpu", "memory", GPU], "flavors": [{"name": FLAVOR, "resources": quota}]}
    spec = {"namespaceSelector": {}, "resourceGroups": [group]}
    cq = {"apiVersion": KUEUE_API_VERSION, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}
    return [cq, local_queue(NS, f"{name}-queue", name)]


def judged_on(t: Tasgate, queue: str) -> tuple[bool, str, str]:
    """A 2-pod Job on ``queue`` straight to /mutate: (allowed, reason, message)."""
    response = t.review(review_body(job(f"on-{queue}", NS, pods=2, queue=queue)), "/mutate")["response"]
    reason = str((response.get("auditAnnotations") or {}).get("reason"))
    text = str((response.get("status") or {}).get("message") or "; ".join(response.get("warnings") or ()))
    return bool(response.get("allowed")), reason, text


JUDGEMENTS = frozenset({"fits", "waits", "never-fits", "over-quota"})


def test_7_bad_cluster_queue(world: World, table: Table) -> None:
    """ClusterQueues the API server accepts (no Kueue webhook runs here to refuse one):

    - nominalQuota cpu "1E": Kueue reads it as Unlimited (AmountFromQuantity saturates), and so
      must tasgate: a workload on it is judged, as Kueue would admit it;
    - nominalQuota cpu "-1": Kueue's webhook would refuse it, tasgate cannot use it: left out of
      the state alone, a workload on it answered not-checked per --on-timeout (deny here).

    Neither may freeze the state: a node change made afterwards is reflected, /readyz stays
    truthful (never ready while the state is stuck), the probes are judged as before."""
    with table.row('7. ClusterQueue nominalQuota cpu "1E" (and "-1")') as row:
        t = world.replica("badcq", Options(lease_name="faults-badcq"))
        marker = Marker(world.api, "badcq").create()
        queues = cluster_queue_with_cpu("faults-1e-cq", "1E") + cluster_queue_with_cpu("faults-neg-cq", "-1")
        with running(t):
            verdict_follows(t, marker, time.monotonic())
            try:
                with ReadinessSampler(t) as readiness, straight_to(t) as direct:
                    world.cp.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(queues))
                    created = time.monotonic()
                    time.sleep(1)
                    marker.delete(0)
                    with contextlib.suppress(AssertionError):
                        row.recovery_s = verdict_follows(t, marker, created, timeout=20)
                    row.check(
                        row.recovery_s is not None, "state frozen: a node deleted after it was never seen"
                    )
                    allowed, reason, text = judged_on(t, "faults-1e-cq-queue")
                    row.note(f'on "1E": allowed={allowed} {reason}')
                    row.check(
                        allowed and reason in JUDGEMENTS,
                        f'"1E" (Unlimited) not judged: {reason} {text[:160]}',
                    )
                    allowed, reason, text = judged_on(t, "faults-neg-cq-queue")
                    row.note(f'on "-1": allowed={allowed} {reason}: {text[:140]}')
                    row.check(reason not in JUDGEMENTS, f'a workload on the "-1" queue was judged ({reason})')
                    row.check(not allowed, 'a workload on the "-1" queue was admitted (--on-timeout=deny)')
                    time.sleep(2)
                said_ready = all(r.ready == 200 for r in readiness.readings)
                row.check(
                    not (row.recovery_s is None and said_ready),
                    "/readyz said ready throughout while the state was frozen",
                )
                row.note(f"{len(readiness.not_ready())} of {len(readiness.readings)} readings not ready")
                row.note(f"tasgate_objects_rejected {t.metric('tasgate_objects_rejected')}")
                count_reviews(row, direct)
                serve_through(world, t)
                writes_hold(world, row, "badcq")
                alive(row, t)
            finally:
                world.cp.kubectl("delete", "-f", "-", "--ignore-not-found", input=yaml.safe_dump_all(queues))
        show(row)


def test_8_api_server_429s_on_writes(world: World, table: Table) -> None:
    """APF answers tasgate's PodGroup and Event creates 429 (tasgate runs as its ServiceAccount's
    user with the manifests' RBAC; a noise user keeps the throttled level's 3 seats taken). Every
    admitted gang still gets exactly one PodGroup, and no Event is posted twice."""
    with table.row("8. 429s on PodGroup and Event writes (APF)") as row:
        namespace = gang_namespace(world, "apf")
        identity, kubeconfig = apf.tasgate_identity(world.cp, world.workdir / "tasgate-user", LEASE_NAMESPACE)
        noise_cert = apf.noise_identity(world.cp, world.workdir / "noise-user")
        world.cp.kubectl("create", "namespace", "faults-noise")
        t = world.replica("apf", Options(lease_name="faults-apf"), kubeconfig=kubeconfig)
        try:
            apf.install_apf(world.cp, [identity.username, apf.NOISE_USER])
            with running(t):
                serve_through(world, t)
                with (
                    apf.Noise(world.cp, noise_cert, "faults-noise", threads=8) as noise,
                    through_api_server(world) as sampler,
                ):
                    time.sleep(2)
                    owners, expected = [], []
                    for k in range(3):
                        owners += create_gangs(world, namespace, f"gang{k}", 2)
                        expected += never_fitting(world, namespace, [f"never-{k}"])
                        time.sleep(2)
                    time.sleep(4)
                row.note(f"noise answered {dict(sorted(noise.answers.items()))}")
                row.recovery_s = check_podgroups(world, row, namespace, owners)  # from the noise's end
                check_events(world, row, namespace, expected, timeout=20, require=False)
                rejected = apf.throttled(world.cp, identity.username)
                row.note(f"429s to tasgate by resource: {rejected or 'none'}")
                row.note(f"{t.name}'s writes: {write_results(t)}")
                row.check(sum(rejected.values()) > 0, "no 429 reached tasgate: the fault was not made")
                count_reviews(row, sampler)
                alive(row, t)
        finally:
            apf.remove_apf(world.cp)
        show(row)


def lease_holder(world: World, name: str) -> tuple[str, int]:
    reply = world.api.call("GET", f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{name}")
    spec = reply.body.get("spec") or {} if reply.status == 200 else {}
    return str(spec.get("holderIdentity") or ""), int(spec.get("leaseDurationSeconds") or 0)


def test_9_leader_killed(world: World, table: Table) -> None:
    """Two replicas with leader election on one Lease; the leader is SIGKILLed. The other takes the
    Lease within its duration (plus one retry period), writes continue (PodGroups for Jobs admitted
    after the kill, Events for Workloads queued after it), each exactly once."""
    with table.row("9. leader SIGKILLed (two replicas)") as row:
        namespace = gang_namespace(world, "leader")
        options = Options(leader_elect=True, lease_name="faults-leader")
        a, b = world.replica("leader-a", options), world.replica("leader-b", options)
        with running(a, b):
            serve_through(world, a, b)
            wait_until_state(lambda: lease_holder(world, "faults-leader")[0] in (a.name, b.name), 30)
            holder, duration = lease_holder(world, "faults-leader")
            row.check(holder in (a.name, b.name), f"no replica holds Lease faults-leader (holder {holder!r})")
            leader, follower = (a, b) if holder == a.name else (b, a)
            row.check(
                follower.metric("tasgate_leader") == 0,
                f"{follower.name} reports tasgate_leader 1 as follower",
            )
            owners = create_gangs(world, namespace, "before", 3)
            expected = never_fitting(world, namespace, ["never-before-0", "never-before-1"])
            check_podgroups(world, row, namespace, owners, timeout=30)
            with through_api_server(world) as sampler:
                killed = leader.kill()
                owners += create_gangs(world, namespace, "after", 3)
                expected += never_fitting(world, namespace, ["never-after-0", "never-after-1"])
                took = wait_until_state(
                    lambda: (
                        lease_holder(world, "faults-leader")[0] == follower.name
                        and follower.metric("tasgate_leader") == 1
                    ),
                    60,
                )
                takeover = time.monotonic() - killed
            row.recovery_s = takeover if took else None
            bound = duration + RETRY_BOUND_S
            row.note(f"{follower.name} took Lease over {takeover:.1f}s after the kill (lease {duration}s)")
            row.check(
                took and takeover <= bound,
                f"takeover after {takeover:.1f}s (bound {bound:.0f}s, done={took})",
            )
            check_podgroups(world, row, namespace, owners)
            check_events(world, row, namespace, expected)
            count_reviews(row, sampler)
            row.note(f"{follower.name}'s writes: {write_results(follower)}")
            row.restarts = f"0 ({leader.name} killed by the test; {follower.name} took over)"
            alive(row, follower)
        show(row)
