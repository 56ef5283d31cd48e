"""`--decision-processes`: real spawned processes, each with its own state, answering as the server does.

Every test starts real decision processes (``spawn``) over the embedded sample cluster and
compares their answers with the same app deciding on its own threads; the faults are real too
(a process killed with SIGKILL), except a process that never loads its state, which is made by
giving it no source.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pickle
import signal
import time
from typing import Any

import orjson
import pytest
import yaml
from aiohttp.test_utils import TestClient

from scorer.model import Assignment, DomainAssignment
from tests.webhook.test_server import EXAMPLES, ClientFactory, Harness, review
from webhook.files.policy import load_policy
from webhook.serve.flags import add_arguments
from webhook.serve.keys import METRICS, POLICY, PROCESSES, Settings, StateSource
from webhook.serve.process_main import WorkerConfig
from webhook.serve.processes import DecisionProcesses

MANIFESTS = EXAMPLES.parent / "tests" / "webhook" / "manifests"
SHAPES = [
    EXAMPLES / "job-rack.yaml",
    EXAMPLES / "jobset-never-fits.yaml",
    EXAMPLES / "lws-unannotated.yaml",
    EXAMPLES / "mpijob-unannotated.yaml",
    EXAMPLES / "pytorchjob-waits.yaml",
    MANIFESTS / "job-required.yaml",
    MANIFESTS / "jobset-tas-combined.yaml",
    MANIFESTS / "pod-group.yaml",
    MANIFESTS / "lws-tas.yaml",
    MANIFESTS / "raycluster.yaml",
    MANIFESTS / "tfjob.yaml",
    MANIFESTS / "pytorchjob-mnist-nccl.yaml",
    MANIFESTS / "unknown-kind.yaml",
]
VOLATILE = ("time", "latencyMicros", "generation")  # the audit fields that differ between two runs


def objects() -> list[dict[str, Any]]:
    return [obj for path in SHAPES for obj in yaml.safe_load_all(path.read_text()) if obj]


async def answers(client: TestClient[Any, Any], obj: dict[str, Any], uid: str) -> list[dict[str, Any]]:
    """The /mutate and /validate answers to one object (validated as written)."""
    found = []
    for path in ("/mutate", "/validate"):
        resp = await client.post(path, data=orjson.dumps(review(obj, uid=uid)))
        assert resp.status == 200, await resp.text()
        found.append((await resp.json())["response"])
    return found


async def until_answered(client: TestClient[Any, Any], processes: DecisionProcesses, count: int) -> None:
    """Post reviews until ``count`` processes are running and one of them has answered."""
    deadline = time.monotonic() + 60
    obj = yaml.safe_load((EXAMPLES / "job-rack.yaml").read_text())
    while processes.alive < count or processes.answered == 0:
        assert time.monotonic() < deadline, "the decision processes never answered"
        processes.answered = 0
        await answers(client, obj, "warm-up")
        await asyncio.sleep(0.2)


def pool_of(harness: Harness) -> DecisionProcesses:
    processes = harness.app[PROCESSES]
    assert isinstance(processes, DecisionProcesses)
    return processes


def audit_lines(harness: Harness) -> list[dict[str, Any]]:
    return [{k: v for k, v in line.items() if k not in VOLATILE} for line in harness.audit]


async def test_processes_answer_exactly_as_the_server_threads_do(aiohttp_client: ClientFactory) -> None:
    threads = Harness(Settings(policy=load_policy("default")))
    pooled = Harness(Settings(policy=load_policy("default"), decision_processes=2))
    here, there = await aiohttp_client(threads.app), await aiohttp_client(pooled.app)
    processes = pool_of(pooled)
    await until_answered(there, processes, 2)
    pooled.audit.clear()
    processes.answered = processes.fell_back = 0
    for i, obj in enumerate(objects()):
        assert await answers(there, obj, f"u{i}") == await answers(here, obj, f"u{i}"), obj["kind"]
    assert audit_lines(pooled) == audit_lines(threads)
    assert (processes.answered, processes.fell_back) == (2 * len(objects()), 0)
    assert any(line["podSets"] for line in pooled.audit)  # the rows crossed the pipe


async def test_a_killed_process_is_restarted_and_no_review_goes_unanswered(
    aiohttp_client: ClientFactory,
) -> None:
    pooled = Harness(Settings(policy=load_policy("default"), decision_processes=2))
    client = await aiohttp_client(pooled.app)
    processes = pool_of(pooled)
    await until_answered(client, processes, 2)
    before = set(processes.pids())
    os.kill(min(before), signal.SIGKILL)
    obj = yaml.safe_load((EXAMPLES / "jobset-never-fits.yaml").read_text())
    for i in range(20):  # some land on the dying process: answered by the other, or the server
        mutated, _ = await answers(client, obj, f"k{i}")
        assert mutated["allowed"] is False and mutated["status"]["code"] == 403
    deadline = time.monotonic() + 30
    while processes.alive < 2 or set(processes.pids()) == before:
        assert time.monotonic() < deadline, "the killed decision process was not restarted"
        await asyncio.sleep(0.2)
    restarts = pooled.app[METRICS].task_restarts
    assert sum(restarts.labels(f"decision-process-{i}")._value.get() for i in range(2)) >= 1
    processes.answered = 0
    await until_answered(client, processes, 2)


async def test_a_replaced_policy_reaches_the_processes(aiohttp_client: ClientFactory) -> None:
    threads = Harness(Settings(policy=load_policy("none")))
    pooled = Harness(Settings(policy=load_policy("default"), decision_processes=1))
    here, there = await aiohttp_client(threads.app), await aiohttp_client(pooled.app)
    processes = pool_of(pooled)
    await until_answered(there, processes, 1)
    obj = yaml.safe_load((EXAMPLES / "lws-unannotated.yaml").read_text())
    injected, _ = await answers(there, obj, "p1")
    pooled.app[POLICY].current = load_policy("none")  # as the policy poller replaces it
    processes.answered = 0
    plain = await answers(there, obj, "p2")
    assert plain == await answers(here, obj, "p2") and processes.answered == 2
    assert "patch" in injected and "patch" not in plain[0]


async def test_a_process_without_state_hands_its_reviews_back(aiohttp_client: ClientFactory) -> None:
    settings = Settings(policy=load_policy("default"), decision_processes=1)
    threads, pooled = Harness(Settings(policy=load_policy("default"))), Harness(settings)
    pooled.app[PROCESSES] = processes = DecisionProcesses(1, WorkerConfig(settings, StateSource()))
    here, there = await aiohttp_client(threads.app), await aiohttp_client(pooled.app)
    deadline = time.monotonic() + 60
    while processes.alive < 1:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.1)
    obj = yaml.safe_load((EXAMPLES / "pytorchjob-waits.yaml").read_text())
    for i in range(3):
        assert await answers(there, obj, f"n{i}") == await answers(here, obj, f"n{i}")
    assert processes.answered == 0 and processes.fell_back == 6


def test_no_processes_unless_asked() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert parser.parse_args([]).decision_processes == 0
    assert parser.parse_args(["--decision-processes", "2"]).decision_processes == 2
    assert PROCESSES not in Harness(Settings(policy=load_policy("default"))).app


def test_an_assignment_pickles_as_its_domains_not_the_trees_paths() -> None:
    paths = [("b1", "r1", f"h{i}") for i in range(10_000)]
    lazy = Assignment.of_leaves(("block", "rack", "kubernetes.io/hostname"), paths, 0, [3, 7], [8, 8], True)
    read = Assignment.of_leaves(lazy.levels, paths, 0, [3, 7], [8, 8], False)
    read.domains  # noqa: B018 - materialised before pickling, the other path of __reduce__
    for assignment in (lazy, read):
        data = pickle.dumps(assignment, 5)
        assert pickle.loads(data) == assignment and len(data) < 500
    assert pickle.loads(pickle.dumps(lazy, 5)).domains == (
        DomainAssignment(("h3",), 8),
        DomainAssignment(("h7",), 8),
    )


async def test_a_process_that_cannot_start_reports_why() -> None:
    # ``spawn`` pickles the configuration: a state maker defined in a function cannot be, so the
    # start itself raises. That error reaches the supervisor (which logs it and restarts), never
    # a second one from stopping a process that never ran.
    def local_maker() -> Any:
        raise AssertionError("never called: the process never starts")

    config = WorkerConfig(Settings(policy=load_policy("default")), StateSource(), make_state=local_maker)
    pool = DecisionProcesses(1, config)
    for _ in range(2):
        with pytest.raises((AttributeError, pickle.PicklingError), match="pickle"):
            await pool.keep(0)
    assert pool.alive == 0
