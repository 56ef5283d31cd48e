"""Prometheus metrics, labelled to join with Kueue's: `cluster_queue`, and a LocalQueue as `name` +
`namespace` (Kueue's kueue_local_queue_* metrics).

Every label value comes from a bounded set (``handlers.request_labels``): names the cluster
state holds, the known workload kinds, fixed endpoints and operations, else "other".

Request metrics are updated per review, decisions once per API request (``count_review``);
topology gauges are computed on scrape from the current cluster state, once per state generation
(and policy: the gang shapes are the policy's). The fragmentation figures come from
``figures.fragmentation``: free accelerators per domain, and for each gang shape how many gangs the
best domain of a level holds and how many domains hold one.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterator
from typing import NamedTuple

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

import scorer
from scorer.request import Engine
from scorer.tree import Tree
from webhook.decide.policy import DEFAULT_GANG_SHAPES, DEFAULT_GPU_RESOURCES, Policy
from webhook.figures.fragmentation import FlavorFigures, domain_sums, flavor_figures, tas_flavors
from webhook.serve.timed_engine import TimedEngine
from webhook.state.cluster import ClusterState

StateReader = Callable[[], tuple[ClusterState | None, float | None]]

LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


DECISION_LABELS = ("operation", "kind", "decision", "reason")


class RequestLabels(NamedTuple):
    """The label values of one review, each from a bounded set (built by ``handlers.request_labels``)."""

    endpoint: str
    operation: str
    kind: str
    cluster_queue: str
    local_queue: str
    namespace: str


class Metrics:
    def __init__(self, state: StateReader, policy: Callable[[], Policy] | None = None) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "tasgate_admission_requests",
            "Webhook calls answered, per endpoint. One API request passes /mutate and /validate: "
            "count decisions with tasgate_admission_decisions_total, not this.",
            ["endpoint", *DECISION_LABELS, "dry_run"],
            registry=self.registry,
        )
        self.decisions = Counter(
            "tasgate_admission_decisions",
            "Admission decisions, one per API request whatever the endpoints it passed; dry runs "
            "excluded (tasgate_dry_run_decisions_total). Per ClusterQueue, as Kueue's cluster_queue label.",
            [*DECISION_LABELS, "cluster_queue"],
            registry=self.registry,
        )
        self.local_queue_decisions = Counter(
            "tasgate_local_queue_admission_decisions",
            "The same decisions per LocalQueue: name and namespace, as Kueue's kueue_local_queue_* "
            "metrics (name is empty when the workload names no queue).",
            ["name", "namespace", *DECISION_LABELS],
            registry=self.registry,
        )
        self.dry_run_decisions = Counter(
            "tasgate_dry_run_decisions",
            "Decisions on dry-run requests (kubectl --dry-run=server): judged, nothing admitted.",
            [*DECISION_LABELS, "cluster_queue"],
            registry=self.registry,
        )
        self.decision_seconds = Histogram(
            "tasgate_decision_duration_seconds",
            "Time to decide one review, parse to response.",
            ["endpoint"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.scorer_seconds = Histogram(
            "tasgate_scorer_duration_seconds",
            "Time in the placement engine per PodSet (group) placement.",
            ["implementation"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.errors = Counter(
            "tasgate_errors", "Unexpected errors and timeouts.", ["kind"], registry=self.registry
        )
        self.podgroups = Counter(
            "tasgate_podgroups", "PodGroup creations by result.", ["result"], registry=self.registry
        )
        self.cert_reloads = Counter(
            "tasgate_certificate_reloads", "Serving certificate reloads.", registry=self.registry
        )
        self.cert_expiry = Gauge(
            "tasgate_certificate_expiry_timestamp_seconds",
            "When the serving certificate in use expires (Unix time; 0 before one is loaded).",
            registry=self.registry,
        )
        self.policy_reloads = Counter(
            "tasgate_policy_reloads",
            "Policy file reloads by result (error: the new content was refused, the old policy kept).",
            ["result"],
            registry=self.registry,
        )
        self.policy_error = Gauge(
            "tasgate_policy_reload_error",
            "1 while the policy file's newest content is refused and an older policy is in force.",
            registry=self.registry,
        )
        self.task_restarts = Counter(
            "tasgate_task_restarts",
            "Background tasks (watches, publisher, tracker, writers, reloaders) restarted after "
            "an unexpected exception or return; each is logged with its traceback.",
            ["task"],
            registry=self.registry,
        )
        self.decided_in = Counter(
            "tasgate_decisions_placed",
            "Reviews decided, by where: in a decision process or in the server (--decision-processes).",
            ["place"],
            registry=self.registry,
        )
        self.audit_dropped = Counter(
            "tasgate_audit_lines_dropped",
            "Audit lines dropped because the log writer fell behind (the review was answered).",
            registry=self.registry,
        )
        self.leader = Gauge(
            "tasgate_leader",
            "1 while this replica holds the writers' Lease (creates PodGroups, posts Events).",
            registry=self.registry,
        )
        self.info = Gauge(
            "tasgate_scorer_info", "The active placement engine.", ["implementation"], registry=self.registry
        )
        self.info.labels(scorer.IMPLEMENTATION).set(1)
        self.registry.register(_TopologyCollector(state, policy))

    def count_review(
        self, labels: RequestLabels, allowed: bool, reason: str, dry_run: bool, final: bool, seconds: float
    ) -> None:
        """One webhook call: its latency and request count per endpoint; the decision once, on the
        call that is the request's final verdict (``final``), as an admission or a dry run."""
        decision = "allow" if allowed else "deny"
        verdict = (labels.operation, labels.kind, decision, reason)
        self.decision_seconds.labels(labels.endpoint).observe(seconds)
        self.requests.labels(labels.endpoint, *verdict, "true" if dry_run else "false").inc()
        if not final:
            return
        if dry_run:
            self.dry_run_decisions.labels(*verdict, labels.cluster_queue).inc()
            return
        self.decisions.labels(*verdict, labels.cluster_queue).inc()
        self.local_queue_decisions.labels(labels.local_queue, labels.namespace, *verdict).inc()

    def timed(self, engine: Engine) -> Engine:
        """Wrap an engine so every placement is observed in the scorer histogram."""
        return TimedEngine(engine, self.scorer_seconds.labels(engine.NAME).observe)

    def observe_placements(self, seconds: tuple[float, ...], engine: str = scorer.IMPLEMENTATION) -> None:
        """Placements a decision process made (``serve.processes``), into the same histogram."""
        for taken in seconds:
            self.scorer_seconds.labels(engine).observe(taken)


class _TopologyCollector(Collector):
    """Nodes and domains per level, fragmentation per domain and gang shape, state age."""

    def __init__(self, state: StateReader, policy: Callable[[], Policy] | None) -> None:
        self._state = state
        self._policy = policy
        # (generation, the policy object itself, families): held, so its id can never be reused
        self._cache: tuple[int, Policy | None, list[GaugeMetricFamily]] | None = None

    def collect(self) -> Iterator[GaugeMetricFamily]:
        current, age = self._state()
        yield GaugeMetricFamily(
            "tasgate_cluster_snapshot_age_seconds", "Age of the cluster state.", value=age or 0.0
        )
        if current is None:
            return
        yield _rejected_family(current)
        policy = self._policy() if self._policy is not None else None
        cached = self._cache
        if cached is None or cached[0] != current.generation or cached[1] is not policy:
            cached = self._cache = (current.generation, policy, _topology_families(current, policy))
        yield from cached[2]


REJECTED_KINDS = (
    "Node", "Pod", "Namespace", "Topology", "ResourceFlavor", "ClusterQueue", "LocalQueue", "Workload",
    "LimitRange", "RuntimeClass", "TrainingRuntime", "ClusterTrainingRuntime",
)  # fmt: skip


def _rejected_family(state: ClusterState) -> GaugeMetricFamily:
    """Objects left out of the state as unusable, per kind (0 for every watched kind: alertable)."""
    family = GaugeMetricFamily(
        "tasgate_objects_rejected",
        "Objects tasgate cannot use and leaves out of its cluster state, per kind (each logged once; "
        "tasgate status lists them). A verdict that depends on one is not-checked (object-rejected).",
        labels=["kind"],
    )
    counts = dict.fromkeys(REJECTED_KINDS, 0)
    for rejected in state.rejected:
        counts[rejected.kind] = counts.get(rejected.kind, 0) + 1
    for kind, count in counts.items():
        family.add_metric([kind], count)
    return family


def _topology_families(state: ClusterState, policy: Policy | None) -> list[GaugeMetricFamily]:
    gpus = policy.gpu_resources if policy is not None else DEFAULT_GPU_RESOURCES
    shapes = policy.gang_shapes if policy is not None else DEFAULT_GANG_SHAPES
    nodes = GaugeMetricFamily(
        "tasgate_topology_nodes", "Schedulable nodes per TAS flavor.", labels=["topology", "flavor"]
    )
    domains = GaugeMetricFamily(
        "tasgate_topology_domains", "Domains per level.", labels=["topology", "flavor", "level"]
    )
    largest = GaugeMetricFamily(
        "tasgate_largest_free_domain",
        "Free amount of a resource summed over the nodes of the freest single domain of a level "
        "(base units: cpu in cores, memory in bytes). A sum, not what fits: a node with 3 free GPUs "
        "holds no 8-GPU pod; see tasgate_gang_shape_fits.",
        labels=["topology", "flavor", "level", "resource"],
    )
    fragmentation = _FragmentationFamilies()
    for flavor, topology in tas_flavors(state):
        cluster = state.flavor_snapshot(flavor, topology)
        view, tree = cluster.now, cluster.now.tree
        nodes.add_metric([topology.name, flavor.name], sum(1 for n in cluster.nodes if n.schedulable_now))
        for level, name in enumerate(tree.levels):
            count = tree.level_offsets[level + 1] - tree.level_offsets[level]
            domains.add_metric([topology.name, flavor.name, name], count)
        for (level, resource), amount in _largest_free(tree, view.free).items():
            # The scorer counts cpu in milli-units as Kueue does; Prometheus' base unit is the core.
            value = amount / 1000 if resource == "cpu" else amount
            largest.add_metric([topology.name, flavor.name, tree.levels[level], resource], value)
        fragmentation.add(flavor_figures(cluster, topology.name, flavor.name, gpus, shapes, hosts=False))
    return [nodes, domains, largest, *fragmentation.families()]


class _FragmentationFamilies:
    """The fragmentation gauges (names are a contract dashboards and alerts are built on)."""

    def __init__(self) -> None:
        self.free = GaugeMetricFamily(
            "tasgate_domain_free_accelerators",
            "Free accelerators (the policy's GPU resources summed) per domain, every level but hostname.",
            labels=["topology", "flavor", "level", "domain"],
        )
        self.unavailable = GaugeMetricFamily(
            "tasgate_domain_unavailable_accelerators",
            "Accelerators on nodes Kueue does not count now (NotReady, cordoned) per domain, every "
            "level but hostname: the TAS capacity lost to failed or drained nodes.",
            labels=["topology", "flavor", "level", "domain"],
        )
        self.fits = GaugeMetricFamily(
            "tasgate_gang_shape_fits",
            "Gangs of a shape (pods x GPUs per pod) that fit now in the best single domain of a level.",
            labels=["topology", "flavor", "level", "shape"],
        )
        self.holding = GaugeMetricFamily(
            "tasgate_gang_shape_domains",
            "Domains of a level that can hold at least one gang of a shape now.",
            labels=["topology", "flavor", "level", "shape"],
        )

    def add(self, f: FlavorFigures) -> None:
        if not f.accelerator:
            return  # no accelerators in this flavor: nothing to say about them
        for d in f.domains:
            if not f.is_host_level(d.level):
                self.free.add_metric([f.topology, f.flavor, d.level, d.domain_id], d.free)
                self.unavailable.add_metric([f.topology, f.flavor, d.level, d.domain_id], d.unavailable)
        for s in f.shapes:
            self.fits.add_metric([f.topology, f.flavor, s.level, s.shape.text], s.best_gangs)
            self.holding.add_metric([f.topology, f.flavor, s.level, s.shape.text], s.domains)

    def families(self) -> list[GaugeMetricFamily]:
        return [self.free, self.unavailable, self.fits, self.holding]


def _largest_free(tree: Tree, free: array[int]) -> dict[tuple[int, str], int]:
    """Per (level, resource): the most of that resource free in one domain of the level."""
    best: dict[tuple[int, str], int] = {}
    for resource in tree.resources:
        for path, amount in domain_sums(tree, free, [resource]).items():
            key = (len(path) - 1, resource)
            best[key] = max(best.get(key, 0), amount)
    return best
