"""Per-pod requests, checked case by case against Kubernetes' PodRequests rules."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from webhook.model.podrequests import is_extended, pod_requests, stored_pod_requests
from webhook.wire.errors import InvalidObject

GI = 2**30
MI = 2**20


def spec(text: str) -> dict[str, Any]:
    loaded = yaml.safe_load(text)
    assert isinstance(loaded, dict)
    return loaded


def container(name: str, requests: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": requests} if requests else {}
    return {"name": name, "image": "busybox", "resources": resources, **extra}


CASES: list[tuple[str, str, dict[str, int]]] = [
    (
        "app containers add up",
        """
        containers:
        - {name: a, resources: {requests: {cpu: 500m, memory: 1Gi}}}
        - {name: b, resources: {requests: {cpu: "1", memory: 512Mi, nvidia.com/gpu: "2"}}}
        """,
        {"cpu": 1500, "memory": GI + 512 * MI, "nvidia.com/gpu": 2},
    ),
    (
        "a limit stands in for a missing request, per resource",
        """
        containers:
        - name: a
          resources: {requests: {cpu: 250m}, limits: {cpu: "2", memory: 2Gi, nvidia.com/gpu: 1}}
        """,
        {"cpu": 250, "memory": 2 * GI, "nvidia.com/gpu": 1},
    ),
    (
        "a regular init container larger than the app sum sets the floor",
        """
        initContainers:
        - {name: fetch, resources: {requests: {cpu: "4", memory: 100Mi}}}
        containers:
        - {name: a, resources: {requests: {cpu: "1", memory: 1Gi}}}
        """,
        {"cpu": 4000, "memory": GI},
    ),
    (
        "init containers take the max between them, not the sum",
        """
        initContainers:
        - {name: one, resources: {requests: {cpu: "3"}}}
        - {name: two, resources: {requests: {cpu: "2"}}}
        containers:
        - {name: a, resources: {requests: {cpu: "1"}}}
        """,
        {"cpu": 3000},
    ),
    (
        "a sidecar started before an init container adds to it",
        """
        initContainers:
        - {name: proxy, restartPolicy: Always, resources: {requests: {cpu: "1"}}}
        - {name: warmup, resources: {requests: {cpu: "3"}}}
        containers:
        - {name: a, resources: {requests: {cpu: "1"}}}
        """,
        {"cpu": 4000},
    ),
    (
        "a sidecar started after an init container does not add to it",
        """
        initContainers:
        - {name: warmup, resources: {requests: {cpu: "3"}}}
        - {name: proxy, restartPolicy: Always, resources: {requests: {cpu: "1"}}}
        containers:
        - {name: a, resources: {requests: {cpu: "1"}}}
        """,
        {"cpu": 3000},
    ),
    (
        "sidecars keep running next to the app containers",
        """
        initContainers:
        - {name: log, restartPolicy: Always, resources: {requests: {cpu: 500m, memory: 64Mi}}}
        - {name: mesh, restartPolicy: Always, resources: {limits: {cpu: 500m, memory: 64Mi}}}
        containers:
        - {name: a, resources: {requests: {cpu: "2", memory: 1Gi}}}
        """,
        {"cpu": 3000, "memory": GI + 128 * MI},
    ),
    (
        "overhead is added last",
        """
        overhead: {cpu: 250m, memory: 120Mi}
        containers:
        - {name: a, resources: {requests: {cpu: "1", memory: 1Gi}}}
        """,
        {"cpu": 1250, "memory": GI + 120 * MI},
    ),
    (
        "pod-level requests replace the container total for cpu and memory only",
        """
        resources: {requests: {cpu: "4", memory: 8Gi}}
        containers:
        - {name: a, resources: {requests: {cpu: "1", memory: 1Gi, nvidia.com/gpu: 1}}}
        """,
        {"cpu": 4000, "memory": 8 * GI, "nvidia.com/gpu": 1},
    ),
    (
        "a pod-level limit counts only where no container asks",
        """
        resources: {limits: {cpu: "4", memory: 8Gi}}
        containers:
        - {name: a, resources: {requests: {cpu: "1"}}}
        """,
        {"cpu": 1000, "memory": 8 * GI},
    ),
    (
        "amounts are summed exactly and rounded once",
        """
        containers:
        - {name: a, resources: {requests: {memory: 500m, cpu: 100500u}}}
        - {name: b, resources: {requests: {memory: 500m, cpu: 100500u}}}
        """,
        {"memory": 1, "cpu": 201},
    ),
    (
        "zero amounts are left out",
        """
        containers:
        - {name: a, resources: {requests: {cpu: "0", memory: 0Gi, example.com/foo: "0"}}}
        """,
        {},
    ),
    ("no resources at all", "containers: [{name: a, image: busybox}]", {}),
]


@pytest.mark.parametrize(("text", "expected"), [(c[1], c[2]) for c in CASES], ids=[c[0] for c in CASES])
def test_pod_requests(text: str, expected: dict[str, int]) -> None:
    assert pod_requests(spec(text), "spec.template.spec") == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "containers: [{name: a}, {name: b, resources: {requests: {memory: 12x}}}]",
            'spec.template.spec.containers[1].resources.requests.memory: Invalid value: "12x": unknown',
        ),
        (
            "containers: [{name: a, resources: {limits: {cpu: -1}}}]",
            'spec.template.spec.containers[0].resources.limits.cpu: Invalid value: "-1": must be greater',
        ),
        (
            "initContainers: [{name: i, resources: {requests: {cpu: 1.2.3}}}]",
            "spec.template.spec.initContainers[0].resources.requests.cpu: Invalid value",
        ),
        ("overhead: {cpu: lots}", "spec.template.spec.overhead.cpu: Invalid value"),
        ("containers: {name: a}", "spec.template.spec.containers: Invalid value: must be a list"),
        ("containers: [a]", "spec.template.spec.containers[0]: Invalid value: must be an object"),
        (
            "containers: [{name: a, resources: [1]}]",
            "containers[0].resources: Invalid value: must be an object",
        ),
    ],
)
def test_errors_name_the_field(text: str, expected: str) -> None:
    with pytest.raises(InvalidObject) as caught:
        pod_requests(spec(text), "spec.template.spec")
    assert expected in str(caught.value)


def test_all_errors_are_reported_together() -> None:
    text = """
    containers:
    - {name: a, resources: {requests: {cpu: x, memory: y}}}
    - {name: b, resources: {limits: {cpu: z}}}
    """
    with pytest.raises(InvalidObject) as caught:
        pod_requests(spec(text), "spec")
    paths = [e.path for e in caught.value.errors]
    assert paths == [
        "spec.containers[0].resources.requests.cpu",
        "spec.containers[0].resources.requests.memory",
        "spec.containers[1].resources.limits.cpu",
    ]
    assert str(caught.value).startswith("[spec.containers[0]")


amounts = st.dictionaries(
    st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), st.integers(0, 64), max_size=3
)


@given(st.lists(amounts, max_size=4), st.lists(st.tuples(amounts, st.booleans()), max_size=4), amounts)
def test_adding_a_container_never_lowers_a_request(
    apps: list[dict[str, int]], inits: list[tuple[dict[str, int], bool]], extra: dict[str, int]
) -> None:
    def build(app_requests: list[dict[str, int]]) -> dict[str, Any]:
        return {
            "containers": [
                container(f"c{i}", {k: str(v) for k, v in r.items()}) for i, r in enumerate(app_requests)
            ],
            "initContainers": [
                container(
                    f"i{i}",
                    {k: str(v) for k, v in r.items()},
                    **({"restartPolicy": "Always"} if side else {}),
                )
                for i, (r, side) in enumerate(inits)
            ],
        }

    before = pod_requests(build(apps), "spec")
    after = pod_requests(build([*apps, extra]), "spec")
    for name, amount in before.items():
        assert after.get(name, 0) >= amount
    for name, amount in extra.items():
        assert after.get(name, 0) >= amount * (1000 if name == "cpu" else 1)


@given(st.lists(amounts, min_size=1, max_size=5))
def test_app_containers_alone_sum_exactly(apps: list[dict[str, int]]) -> None:
    # Extended resources (nvidia.com/gpu) are whole numbers; the API server refuses fractions.
    apps = [{k: (v * 1000 if is_extended(k) else v) for k, v in r.items()} for r in apps]
    pod = {"containers": [container(f"c{i}", {k: f"{v}m" for k, v in r.items()}) for i, r in enumerate(apps)]}
    expected: dict[str, int] = {}
    for r in apps:
        for name, milli in r.items():
            expected[name] = expected.get(name, 0) + milli
    # cpu stays in milli-units; other resources are whole units rounded up once, after summing.
    want = {n: (m if n == "cpu" else -(-m // 1000)) for n, m in expected.items()}
    assert pod_requests(pod, "spec") == {n: v for n, v in want.items() if v}


@pytest.mark.parametrize("amount", ["0.5", "500m", "1.5"])
def test_fractional_extended_resources_are_invalid(amount: str) -> None:
    """The API server refuses ``nvidia.com/gpu: 0.5``; tasgate must not admit it."""
    text = f'containers:\n- {{name: a, resources: {{requests: {{nvidia.com/gpu: "{amount}"}}}}}}\n'
    with pytest.raises(InvalidObject, match="must be an integer"):
        pod_requests(spec(text), "spec")


def test_whole_extended_and_fractional_native_resources_are_fine() -> None:
    text = (
        'containers:\n- {name: a, resources: {requests: {nvidia.com/gpu: "2", cpu: 500m, memory: 1.5Gi}}}\n'
    )
    assert pod_requests(spec(text), "spec")["nvidia.com/gpu"] == 2


def _spec(resources: Any) -> dict[str, Any]:
    return {"containers": [{"name": "c", "resources": resources}]}


@pytest.mark.parametrize(
    ("good", "bad"),
    [
        ({"requests": {"cpu": 1}}, {"requests": {"cpu": True}}),  # 1 == True, but not as a quantity
        ({"requests": {"cpu": "1"}}, {"requests": "cpu"}),
        ({}, []),  # no resources is fine, a list where they go is not
        (None, ""),
    ],
)
def test_remembered_requests_never_hide_an_error(good: Any, bad: Any) -> None:
    """Templates are read through the shape cache: a shape remembered as valid must not answer
    for a spec that `pod_requests` refuses, whatever was read before it."""
    assert stored_pod_requests(_spec(good), "spec") == pod_requests(_spec(good), "spec")
    for read in (pod_requests, stored_pod_requests):
        with pytest.raises(InvalidObject):
            read(_spec(bad), "spec")


def test_remembered_requests_name_the_path_of_each_error() -> None:
    bad = _spec({"requests": {"cpu": "lots"}})
    for path in ("spec.template.spec", "spec.replicatedJobs[1].template.spec.template.spec"):
        with pytest.raises(InvalidObject) as raised:
            stored_pod_requests(bad, path)
        assert path in str(raised.value)


_VALUES = (1, True, 1.0, 1.5, "1", "1.0", None, float("nan"), float("inf"), 2**70, [], {}, "lots", "null")
_AMOUNTS = st.dictionaries(st.sampled_from(("cpu", "nvidia.com/gpu")), st.sampled_from(_VALUES), max_size=2)
_RESOURCES = st.one_of(
    st.sampled_from(_VALUES),
    st.dictionaries(
        st.sampled_from(("requests", "limits", "claims")),
        st.one_of(st.sampled_from(_VALUES), _AMOUNTS),
        max_size=2,
    ),
)
_CONTAINER = st.fixed_dictionaries(
    {}, optional={"restartPolicy": st.sampled_from(("Always", None, 1)), "resources": _RESOURCES}
)
_SPEC = st.builds(
    lambda field, containers: {field: containers},
    st.sampled_from(("containers", "initContainers")),
    st.lists(_CONTAINER, max_size=2),
)


def _read(read: Any, spec: dict[str, Any]) -> Any:
    try:
        return read(spec, "spec")
    except InvalidObject as exc:
        return str(exc)


@settings(max_examples=400, deadline=None)
@given(st.lists(_SPEC, min_size=2, max_size=4))
def test_remembered_requests_equal_computed_ones_for_any_values(specs: list[dict[str, Any]]) -> None:
    """Whatever was read before, a spec reads as `pod_requests` reads it: the same amounts or the
    same error. The values are the ones a shape key could confuse (1, true, 1.0, "1"; null, NaN
    and infinity, which JSON writes alike; an int past 64 bits), read one after the other."""
    for spec in specs:
        assert _read(stored_pod_requests, spec) == _read(pod_requests, spec)
