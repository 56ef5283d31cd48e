"""What the commands say about their input when it is not what they can judge.

A person who runs ``tasgate check`` on a file with a YAML slip must be told where, in the words
an editor jumps to (``file:line:column``), not as PyYAML names a string it parsed
(``in "<unicode string>"``); a run that checked nothing must say why, not only ``checked 0``;
and a mistyped outcome must list the outcomes there are.
"""

from __future__ import annotations

import argparse
import difflib
import re
from collections.abc import Iterable, Sequence

from webhook.decide.messages import plural
from webhook.files.loader import Document, LoadFailure

# One mark of a PyYAML error: `  in "<unicode string>", line 5, column 12`.
_MARK = re.compile(r'^\s*in "[^"]*", line (\d+), column (\d+)\s*$')
_HEAD = re.compile(r"^(?P<where>.*?): not valid YAML: (?P<rest>.*)$", re.S)
FAIL_ON = ("denied", "waits", "unchecked", "not-checked", "admitted")


def failure_text(failure: LoadFailure) -> str:
    """The loader's message, with a YAML error said as ``file:line:column: problem``."""
    found = _HEAD.match(failure.message)
    if found is None:
        return failure.message
    document = found.group("where")
    file = document.split(" (document", 1)[0] or failure.source
    problem, context = _yaml_parts(found.group("rest").splitlines())
    if problem is None:
        flat = " ".join(line.strip() for line in found.group("rest").splitlines())
        return f"{document}: not valid YAML: {flat.replace('<unicode string>', file)}"
    (text, mark), (ctx, ctx_mark) = problem, context
    where = f"{file}:{mark[0]}:{mark[1]}" if mark else file
    also = f" ({ctx} at line {ctx_mark[0]}, column {ctx_mark[1]})" if ctx and ctx_mark else ""
    number = document[len(file) :].strip()
    return f"{where}: not valid YAML{(' ' + number) if number else ''}: {text}{also}"


Mark = tuple[str, str] | None


def _yaml_parts(lines: Sequence[str]) -> tuple[tuple[str, Mark] | None, tuple[str, Mark]]:
    """PyYAML's ``context / context mark / problem / problem mark`` lines, read back."""
    pairs: list[tuple[str, Mark]] = []
    for line in lines:
        mark = _MARK.match(line)
        if mark is not None and pairs and pairs[-1][1] is None:
            pairs[-1] = (pairs[-1][0], (mark.group(1), mark.group(2)))
        elif mark is None and line.strip():
            pairs.append((line.strip(), None))
    if not pairs:
        return None, ("", None)
    return pairs[-1], (pairs[0] if len(pairs) > 1 else ("", None))


def nothing_checked(items: Iterable[Document | LoadFailure]) -> str:
    """Why a run judged no workload: no document at all, or none of a workload kind."""
    documents = [i for i in items if isinstance(i, Document)]
    if not documents:
        return "nothing to check: the input holds no Kubernetes object"
    kinds = sorted({str(d.obj.get("kind", "?")) for d in documents})
    listed = ", ".join(kinds[:5]) + (" …" if len(kinds) > 5 else "")
    which = "not a" if len(documents) == 1 else "none of them a"
    return (
        f"nothing to check: {plural(len(documents), 'object')} read ({listed}), {which} workload "
        "tasgate judges (Job, JobSet, PyTorchJob, MPIJob, RayJob, LeaderWorkerSet, TrainJob …)"
    )


def parse_fail_on(text: str) -> tuple[str, ...]:
    """``--fail-on``'s list; an unknown name is a usage error that lists the names there are."""
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in FAIL_ON]
    if not unknown:
        return names
    hints = []
    for name in unknown:
        close = difflib.get_close_matches(name, FAIL_ON, n=1)
        hints.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    raise argparse.ArgumentTypeError(
        f"unknown outcome {', '.join(hints)}; the outcomes are denied, waits, unchecked "
        "(or not-checked) and admitted, comma-separated"
    )
