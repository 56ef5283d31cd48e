"""The policy's gang shapes (``spec.gangShapes``): defaults, parsing, and every mistake named at load."""

from __future__ import annotations

import pytest

from webhook.decide.policy import DEFAULT_GANG_SHAPES, NONE_POLICY, GangShape, PolicyError
from webhook.decide.policy_text import parse_policy
from webhook.files.policy import load_policy

HEAD = "apiVersion: tasgate.io/v1alpha1\nkind: AdmissionPolicy\n"


def test_default_shapes_are_8x8_and_32x8() -> None:
    assert [s.text for s in DEFAULT_GANG_SHAPES] == ["8x8", "32x8"]
    assert load_policy("default").gang_shapes == DEFAULT_GANG_SHAPES
    assert NONE_POLICY.gang_shapes == DEFAULT_GANG_SHAPES, "figures need no injection policy"
    assert parse_policy(HEAD + "spec: {}\n", "p.yaml").gang_shapes == DEFAULT_GANG_SHAPES


def test_shapes_from_a_policy_in_their_order() -> None:
    text = HEAD + "spec:\n  gangShapes: [{pods: 16, gpusPerPod: 4}, {pods: 2, gpusPerPod: 8}]\n"
    assert parse_policy(text, "p.yaml").gang_shapes == (GangShape(16, 4), GangShape(2, 8))
    assert parse_policy(HEAD + "spec: {gangShapes: []}\n", "p.yaml").gang_shapes == ()


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ("{gangShapes: {pods: 8}}", "spec.gangShapes: must be a list"),
        ("{gangShapes: [8x8]}", "spec.gangShapes[0]: must be a mapping"),
        ("{gangShapes: [{pods: 8, gpus: 8}]}", "spec.gangShapes[0]: unknown field(s) gpus"),
        (
            "{gangShapes: [{gpusPerPod: 8}]}",
            "spec.gangShapes[0].pods: must be a non-negative integer, got None",
        ),
        ("{gangShapes: [{pods: 0, gpusPerPod: 8}]}", "spec.gangShapes[0].pods: must be at least 1, got 0"),
        (
            "{gangShapes: [{pods: 8, gpusPerPod: '8'}]}",
            "spec.gangShapes[0].gpusPerPod: must be a non-negative",
        ),
        ("{gangShapes: [{pods: 8, gpusPerPod: 8}, {pods: 8, gpusPerPod: 8}]}", "each named once"),
        (
            "{gangShapes: [" + ", ".join(f"{{pods: {n}, gpusPerPod: 1}}" for n in range(1, 18)) + "]}",
            "at most 16",
        ),
    ],
)
def test_bad_shapes_are_refused_at_load(spec: str, error: str) -> None:
    with pytest.raises(PolicyError) as caught:
        parse_policy(HEAD + f"spec: {spec}\n", "p.yaml")
    assert error in str(caught.value) and str(caught.value).startswith("p.yaml: spec.gangShapes")
