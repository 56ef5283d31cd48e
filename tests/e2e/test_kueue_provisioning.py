"""Issue 37.1 and 37.8 on the real Kueue v0.19.2: a ProvisioningRequest queue (e2e/provisioning.py).

Before this fix tasgate refused the first row (``DENIED (never-fits)``: no block of today's nodes
holds 10 eight-GPU pods), although Kueue reserves quota at once, asks for capacity, and admits the
Job onto the nodes provisioned. The harness plays the autoscaler (no cluster-autoscaler runs here):
it adds a block of 16 Ready nodes and sets the ProvisioningRequest's ``Provisioned`` condition.

- **provisioned**: tasgate allows (reason ``provisioning``, today's figure in the warning), offline
  and live alike; Kueue creates a ProvisioningRequest and admits nothing before it is provisioned,
  then admits the Job on the new block, where tasgate's placement on the cluster as it then is
  puts every pod, host for host;
- **elsewhere**: the same check limited by ``onFlavors`` to another flavor leaves the TAS flavor
  judged on today's nodes: tasgate denies a gang no block holds, and Kueue, given the same Job
  where tasgate's webhooks do not reach, keeps it pending with its own TAS message and asks for
  nothing.

Missing binaries FAIL, never skip.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import yaml

from e2e.controlplane import BinariesMissingError, ControlPlane, find_binaries
from e2e.fidelity import (
    BLOCK,
    BYPASS_NS,
    NS,
    REQUIRED,
    Fidelity,
    KueueOutcome,
    fidelity_world,
    in_namespace,
    job,
    predicted_podsets,
)
from e2e.kueue import Kueue, find_kueue, install_crds
from e2e.kueue_admission import wait_for
from e2e.provisioning import (
    ELSEWHERE_QUEUE,
    PROV_FLAVOR,
    PROV_QUEUE,
    TODAY,
    add_pool_nodes,
    provision,
    provisioning_crd_file,
    provisioning_objects,
    provisioning_requests,
    queues_active,
)

pytestmark = pytest.mark.e2e
NEW_BLOCK = {f"p1-r{r}": 4 for r in range(4)}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fidelity]:
    try:
        binaries, kueue_binary = find_binaries(), find_kueue()
    except BinariesMissingError as exc:
        pytest.fail(str(exc), pytrace=False)
    workdir = tmp_path_factory.mktemp("provisioning")
    with ControlPlane(binaries=binaries) as cp:
        install_crds(cp, [provisioning_crd_file()])  # served before Kueue starts, or no controller
        with (
            Kueue(cp, binary=kueue_binary, log_level=3) as kueue,
            fidelity_world(workdir, cp, kueue) as found,
        ):
            add_pool_nodes(cp, TODAY)
            cp.kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(provisioning_objects()))
            wait_for("Kueue to activate the check and its ClusterQueues", lambda: queues_active(cp), 60.0)
            yield found


def describe(verdict: Mapping[str, Any]) -> str:
    return f"reason={verdict['reason']} message={verdict.get('message')!r} warnings={verdict.get('warnings')}"


def hosts_of(outcomes: list[KueueOutcome]) -> tuple[str | None, dict[str, int]]:
    (outcome,) = outcomes
    ((flavor, _, hosts),) = outcome.podsets.values()
    return flavor, dict(hosts)


def test_a_gang_no_block_holds_today_is_admitted_and_placed_on_the_provisioned_block(world: Fidelity) -> None:
    obj = job("prov-big-block", 10, {REQUIRED: BLOCK}, queue=PROV_QUEUE)
    verdict = world.check(obj)
    assert (verdict["allowed"], verdict["reason"]) == (True, "provisioning"), describe(verdict)
    assert any("hold 6 of 10 pods in one block" in w for w in verdict["warnings"]), describe(verdict)
    world.sync_live(obj, verdict)
    applied = world.apply(obj)
    assert applied.returncode == 0, applied.stderr
    assert "provisions capacity first" in applied.stderr  # kubectl prints the webhook's warnings

    found: list[dict[str, Any]] = []

    def requested() -> bool:
        found[:] = provisioning_requests(world.cp, NS)
        return bool(found)

    wait_for("Kueue to create a ProvisioningRequest", requested, 30.0)
    (outcome,) = world.outcomes(obj)
    assert outcome.reserved and not outcome.admitted, outcome  # quota first, no topology yet

    provision(world.cp, found[0], NEW_BLOCK)
    flavor, hosts = hosts_of(world.wait_outcome(obj, admitted=True, timeout=60.0))
    assert flavor == PROV_FLAVOR and sum(hosts.values()) == 10
    assert all(host.startswith("p1-") for host in hosts), hosts

    after = world.check(obj, world.dump(workloads=False))  # the cluster as Kueue's second pass saw it
    assert predicted_podsets(after)["main"] == (PROV_FLAVOR, hosts), describe(after)


def test_a_check_on_another_flavor_leaves_the_tas_flavor_judged_on_todays_nodes(world: Fidelity) -> None:
    # 17 pods: more than any block holds, the provisioned one (16 hosts) included.
    obj = job("elsewhere-big-block", 17, {REQUIRED: BLOCK}, queue=ELSEWHERE_QUEUE)
    verdict = world.check(obj)
    assert (verdict["allowed"], verdict["reason"]) == (False, "never-fits"), describe(verdict)
    world.sync_live(obj, verdict)
    refused = world.apply(obj)
    assert refused.returncode != 0 and "denied the request" in refused.stderr, refused.stderr

    bypass = in_namespace(obj, BYPASS_NS)
    assert world.apply(bypass).returncode == 0
    outcomes = world.stays_pending(bypass)
    assert all("out of 17 pod(s)" in o.message for o in outcomes), outcomes
    assert provisioning_requests(world.cp, BYPASS_NS) == []
