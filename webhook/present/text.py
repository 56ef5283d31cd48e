"""`tasgate map`'s text: per flavor, the shapes that fit now, then the domains as a compact tree
(free/total accelerators, and each shape's fits per domain); then the waiting gangs."""

from __future__ import annotations

from collections.abc import Sequence

from webhook.decide.fragmentation import DomainFigure, FlavorFigures
from webhook.decide.waiting import WaitingGang
from webhook.present.landing import flavor_of, landing_text, numbered


def render_text(figures: Sequence[FlavorFigures], waiting: Sequence[WaitingGang]) -> str:
    if not figures:
        return "no TAS flavor with a Topology in this cluster state\n"
    out: list[str] = []
    for flavor in figures:
        out += _flavor(flavor)
    numbers = numbered(waiting)
    for gang in waiting:
        for ps in gang.pod_sets:
            out.append(
                f"waiting W{numbers[gang.key]} {gang.kind} {gang.namespace}/{gang.name} {ps.name}: "
                f"{ps.count} x {ps.gpus_per_pod} GPU {ps.mode} {ps.level or 'any level'}; closest now "
                f"{','.join(ps.best_now or ()) or 'none'} ({ps.pods_now} of {ps.count} pods); "
                f"lands in {landing_text(ps, flavor_of(gang, figures))} once capacity frees"
            )
    return "\n".join(out) + "\n"


def _flavor(f: FlavorFigures) -> list[str]:
    lines = [f"topology {f.topology} · flavor {f.flavor} · {f.accelerator or 'no accelerators'} free/total"]
    if f.shapes:
        lines.append(f"  {'shape':<7}{'level':<36}{'best domain':<14}{'pods':>5}{'gangs':>6}{'domains':>8}")
        for s in f.shapes:
            best = s.best_domain[-1] if s.best_domain else "-"
            lines.append(
                f"  {s.shape.text:<7}{s.level:<36}{best:<14}{s.best_pods:>5}{s.best_gangs:>6}{s.domains:>8}"
            )
    lines += [f"  ({note})" for note in f.notes]
    hosts: dict[tuple[str, ...], list[DomainFigure]] = {}
    for d in f.domains:
        if f.is_host_level(d.level) and len(f.levels) > 1:
            hosts.setdefault(d.path[:-1], []).append(d)
    for d in sorted(f.domains, key=lambda d: d.path):  # depth first: each domain above its children
        if d.path[:-1] in hosts and f.is_host_level(d.level):
            continue
        lines.append("  " + "  " * len(d.path) + _domain(d))
        if d.path in hosts:  # a domain's hosts on one line
            listed = ", ".join(_domain(h) for h in hosts[d.path])
            lines.append("  " + "  " * (len(d.path) + 1) + f"hosts: {listed}")
    return lines


def _domain(d: DomainFigure) -> str:
    text = f"{d.path[-1]} {d.free}/{d.total}"
    if d.unavailable:
        text += f" ({d.unavailable} unavailable)"
    per_pod = {s.shape.gpus_per_pod: s.pods for s in d.shapes}
    text += "".join(f" · {gpus}-GPU pods {pods}" for gpus, pods in per_pod.items())
    text += "".join(f" · {s.shape.text} {s.gangs}" for s in d.shapes)
    return text
