"""`tasgate map`'s text: per flavor, the shapes that fit now, then the domains as a compact tree
(free/total accelerators, and each shape's fits per domain; large levels collapsed as in the
picture, natural order); then the waiting gangs with `check`'s own figures."""

from __future__ import annotations

from collections.abc import Sequence

from webhook.figures.fragmentation import DomainFigure, FlavorFigures
from webhook.figures.waiting import WaitingGang
from webhook.present.collapse import Shown, collapse
from webhook.present.gangs import flavor_of, keep_paths, needs_text, now_text, numbered, once_text
from webhook.present.stamp import Stamp


def render_text(
    figures: Sequence[FlavorFigures], waiting: Sequence[WaitingGang], stamp: Stamp | None = None
) -> str:
    out = [stamp.text] if stamp is not None else []
    if not figures:
        return "\n".join([*out, "no TAS flavor with a Topology in this cluster state"]) + "\n"
    for flavor in figures:
        out += _flavor(flavor, waiting)
    numbers = numbered(waiting)
    for gang in waiting:
        for ps in gang.pod_sets:
            out.append(
                f"waiting W{numbers[gang.key]} {gang.kind} {gang.namespace}/{gang.name} {ps.name}: "
                f"{needs_text(ps)}"
            )
            out.append(f"  must wait: {now_text(ps)}")
            out.append(f"  once capacity frees: {once_text(ps, flavor_of(gang, figures))}")
    return "\n".join(out) + "\n"


def _flavor(f: FlavorFigures, waiting: Sequence[WaitingGang]) -> list[str]:
    lines = [f"topology {f.topology} · flavor {f.flavor} · {f.accelerator or 'no accelerators'} free/total"]
    if f.shapes:
        lines.append(f"  {'shape':<7}{'level':<36}{'best domain':<14}{'pods':>5}{'gangs':>6}{'domains':>8}")
        bests = {s.best_domain for s in f.shapes if s.best_domain}
        repeated = _repeated(f, {b[-1] for b in bests})
        for s in f.shapes:
            best = _name(s.best_domain, repeated) if s.best_domain else "-"
            lines.append(
                f"  {s.shape.text:<7}{s.level:<36}{best:<14}{s.best_pods:>5}{s.best_gangs:>6}{s.domains:>8}"
            )
    shown = collapse(f, keep_paths(waiting, f))
    lines += [f"  ({note})" for note in (*f.notes, *([shown.note] if shown.note else []))]
    lines += _tree(f, shown, ())
    return lines


def _tree(f: FlavorFigures, shown: Shown, path: tuple[str, ...]) -> list[str]:
    """Depth first, each domain above its children; a lowest domain's hosts on one line."""
    indent = "  " + "  " * (len(path) + 1)
    kids, hidden = shown.kids(path), shown.hidden.get(path)
    levels = [d.level for d in kids] + ([hidden.level] if hidden is not None else [])
    if path and len(f.levels) > 1 and any(f.is_host_level(level) for level in levels):
        listed = [_domain(h) for h in kids]
        listed += [f"{hidden.label} {hidden.figure}"] if hidden is not None else []
        return [f"{indent}hosts: {', '.join(listed)}"]
    lines = []
    for d in kids:
        lines.append(indent + _domain(d))
        lines += _tree(f, shown, d.path)
    if hidden is not None:
        lines.append(f"{indent}{hidden.label}: {hidden.figure}")
    return lines


def _repeated(f: FlavorFigures, names: set[str]) -> set[str]:
    """Those of ``names`` that more than one domain of a level carries (r3 in every block)."""
    seen: dict[tuple[int, str], int] = {}
    for d in f.domains:
        if d.path[-1] in names:
            key = (len(d.path), d.path[-1])
            seen[key] = seen.get(key, 0) + 1
    return {name for (_, name), n in seen.items() if n > 1}


def _name(path: tuple[str, ...], repeated: set[str]) -> str:
    """A domain's own level value when no other domain of its level has it, else its DomainID."""
    return ",".join(path) if path[-1] in repeated else path[-1]


def _domain(d: DomainFigure) -> str:
    return f"{d.path[-1]} {d.free}/{d.total}{condition(d)}" + _fits(d)


def condition(d: DomainFigure) -> str:
    """Why some of a domain's accelerators hold no pod: a host says its own reason (cordoned, not
    ready, the taint), a larger domain how many of its accelerators are unavailable or tainted."""
    if d.marks:
        return f" ({', '.join(d.marks)})"
    parts = [f"{d.unavailable} unavailable"] * bool(d.unavailable) + [f"{d.tainted} tainted"] * bool(
        d.tainted
    )
    return f" ({', '.join(parts)})" if parts else ""


def _fits(d: DomainFigure) -> str:
    text = ""
    per_pod = {s.shape.gpus_per_pod: s.pods for s in d.shapes}
    text += "".join(f" · {gpus}-GPU pods {pods}" for gpus, pods in per_pod.items())
    text += "".join(f" · {s.shape.text} {s.gangs}" for s in d.shapes)
    return text
