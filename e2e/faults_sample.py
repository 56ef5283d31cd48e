"""What was answered while a fault lasted: a review sampler and a readiness/state-age sampler.

The review sampler asks the same two questions again and again, with answers known in advance
(`e2e.faults_world`: one Job that fits, one that never does), through the API server (a
server-side dry run of the Job: the API server calls both webhooks exactly as for a real create)
or straight to a replica's ``/validate`` (when the API server itself is the fault). Every answer is
classified (`Answer`) and judged (`wrong`):

- an unchecked admission while the policy (``--on-timeout``) says deny is wrong;
- an admission of the Job that never fits is wrong, checked or not;
- a denial of the Job that fits is wrong unless it is the policy's unchecked denial;
- the API server refusing the request because the webhook could not be called (failurePolicy
  Fail) is a correct answer: refused, never admitted unchecked.

The readiness sampler reads ``/readyz`` and ``tasgate_cluster_snapshot_age_seconds`` on the
metrics port every half second. A sample that does not come back within its timeout is itself a
finding (the event loop that serves it is the one that keeps the state fresh), so the longest span
without an answer is reported next to the largest age.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from e2e.faults import Tasgate
from e2e.faults_world import POD_GROUP_LABEL, Api, jobs_path, review_body


class Answer(StrEnum):
    ADMITTED = "admitted"  # tasgate judged it and allowed it
    DENIED = "denied"  # tasgate judged it and refused it
    UNCHECKED_ALLOW = "unchecked-allow"  # allowed without a judgement
    UNCHECKED_DENY = "unchecked-deny"  # refused without a judgement (--on-timeout=deny)
    ERROR = "error"  # tasgate answered that it failed
    REFUSED = "refused"  # the API server could not call the webhook: failurePolicy Fail
    NO_ANSWER = "no-answer"  # nobody answered (API server down or paused, replica gone)


JUDGED = frozenset({Answer.ADMITTED, Answer.DENIED})
UNCHECKED = frozenset({Answer.UNCHECKED_ALLOW, Answer.UNCHECKED_DENY})


@dataclass(frozen=True)
class Probe:
    name: str
    obj: dict[str, Any]
    fits: bool  # the correct verdict: admitted (True) or denied as never fitting (False)

    @property
    def body(self) -> bytes:
        return review_body(self.obj)


@dataclass(frozen=True)
class Sample:
    started: float  # monotonic
    ended: float
    probe: str
    fits: bool
    answer: Answer
    detail: str


def wrong(fits: bool, answer: Answer, on_timeout: str) -> bool:
    if answer is Answer.UNCHECKED_ALLOW:
        return on_timeout == "deny" or not fits
    if answer is Answer.UNCHECKED_DENY:
        return on_timeout == "allow"
    if answer is Answer.ADMITTED:
        return not fits
    if answer in (Answer.DENIED, Answer.ERROR):
        return fits
    return False  # refused by failurePolicy, or no answer at all


def correct_judgement(fits: bool, answer: Answer) -> bool:
    """A fresh, checked and right verdict: what "recovered" means."""
    return answer is (Answer.ADMITTED if fits else Answer.DENIED)


def via_api_server(api: Api, probe: Probe) -> tuple[Answer, str]:
    """A server-side dry run of the probe's Job: the API server calls /mutate and /validate."""
    try:
        reply = api.call("POST", jobs_path(probe.obj["metadata"]["namespace"]) + "?dryRun=All", probe.obj)
    except OSError as exc:
        return Answer.NO_ANSWER, f"{type(exc).__name__}: {exc}"
    message = str(reply.body.get("message", ""))
    if 200 <= reply.status < 300:
        unchecked = [w for w in reply.warnings if "did not check" in w]
        labels = ((reply.body.get("spec") or {}).get("template", {}).get("metadata") or {}).get(
            "labels"
        ) or {}
        if unchecked or POD_GROUP_LABEL not in labels:
            return Answer.UNCHECKED_ALLOW, "; ".join(unchecked) or "admitted without tasgate's mutation"
        return Answer.ADMITTED, "; ".join(reply.warnings)
    if "denied the request" in message and "tasgate.io" in message:
        if "could not decide" in message:
            return Answer.UNCHECKED_DENY, message
        if "failed to decide" in message or "failed while answering" in message:
            return Answer.ERROR, message
        return Answer.DENIED, message
    if "failed calling webhook" in message:
        return Answer.REFUSED, message
    return Answer.NO_ANSWER, f"HTTP {reply.status}: {message[:300]}"


def via_tasgate(replica: Tasgate, probe: Probe) -> tuple[Answer, str]:
    """The probe's AdmissionReview straight to the replica's /mutate over TLS (the judgement;
    /validate alone would refuse it for lacking the mutation /mutate asks for)."""
    try:
        response = replica.review(probe.body, "/mutate")["response"]
    except (OSError, ValueError) as exc:
        return Answer.NO_ANSWER, f"{type(exc).__name__}: {exc}"
    reason = str((response.get("auditAnnotations") or {}).get("reason", ""))
    warnings = [str(w) for w in response.get("warnings") or ()]
    message = str((response.get("status") or {}).get("message", "")) or "; ".join(warnings)
    if response.get("allowed"):
        unchecked = reason == "unavailable" or any("did not check" in w for w in warnings)
        return (Answer.UNCHECKED_ALLOW if unchecked else Answer.ADMITTED), f"{reason}: {message}"
    if reason == "unavailable" or "could not decide" in message:  # --on-timeout=deny, said so
        return Answer.UNCHECKED_DENY, f"{reason}: {message}"
    return (Answer.ERROR if reason == "internal-error" else Answer.DENIED), f"{reason}: {message}"


Sender = Callable[[Probe], tuple[Answer, str]]


class ReviewSampler:
    """``concurrency`` threads asking the probes in turn until `stop` (each with its own sender:
    ``make_sender`` is called once per thread, e.g. for a connection of its own)."""

    def __init__(
        self,
        make_sender: Callable[[], Sender],
        probes: Sequence[Probe],
        concurrency: int = 2,
        pause: float = 0.05,
        limit_s: float = 300.0,
    ) -> None:
        self.make_sender, self.probes, self.pause = make_sender, list(probes), pause
        self.concurrency, self.limit_s = concurrency, limit_s
        self.samples: list[Sample] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> ReviewSampler:
        for i in range(self.concurrency):
            thread = threading.Thread(target=self._run, args=(i,), daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)
        self._threads.clear()

    def _run(self, index: int) -> None:
        send = self.make_sender()
        deadline = time.monotonic() + self.limit_s  # a forgotten sampler still ends
        turn = index
        while not self._stop.is_set() and time.monotonic() < deadline:
            probe = self.probes[turn % len(self.probes)]
            turn += 1
            started = time.monotonic()
            answer, detail = send(probe)
            sample = Sample(started, time.monotonic(), probe.name, probe.fits, answer, detail[:300])
            with self._lock:
                self.samples.append(sample)
            self._stop.wait(self.pause)

    def snapshot(self) -> list[Sample]:
        with self._lock:
            return list(self.samples)


@dataclass
class Tally:
    answered: int = 0
    wrong: int = 0
    refused: int = 0
    unchecked: int = 0
    no_answer: int = 0
    by_answer: dict[str, int] = field(default_factory=dict)
    wrong_samples: list[Sample] = field(default_factory=list)

    def add(self, other: Tally) -> Tally:
        merged = Tally(
            self.answered + other.answered,
            self.wrong + other.wrong,
            self.refused + other.refused,
            self.unchecked + other.unchecked,
            self.no_answer + other.no_answer,
            dict(self.by_answer),
            self.wrong_samples + other.wrong_samples,
        )
        for key, n in other.by_answer.items():
            merged.by_answer[key] = merged.by_answer.get(key, 0) + n
        return merged


def tally(samples: Sequence[Sample], on_timeout: str) -> Tally:
    out = Tally()
    for s in samples:
        out.by_answer[s.answer.value] = out.by_answer.get(s.answer.value, 0) + 1
        if s.answer is Answer.NO_ANSWER:
            out.no_answer += 1
            continue
        out.answered += 1
        out.refused += s.answer is Answer.REFUSED
        out.unchecked += s.answer in UNCHECKED
        if wrong(s.fits, s.answer, on_timeout):
            out.wrong += 1
            out.wrong_samples.append(s)
    return out


def in_flight(samples: Sequence[Sample], at: float) -> list[Sample]:
    """The reviews asked before ``at`` and answered after it."""
    return [s for s in samples if s.started <= at < s.ended]


def first_correct_after(samples: Sequence[Sample], at: float) -> float | None:
    """Seconds from ``at`` to the first correct, checked verdict asked after ``at``."""
    ends = [s.ended - at for s in samples if s.started >= at and correct_judgement(s.fits, s.answer)]
    return min(ends) if ends else None


# --- readiness and state age --------------------------------------------------------------------


@dataclass(frozen=True)
class Reading:
    at: float
    ready: int  # HTTP status of /readyz, 0 when it did not answer in time
    text: str
    age: float | None  # tasgate_cluster_snapshot_age_seconds, None when /metrics did not answer


class ReadinessSampler:
    """/readyz and the state age of one replica every ``every`` seconds until `stop`."""

    def __init__(self, replica: Tasgate, every: float = 0.5, timeout: float = 2.0, limit_s: float = 300.0):
        self.replica, self.every, self.timeout, self.limit_s = replica, every, timeout, limit_s
        self.readings: list[Reading] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ReadinessSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        deadline = time.monotonic() + self.limit_s
        while not self._stop.is_set() and time.monotonic() < deadline:
            at = time.monotonic()
            status, text = self.replica.readyz(self.timeout)
            age = self._age()
            self.readings.append(Reading(at, status, text.strip()[:300], age))
            self._stop.wait(max(0.0, self.every - (time.monotonic() - at)))

    def _age(self) -> float | None:
        name = "tasgate_cluster_snapshot_age_seconds"
        samples = self.replica.metrics(self.timeout)
        found = [v for (n, _), v in samples.items() if n == name]
        return found[0] if found else None

    def max_age(self, since: float = 0.0, until: float = float("inf")) -> float:
        """The largest state age read (between ``since`` and ``until``, monotonic)."""
        ages = [r.age for r in self.readings if r.age is not None and since <= r.at <= until]
        return max(ages, default=0.0)

    def longest_silence(self, since: float = 0.0, until: float = float("inf")) -> float:
        """The longest time between two readings whose /metrics answered (the state unconfirmed)."""
        times = [r.at for r in self.readings if r.age is not None and since <= r.at <= until]
        return max((b - a for a, b in itertools.pairwise(times)), default=0.0)

    def not_ready(self) -> list[Reading]:
        return [r for r in self.readings if r.ready != 200]

    def first_ready_after(self, at: float) -> float | None:
        later = [r.at - at for r in self.readings if r.at >= at and r.ready == 200]
        return min(later) if later else None


class Flood:
    """``threads`` senders calling ``send()`` back to back until `stop`, ``total`` calls in all, or
    ``limit_s``; ``answers`` counts what each call returned (a short label)."""

    def __init__(
        self, send: Callable[[], str], threads: int = 8, total: int | None = None, limit_s: float = 120.0
    ) -> None:
        self.send, self.total, self.limit_s = send, total, limit_s
        self.answers: dict[str, int] = {}
        self.calls = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]

    def __enter__(self) -> Flood:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        self.join()

    def join(self, timeout: float = 120.0) -> None:
        for thread in self._threads:
            thread.join(timeout)

    def _take(self) -> bool:
        with self._lock:
            if self.total is not None and self.calls >= self.total:
                return False
            self.calls += 1
            return True

    def _run(self) -> None:
        deadline = time.monotonic() + self.limit_s
        while not self._stop.is_set() and time.monotonic() < deadline and self._take():
            label = self.send()
            with self._lock:
                self.answers[label] = self.answers.get(label, 0) + 1
