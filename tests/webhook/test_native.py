"""The native backend on the objects the real v1.36.5 components left (tests/fixtures/native).

Each scenario is judged as it was at submit: the cluster of ``state.yaml`` plus the scenario's
Job, Workload and PodGroup (status dropped) and its pods unbound. The verdict must be what the
real scheduler did (bound / PodGroupScheduled=False), and the predicted domain the one the
scheduler bound the pods in.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.decide.decision import decide
from webhook.decide.policy import Policy
from webhook.decide.reasons import Reason
from webhook.decide.verdicts import Review
from webhook.model.workloads.native import read_native
from webhook.state.cluster import build_state
from webhook.wire.errors import InvalidObject

FIXTURES = Path(__file__).parents[1] / "fixtures" / "native"
SCENARIOS = sorted(p.name for p in FIXTURES.glob("*.yaml") if p.name != "state.yaml")


def _docs(path: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for doc in yaml.safe_load_all(path.read_text()):
        if doc and str(doc.get("kind", "")).endswith("List"):
            out += doc["items"]
        elif doc:
            out.append(doc)
    return out


BASE = _docs(FIXTURES / "state.yaml")
LABELS = {d["metadata"]["name"]: d["metadata"].get("labels", {}) for d in BASE if d["kind"] == "Node"}


def _submitted(scenario: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(gang objects without status, pods unbound, pods as the scheduler left them)."""
    docs = _docs(FIXTURES / scenario)
    pods = [d for d in docs if d["kind"] == "Pod"]
    unbound = []
    for p in pods:
        q = copy.deepcopy(p)
        q["spec"].pop("nodeName", None)
        q.pop("status", None)
        unbound.append(q)
    gang = [copy.deepcopy(d) for d in docs if d["kind"] in ("Workload", "PodGroup", "Job")]
    for d in gang:
        d.pop("status", None)
    return gang, unbound, pods


def _scheduled(pg: Mapping[str, Any]) -> bool:
    return any(
        c["type"] == "PodGroupScheduled" and c["status"] == "True"
        for c in (pg.get("status") or {}).get("conditions", [])
    )


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_verdict_and_domain_agree_with_the_scheduler(scenario: str) -> None:
    gang, unbound, pods = _submitted(scenario)
    state = build_state(BASE + gang + unbound)
    (pg,) = [d for d in _docs(FIXTURES / scenario) if d["kind"] == "PodGroup"]
    key = ((pg["spec"].get("schedulingConstraints") or {}).get("topology") or [{}])[0].get("key")
    bound = [LABELS[p["spec"]["nodeName"]] for p in pods if p["spec"].get("nodeName")]
    for obj in gang:
        d = decide(Review(obj, obj["metadata"]["namespace"]), state, Policy("test"))
        if not _scheduled(pg):  # the scheduler left it pending: never fits, or must wait
            # the README says which: 'must-wait' fits the empty cluster, the rest never fit
            expected = Reason.WAITS if "must-wait" in scenario else Reason.NEVER_FITS
            if "short-of-min-count" in scenario and obj["kind"] == "Workload":
                # its pods come from a Job only the PodGroup and the Job are judged with (denied):
                # from the Workload's side more pods may still come
                assert d.allowed and any("waits for more pods" in w for w in d.warnings)
                continue
            if obj["kind"] == "Workload" and key is not None and expected is Reason.NEVER_FITS:
                # a template's key binds no PodGroup (the scheduler reads the PodGroup's own):
                # a warning with the numbers, the PodGroup carrying the key is the denial
                assert d.allowed and any("would never be scheduled" in w for w in d.warnings)
                continue
            assert d.reason is expected, (obj["kind"], d.reason, d.warnings)
            assert d.allowed == (expected is Reason.WAITS)
            continue
        assert d.reason is Reason.FITS, (obj["kind"], d.reason, d.message, d.warnings)
        (v,) = d.pod_sets
        assert v.now is not None and v.now.assignment is not None
        (placed,) = v.now.assignment.domains
        assert placed.count == len(bound)
        if key is not None:
            assert {labels[key] for labels in bound} == {placed.values[0]}


def test_never_fits_names_the_numbers() -> None:
    gang, unbound, _ = _submitted("rack-never-fits.yaml")
    state = build_state(BASE + gang + unbound)
    (pg,) = [d for d in gang if d["kind"] == "PodGroup"]
    d = decide(Review(pg, pg["metadata"]["namespace"]), state, Policy("test"))
    assert not d.allowed and d.reason is Reason.NEVER_FITS
    assert 'one "topology.example.com/rack" domain holds at most 6 of the 7 pods' in d.message


def test_workload_without_known_pods_is_not_checked() -> None:
    gang, _, _ = _submitted("rack-gang.yaml")
    (wl,) = [d for d in gang if d["kind"] == "Workload"]
    d = decide(Review(wl, wl["metadata"]["namespace"]), build_state(BASE), Policy("test"))
    assert d.allowed and d.reason is Reason.NATIVE_UNKNOWN
    assert "no pod that will join it is known" in d.warnings[0]


@pytest.mark.parametrize("count", [2**64, -5, 4.5, "3"])
def test_a_job_joining_a_group_with_an_absurd_count_is_refused_by_its_field(count: object) -> None:
    """The Job's count is read as a Kueue Job's is (`batch.job`): one that is no plausible
    non-negative integer is refused naming the field, never an overflow in the scorer."""
    gang, _unbound, _ = _submitted("job-in-group.yaml")
    state = build_state(BASE + [d for d in gang if d["kind"] != "Job"])
    (job,) = [d for d in gang if d["kind"] == "Job"]
    job["spec"]["parallelism"] = job["spec"]["completions"] = count
    d = decide(Review(job, job["metadata"]["namespace"]), state, Policy("test"))
    assert not d.allowed and d.reason is Reason.INVALID, d
    assert "spec.parallelism" in d.message


def test_queued_job_stays_kueues() -> None:
    gang, _unbound, _ = _submitted("job-gang.yaml")
    (job,) = [d for d in gang if d["kind"] == "Job"]
    job["metadata"].setdefault("labels", {})["kueue.x-k8s.io/queue-name"] = "q"
    d = decide(Review(job, job["metadata"]["namespace"]), build_state(BASE + gang), Policy("test"))
    assert d.reason is not Reason.FITS and not (d.pod_sets and d.pod_sets[0].native)


def test_job_controller_objects_are_read_as_created() -> None:
    gang, _, _ = _submitted("job-gang.yaml")
    wl = read_native(next(d for d in gang if d["kind"] == "Workload"))
    pg = read_native(next(d for d in gang if d["kind"] == "PodGroup"))
    assert wl.controller == ("batch", "Job", "trainer") and wl.groups[0].name == "trainer-pgt-0"
    assert wl.groups[0].min_count == 3 and wl.groups[0].key is None
    assert pg.template_ref == (wl.name, "trainer-pgt-0") and pg.owner_job == "trainer"


@pytest.mark.parametrize(
    ("spec", "where"),
    [
        ({"schedulingPolicy": {}}, "exactly one of"),
        ({"schedulingPolicy": {"gang": {"minCount": 0}}}, "greater than or equal to 1"),
        (
            {
                "schedulingPolicy": {"basic": {}},
                "schedulingConstraints": {"topology": [{"key": "a"}, {"key": "b"}]},
            },
            "at most 1",
        ),
        (
            {"schedulingPolicy": {"basic": {}}, "schedulingConstraints": {"topology": [{"key": "a b"}]}},
            "label key",
        ),
    ],
)
def test_pod_group_validation(spec: dict[str, Any], where: str) -> None:
    obj = {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "x"},
        "spec": spec,
    }
    with pytest.raises(InvalidObject, match=where):
        read_native(obj)


def _native_policy(level: str, mode: str = "required", loosest: str | None = None) -> Policy:
    from webhook.decide.policy import DefaultTopology, Gang, Inject, Match, Rule  # noqa: PLC0415

    levels = ("topology.example.com/block", "topology.example.com/rack", "kubernetes.io/hostname")
    rule = Rule("native", Match(), Inject(mode, level, loosest), Gang("native"))
    return Policy("native", rules=(rule,), default_topology=DefaultTopology("t", levels))


@pytest.mark.parametrize("level", ["topology.example.com/rack", "tightest"])
def test_policy_adds_the_topology_to_the_job_controllers_pod_group(level: str) -> None:
    gang, unbound, _ = _submitted("job-gang.yaml")
    state = build_state(BASE + gang + unbound)
    (pg,) = [d for d in gang if d["kind"] == "PodGroup"]
    d = decide(Review(pg, pg["metadata"]["namespace"]), state, _native_policy(level))
    assert d.reason is Reason.FITS
    rack = "topology.example.com/rack"  # 3 pods of 4 GPUs: a host holds 2, a rack 6
    assert d.patch == (
        {"op": "add", "path": "/spec/schedulingConstraints", "value": {"topology": [{"key": rack}]}},
    )
    (v,) = d.pod_sets
    assert v.now is not None and v.now.assignment is not None and v.now.assignment.levels == (rack,)


def test_policy_never_overwrites_a_written_key_and_preferred_adds_nothing() -> None:
    gang, unbound, _ = _submitted("rack-gang.yaml")
    state = build_state(BASE + gang + unbound)
    (pg,) = [d for d in gang if d["kind"] == "PodGroup"]
    written = decide(Review(pg, pg["metadata"]["namespace"]), state, _native_policy("kubernetes.io/hostname"))
    assert written.patch == () and written.reason is Reason.FITS
    job_gang, job_pods, _ = _submitted("job-gang.yaml")
    (bare,) = [d for d in job_gang if d["kind"] == "PodGroup"]
    state = build_state(BASE + job_gang + job_pods)
    preferred = decide(
        Review(bare, bare["metadata"]["namespace"]), state, _native_policy("tightest", "preferred")
    )
    assert preferred.patch == () and any("only a required topology" in w for w in preferred.warnings)


def test_a_job_is_judged_with_the_key_its_pod_group_will_get() -> None:
    """7 pods of 4 GPUs fit the cluster (no key) but no rack: with the policy's rack, denied."""
    gang, _, _ = _submitted("job-gang.yaml")
    (job,) = [d for d in gang if d["kind"] == "Job"]
    job = copy.deepcopy(job)
    job["spec"]["parallelism"] = job["spec"]["completions"] = 7
    state = build_state(BASE)
    plain = decide(Review(job, job["metadata"]["namespace"]), state, Policy("test"))
    ruled = decide(
        Review(job, job["metadata"]["namespace"]), state, _native_policy("topology.example.com/rack")
    )
    assert plain.reason is Reason.FITS and plain.patch == ()
    assert ruled.reason is Reason.NEVER_FITS and ruled.patch == ()


def _mixed(gpus: list[int], classes: list[str | None]) -> list[dict[str, Any]]:
    """A rack gang of pods of several sizes (4 cpu and 32Gi per GPU, as the fixtures' pods)."""
    pg = {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "mixed", "namespace": "default"},
        "spec": {
            "schedulingPolicy": {"gang": {"minCount": len(gpus)}},
            "schedulingConstraints": {"topology": [{"key": "topology.example.com/rack"}]},
        },
    }
    pods: list[dict[str, Any]] = []
    for i, (g, cls) in enumerate(zip(gpus, classes, strict=True)):
        requests = {"cpu": str(4 * g), "memory": f"{32 * g}Gi", "nvidia.com/gpu": str(g)}
        spec: dict[str, Any] = {
            "schedulingGroup": {"podGroupName": "mixed"},
            "containers": [{"name": "c", "image": "x", "resources": {"requests": requests}}],
        }
        if cls:
            spec["priorityClassName"] = cls
        pods.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"p{i}", "namespace": "default"},
                "spec": spec,
            }
        )
    classes_objs = [
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": n}, "value": v}
        for n, v in (("first", 1000), ("last", -10))
    ]
    return [pg, *pods, *classes_objs]


@pytest.mark.parametrize(
    ("gpus", "classes", "expected", "domain"),
    [
        ([8, 4, 4, 4], ["first", None, None, None], Reason.FITS, "r1"),
        ([4, 4, 4, 8], [None, None, None, "last"], Reason.NEVER_FITS, None),
        ([8, 4, 4, 4], ["last", None, None, None], Reason.NEVER_FITS, None),  # priority, not order
    ],
)
def test_pods_of_several_sizes_in_the_schedulers_order(
    gpus: list[int], classes: list[str | None], expected: Reason, domain: str | None
) -> None:
    """e2e-native's rack-mixed rows: the PodGroup cycle tries pods by priority, each on its least
    allocated host, so a big pod last finds no host free in any rack, even empty."""
    objects = _mixed(gpus, classes)
    state = build_state(BASE + objects)
    d = decide(Review(objects[0], "default"), state, Policy("test"))
    assert d.reason is expected, (d.message, d.warnings)
    if domain is not None:
        (v,) = d.pod_sets
        assert v.now is not None and v.now.assignment is not None
        assert v.now.assignment.domains[0].values == (domain,)
