"""The layers are enforced, not just drawn: import-linter fails on a violation, and no cycles."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _tree_copy(tmp_path: Path) -> Path:
    for package in ("webhook", "scorer"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("*.so", "*.c"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        check=False,
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("module", "line", "expected"),
    [
        ("webhook/rules/kueue.py", "import logging", "webhook.rules.kueue -> logging"),
        ("webhook/model/podset.py", "import aiohttp", "webhook.model.podset -> aiohttp"),
        (
            "webhook/decide/kueue/inject.py",
            "from webhook.serve import keys",
            "webhook.decide.kueue.inject -> webhook.serve",
        ),
        (
            "webhook/state/cluster.py",
            "from webhook.decide import policy",
            "webhook.state.cluster -> webhook.decide",
        ),
        ("webhook/model/workloads/lws.py", "from webhook.model.workloads import ray", "lws -> webhook.model"),
        ("webhook/present/html.py", "import logging", "webhook.present.html -> logging"),
        (
            "webhook/present/text.py",
            "from webhook.files import sample",
            "webhook.present.text -> webhook.files",
        ),
        (
            "webhook/figures/fragmentation.py",
            "from webhook.present import text",
            "webhook.figures.fragmentation -> webhook.present",
        ),
        # The scheduling backends are independent: the native one may not reach into Kueue's.
        (
            "webhook/decide/native/judge.py",
            "from webhook.decide.kueue import topology",
            "webhook.decide.native.judge -> webhook.decide.kueue.topology",
        ),
        (
            "webhook/decide/kueue/scoring.py",
            "from webhook.decide.native import ports",
            "webhook.decide.kueue.scoring -> webhook.decide.native.ports",
        ),
        # Gang backends too, and the decision never reads the figures (they read it).
        (
            "webhook/decide/gangs/volcano.py",
            "from webhook.decide.gangs import coscheduling",
            "webhook.decide.gangs.volcano -> webhook.decide.gangs.coscheduling",
        ),
        (
            "webhook/decide/kueue/mustwait.py",
            "from webhook.figures import waiting",
            "webhook.decide.kueue.mustwait -> webhook.figures.waiting",
        ),
        # The scorer only through its public modules.
        (
            "webhook/decide/native/judge.py",
            "from scorer import _reference_native",
            "webhook.decide.native.judge -> scorer._reference_native",
        ),
    ],
)
def test_a_deliberate_violation_breaks_the_contract(
    tmp_path: Path, module: str, line: str, expected: str
) -> None:
    tree = _tree_copy(tmp_path)
    path = tree / module
    text = path.read_text()
    marker = "from __future__ import annotations\n"
    path.write_text(text.replace(marker, f"{marker}\n{line}  # noqa\n", 1))
    result = _lint(tree)
    assert result.returncode != 0, result.stdout
    assert "BROKEN" in result.stdout and expected in result.stdout, result.stdout


def test_the_real_tree_keeps_every_contract(tmp_path: Path) -> None:
    result = _lint(_tree_copy(tmp_path))
    assert result.returncode == 0, result.stdout
    assert "BROKEN" not in result.stdout


def test_no_import_cycles() -> None:
    graph = grimp.build_graph("webhook", "scorer", exclude_type_checking_imports=False, cache_dir=None)
    modules = sorted(graph.modules)
    index = {m: i for i, m in enumerate(modules)}
    edges = {
        m: sorted(
            t for t in graph.find_modules_directly_imported_by(m) & set(modules) if not _compiled(graph, m, t)
        )
        for m in modules
    }
    cycles = [scc for scc in _strongly_connected(modules, edges, index) if len(scc) > 1]
    assert cycles == [], f"import cycles: {cycles}"


def _compiled(graph: grimp.ImportGraph, importer: str, imported: str) -> bool:
    """grimp reads only .py files: ``import scorer._core`` (a compiled extension) shows as an
    import of the package ``scorer`` itself, which is not a cycle."""
    details = graph.get_import_details(importer=importer, imported=imported)
    return bool(details) and all(f"import {imported}._core" in d["line_contents"] for d in details)


def _strongly_connected(
    nodes: list[str], edges: dict[str, list[str]], index: dict[str, int]
) -> list[list[str]]:
    """Tarjan's algorithm, iterative (the graph is small, but recursion limits are not ours)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for start in nodes:
        if start in order:
            continue
        work = [(start, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                order[node] = low[node] = len(order)
                stack.append(node)
                on_stack.add(node)
            children = edges[node]
            if i < len(children):
                work.append((node, i + 1))
                child = children[i]
                if child not in order:
                    work.append((child, 0))
                elif child in on_stack:
                    low[node] = min(low[node], order[child])
                continue
            for child in children:
                if child in on_stack:
                    low[node] = min(low[node], low[child])
            if low[node] == order[node]:
                scc = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    scc.append(top)
                    if top == node:
                        break
                out.append(sorted(scc, key=index.__getitem__))
    return out
