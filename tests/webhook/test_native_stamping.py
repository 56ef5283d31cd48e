"""What the kube-scheduler reads is the PodGroup, and a gang short of pods is never tried.

Fed with the captured objects of tests/fixtures/native, changed only where a scenario needs it
(a PodGroup without the template's key, a Job's parallelism below the PodGroup's minCount):

- the Job controller, the only component of v1.36.5 that stamps PodGroups from a Workload, copies
  only ``schedulingPolicy``; the scheduler reads the PodGroup's own ``schedulingConstraints``. So a
  Workload whose template key never fits is a warning, the PodGroup carrying that key the denial;
- GangScheduling's PreEnqueue keeps every pod of a gang out of the queue until ``minCount`` exist:
  a Job making fewer is never tried (denied), pods known so far fewer than ``minCount`` wait (warned);
- messages read as sentences (no "at most 2 of the 2").
"""

from __future__ import annotations

import copy
from typing import Any

from tests.webhook.test_native import BASE, _submitted
from webhook.decide.decision import decide
from webhook.decide.policy import Policy
from webhook.decide.reasons import Reason
from webhook.decide.verdicts import Decision, Review
from webhook.state.cluster import build_state

RACK = "topology.example.com/rack"


def _judge(obj: dict[str, Any], state_objects: list[dict[str, Any]]) -> Decision:
    return decide(Review(obj, obj["metadata"]["namespace"]), build_state(state_objects), Policy("test"))


def _kind(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind]
    return found


def test_a_template_key_that_never_fits_warns_when_the_pod_group_has_none() -> None:
    """7 pods of 4 GPUs: no rack holds them (6 at most), the cluster does; the PodGroup the
    scheduler reads has no key, so the pods run and the Workload must not be denied."""
    gang, unbound, _ = _submitted("rack-never-fits.yaml")
    _kind(gang, "PodGroup")["spec"].pop("schedulingConstraints")
    objects = BASE + gang + unbound
    workload = _judge(_kind(gang, "Workload"), objects)
    assert workload.allowed and workload.reason is Reason.FITS, workload.message
    (note,) = [w for w in workload.warnings if "would never be scheduled" in w]
    assert f'one "{RACK}" domain holds at most 6 of the 7 pods its gang needs' in note
    group = _judge(_kind(gang, "PodGroup"), objects)
    assert group.allowed and group.reason is Reason.FITS


def test_the_pod_group_carrying_the_key_is_the_denial() -> None:
    gang, unbound, _ = _submitted("rack-never-fits.yaml")
    objects = BASE + gang + unbound
    assert _judge(_kind(gang, "Workload"), objects).allowed
    group = _judge(_kind(gang, "PodGroup"), objects)
    assert not group.allowed and group.reason is Reason.NEVER_FITS


def test_a_template_that_never_fits_even_without_its_key_is_denied() -> None:
    """13 pods of 8 GPUs: 104 GPUs, more than the 96 of the whole cluster."""
    gang, unbound, _ = _submitted("rack-never-fits.yaml")
    _kind(gang, "Workload")["spec"]["podGroupTemplates"][0]["schedulingPolicy"]["gang"]["minCount"] = 13
    pods = []
    for i in range(13):
        pod = copy.deepcopy(unbound[0])
        pod["metadata"]["name"] = f"big-{i}"
        requests = pod["spec"]["containers"][0]["resources"]["requests"]
        requests.update({"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "8"})
        pod["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "8"}
        pods.append(pod)
    workload = _judge(_kind(gang, "Workload"), BASE + gang + pods)
    assert not workload.allowed and workload.reason is Reason.NEVER_FITS
    assert "the cluster holds at most 12 of the 13 pods its gang needs" in workload.message


def _short_job() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """job-in-group.yaml with the Job's parallelism cut to 2 below the PodGroup's minCount 3."""
    gang, _, _ = _submitted("job-in-group.yaml")
    job = _kind(gang, "Job")
    job["spec"]["parallelism"] = job["spec"]["completions"] = 2
    return gang, job


def test_a_job_making_fewer_pods_than_its_pod_groups_min_count_is_denied() -> None:
    gang, job = _short_job()
    d = _judge(job, BASE + gang)
    assert not d.allowed and d.reason is Reason.NEVER_FITS
    assert 'Job "jobgroup" runs at most 2 pods at once, fewer than its minCount' in d.message
    assert "tries none of its pods until 3 exist" in d.message


def test_the_pod_group_of_such_a_job_is_denied_too() -> None:
    gang, _ = _short_job()
    d = _judge(_kind(gang, "PodGroup"), BASE + gang)
    assert not d.allowed and d.reason is Reason.NEVER_FITS, (d.message, d.warnings)
    assert "runs at most 2 pods at once" in d.message


def test_the_same_job_at_full_parallelism_fits() -> None:
    gang, _, _ = _submitted("job-in-group.yaml")
    assert _judge(_kind(gang, "Job"), BASE + gang).reason is Reason.FITS
    assert _judge(_kind(gang, "PodGroup"), BASE + gang).reason is Reason.FITS


def test_pods_known_below_min_count_only_warn() -> None:
    """Hand-written pods: more may still be created, so the gang waits for them (a warning)."""
    gang, unbound, _ = _submitted("rack-gang.yaml")
    pg = _kind(gang, "PodGroup")
    pg["spec"]["schedulingPolicy"]["gang"]["minCount"] = 5
    d = _judge(pg, BASE + gang + unbound)
    assert d.allowed, d.message
    assert any("waits for more pods: 4 pods name it so far" in w for w in d.warnings), d.warnings


def test_a_workload_naming_a_job_only_in_controller_ref_is_not_certain() -> None:
    """The Job controller skips a Workload the Job does not control (no ownerReference)."""
    gang, _, _ = _submitted("job-gang.yaml")
    workload, job = _kind(gang, "Workload"), _kind(gang, "Job")
    workload["metadata"].pop("ownerReferences")
    workload["spec"]["podGroupTemplates"][0]["schedulingPolicy"]["gang"]["minCount"] = 5
    d = _judge(workload, [*BASE, job, workload])
    assert d.allowed and any("waits for more pods" in w for w in d.warnings), (d.message, d.warnings)
    controlled = _kind(_submitted("job-gang.yaml")[0], "Workload")
    controlled["spec"]["podGroupTemplates"][0]["schedulingPolicy"]["gang"]["minCount"] = 5
    denied = _judge(controlled, [*BASE, job, controlled])
    assert not denied.allowed and "runs at most 3 pods at once" in denied.message


def test_bound_pods_confining_the_rest_say_where() -> None:
    """Two of four 4-GPU pods bound in r2 (12 free, 4 left after them): the other two need 8."""
    gang, unbound, _ = _submitted("rack-gang.yaml")
    for pod, node in zip(unbound[:2], ("r2-h2", "r2-h2"), strict=True):
        pod["spec"]["nodeName"] = node
    d = _judge(_kind(gang, "PodGroup"), BASE + gang + unbound)
    assert d.allowed and d.reason is Reason.WAITS, (d.message, d.warnings)
    (wait,) = [w for w in d.warnings if "must wait" in w]
    assert 'its 2 pods already bound sit in "r2", which holds 1 of the 2 more needed' in wait
    assert "of the 2 pods" not in wait
