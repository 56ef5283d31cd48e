"""The ``kubectl get`` commands that dump a cluster for ``tasgate check --state``, made from the
kinds ``check --live`` lists (``live.kinds.kinds`` and the native gang kinds), so the dump the
docs print can never again leave out a kind the verdict reads (LimitRanges, PriorityClasses,
TrainingRuntimes: without the runtimes every TrainJob reads not-checked).

One command per source of kinds, because ``kubectl get`` fails whole on a resource type the API
server does not serve: the core kinds are always there, Kueue's, Kubeflow Trainer's and the native
v1.36 gang API's only where installed or enabled; kinds listed by a label selector (Kueue's own
controller Deployment and ConfigMap) get a command of their own with that ``-l``, since kubectl
applies one selector to every kind it gets. (A field selector is not carried over: the dump's
every pod covers both the bound pods live mode lists and the unbound ones the native API needs.)
A resource name more than one listed API group
uses (``workloads``: Kueue's and the native API's) is qualified with its group, so kubectl never
picks the other one. The gang backends' PodGroup CRDs are listed live only to learn whether they
are served, which a dump cannot say: they are left out. README.md, docs/cli.md and
docs/install.md print ``dump_block()`` (``hack/gen-docs.py`` writes it; a test compares).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from webhook.live.kinds import GANG_CRD_KINDS, Kind, kinds
from webhook.live.native import COMPOSITES
from webhook.live.native_kinds import native_kinds

LIVE_ONLY = GANG_CRD_KINDS
NATIVE = "native"
COMPOSITE_SOURCE = "native-composite"  # v1.37's CompositePodGroups: kubectl fails on v1.36 for them
# An optional API group -> (the dump file's name, when its command is needed).
SOURCES = {
    "kueue.x-k8s.io": ("kueue", ""),
    "trainer.kubeflow.org": (
        "trainer",
        "where Kubeflow Trainer runs: a TrainJob's PodSets are in its runtime",
    ),
    NATIVE: (NATIVE, "where scheduling.k8s.io is served: Kubernetes v1.36+ native gangs"),
    COMPOSITE_SOURCE: ("native-composite", "where scheduling.k8s.io/v1alpha3 is served: Kubernetes v1.37"),
}


@dataclass(frozen=True)
class DumpCommand:
    name: str  # the dump file, dump/<name>.yaml
    resources: tuple[str, ...]
    when: str = ""  # "" always; else where the command applies (its kinds are optional)
    selector: str = ""  # kubectl's -l: only the objects live mode lists by that label

    @property
    def command(self) -> str:
        labelled = f" -l {self.selector}" if self.selector else ""
        return f"kubectl get {','.join(self.resources)} -A{labelled} -o yaml"

    @property
    def line(self) -> str:
        note = f"   # {self.when}" if self.when else ""
        return f"{self.command} > dump/{self.name}.yaml{note}"


def dump_commands() -> tuple[DumpCommand, ...]:
    """Every command, the always-served kinds first, then per optional source in listing order."""
    listed = [k for k in kinds() if k.name not in LIVE_ONLY]
    native = native_kinds(None)
    names = _resource_names([*kinds(), *native])
    groups: dict[str, list[str]] = {"core": []}
    for k in listed:
        groups.setdefault(_source(k), []).append(names[_key(k)])
    core = set(groups["core"])
    plain = [k for k in native if k.name != COMPOSITES]
    groups[NATIVE] = list(dict.fromkeys(n for n in (names[_key(k)] for k in plain) if n not in core))
    groups[COMPOSITE_SOURCE] = [names[_key(k)] for k in native if k.name == COMPOSITES]
    return tuple(_command(source, resources) for source, resources in groups.items() if resources)


def _source(k: Kind) -> str:
    """Which command lists a kind: its label selector's, its optional API group's, else the core one."""
    selector = k.kwargs.get("label_selector", "")
    if selector:
        return f"-l {selector}"
    return _group(k) if k.optional and _group(k) else "core"


def _command(source: str, resources: list[str]) -> DumpCommand:
    if source.startswith("-l "):
        selector = source[len("-l ") :]
        name = selector.rsplit("=", 1)[-1].rsplit("/", 1)[-1] + "-labelled"
        return DumpCommand(name, tuple(resources), selector=selector)
    name, when = SOURCES.get(source, (source.split(".", maxsplit=1)[0], ""))
    return DumpCommand(name, tuple(resources), when)


def command(name: str) -> str:
    """One command by its dump file's name ("core", "kueue" …), for the messages that ask for it."""
    return next(c.command for c in dump_commands() if c.name == name)


def dump_block() -> str:
    """The commands as the docs print them: a fenced shell block."""
    return "```sh\n" + "\n".join(c.line for c in dump_commands()) + "\n```"


def guess_resource(kind: str) -> str:
    """Kubernetes' ``UnsafeGuessKindToResource``: the plural kubectl names a kind by."""
    lower = kind.lower()
    if lower.endswith("s"):
        return lower + "es"
    if lower.endswith("y"):
        return lower[:-1] + "ies"
    return lower + "s"


def _key(k: Kind) -> tuple[str, str]:
    return (k.api_version, k.kind)


def _group(k: Kind) -> str:
    return k.api_version.split("/")[0] if "/" in k.api_version else ""


def _resource_names(every: Sequence[Kind]) -> dict[tuple[str, str], str]:
    """Each kind's resource name, qualified with its group where another group uses the same."""
    groups: dict[str, set[str]] = {}
    for k in every:
        groups.setdefault(guess_resource(k.kind), set()).add(_group(k))
    return {
        _key(k): guess_resource(k.kind)
        + (f".{_group(k)}" if len(groups[guess_resource(k.kind)]) > 1 and _group(k) else "")
        for k in every
    }
