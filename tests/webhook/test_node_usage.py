"""`state.snapshot_usage.NodeUsage`: the per-node usage a live state holds, in shards shared
between generations; and the holder freeing the states it lets go of off the loop."""

from __future__ import annotations

import threading
import weakref
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.live import holder as holder_module
from webhook.live.holder import StateHolder
from webhook.state.cluster import ClusterState
from webhook.state.snapshot_usage import SHARDS, NodeUsage, UsageShards

NAMES = st.sampled_from([f"n{i}" for i in range(40)])
REQUESTS: st.SearchStrategy[dict[str, int] | None] = st.one_of(
    st.none(), st.just({}), st.dictionaries(st.sampled_from(["cpu", "gpu"]), st.integers(1, 9))
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.tuples(NAMES, REQUESTS), max_size=8), max_size=6))
def test_every_published_usage_equals_the_dict_of_its_moment_and_never_changes(
    rounds: list[list[tuple[str, dict[str, int] | None]]],
) -> None:
    shards, model = UsageShards(), dict[str, dict[str, int]]()
    published: list[tuple[NodeUsage, dict[str, dict[str, int]]]] = []
    for changes in rounds:
        for name, requests in changes:
            shards.set(name, requests)
            if requests:
                model[name] = requests
            else:
                model.pop(name, None)
        published.append((shards.publish(), dict(model)))
    for usage, then in published:  # later changes copied the shards they touched
        assert usage == then and dict(usage) == then and len(usage) == len(then)
        for name in [f"n{i}" for i in range(40)]:
            assert usage.get(name) == then.get(name) and (name in usage) == (name in then)
            assert usage.get(name, {}) == then.get(name, {})


def test_a_publish_shares_the_shards_no_change_touched() -> None:
    shards = UsageShards({f"n{i}": {"cpu": i + 1} for i in range(5000)})
    first = shards.publish()
    shards.set("n1", {"cpu": 100})
    second = shards.publish()
    shared = sum(a is b for a, b in zip(first._shards, second._shards, strict=True))
    assert shared == SHARDS - 1
    assert first["n1"] == {"cpu": 2} and second["n1"] == {"cpu": 100}
    assert shards.publish()._shards == second._shards, "nothing changed: every shard shared"


def test_the_states_the_holder_lets_go_of_are_freed() -> None:
    holder, freed, base = StateHolder(), threading.Semaphore(0), ClusterState()
    refs = []
    for generation in range(holder_module.RECENT_KEPT + 3):
        state = replace(base, generation=generation)  # the same structure: never kept longer
        refs.append(weakref.ref(state))
        weakref.finalize(state, freed.release)
        holder.publish(state)
    del state
    for _ in range(2):  # the two oldest, pushed out of the recent states
        assert freed.acquire(timeout=10)
    assert [ref() is None for ref in refs] == [True] * 2 + [False] * (holder_module.RECENT_KEPT + 1)
