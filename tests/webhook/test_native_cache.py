"""Reading the kube-scheduler's cache dump (e2e/native_cache.py), on dumps the real scheduler wrote.

``tests/fixtures/native/scheduler-cache-dump.log`` holds two SIGUSR2 dumps of kube-scheduler
v1.36.5 from a ``make e2e-native`` run, each with the queue line that follows it (the lines the
scheduler logged between them left out): first the empty cluster with its five blocker pods,
then a row's 20 bound pods with the blockers deleted (a row that waits for an empty cluster).
"""

from __future__ import annotations

from pathlib import Path

from e2e.native_cache import DUMP_MARKER, cached_pods
from e2e.native_scenario import BLOCKER_NAMESPACE, BLOCKERS, nodes

LOG = (Path(__file__).parents[1] / "fixtures/native/scheduler-cache-dump.log").read_text()
SECOND = LOG.rfind(DUMP_MARKER)
FIRST_ONLY = LOG[: LOG.rfind("\n", 0, SECOND)]


def test_a_dump_gives_every_pod_on_its_node() -> None:
    found = cached_pods(FIRST_ONLY)
    assert found == {f"{BLOCKER_NAMESPACE}/blocker-{node}": node for node in BLOCKERS}


def test_the_last_complete_dump_is_the_one_read() -> None:
    found = cached_pods(LOG)
    assert found is not None and len(found) == 20
    assert {name.split("/")[0] for name in found} == {"table"}
    assert set(found.values()) <= set(nodes())


def test_a_dump_still_being_written_is_none() -> None:
    cut = LOG[: LOG.rfind("\n >\n")]
    assert cached_pods(cut) is None
    assert cached_pods(LOG[:SECOND] + LOG[SECOND : SECOND + 2000]) is None


def test_no_dump_is_none() -> None:
    assert cached_pods("") is None
    assert cached_pods(LOG[: LOG.find(DUMP_MARKER)]) is None


def test_nominated_pods_are_not_on_the_node() -> None:
    # printNodeInfo (pkg/scheduler/backend/cache/debugger/dumper.go) lists a node's nominated pods
    # after its scheduled ones: waiting for preemption, not holding the node.
    node = "\tNode name: r0-h0\n"
    nominated = (
        "\tNominated Pods(number: 1):\n"
        "\tname: waiting, namespace: table, uid: 1, phase: Pending, nominated node: r0-h0\n"
    )
    at = FIRST_ONLY.index(node)
    end = FIRST_ONLY.index("\n\t\n", at)
    text = FIRST_ONLY[:end] + "\n" + nominated.rstrip("\n") + FIRST_ONLY[end:]
    assert cached_pods(text) == cached_pods(FIRST_ONLY)
