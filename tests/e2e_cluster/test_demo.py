"""``make demo`` end to end: ``python -m e2e.demo`` run as a user runs it, then stopped with Ctrl-C.

The demo is a subprocess; its stdout is read line by line (with a bound) while it runs. Once it
says the cluster stays up, the test checks what it printed (the denial with its numbers, the
must-wait warning, the admitted gangs Running on kwok, ``tasgate status -A`` listing them), then
uses what it printed as a user would: ``kubectl get nodes`` and ``get pods`` with the printed
kubeconfig, and the printed ``/topology`` URL. It records every process the demo started, sends
SIGINT (what Ctrl-C sends), and requires exit status 0, the files removed, and none of those
processes left. Missing binaries fail, never skip; ``--no-build`` keeps the demo from building them.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from e2e.cluster import find_cluster_binaries
from e2e.controlplane import find_binaries
from e2e.demo_world import node_names
from e2e.kueue import find_kueue

from .binaries import require

pytestmark = pytest.mark.e2e_cluster

REPO = Path(__file__).resolve().parents[2]
UP_TIMEOUT = 300.0  # the demo takes about 35-55 s on 2 shared cores; Kueue's start is most of it
STOP_TIMEOUT = 120.0  # every part gets SIGTERM and at most 15-20 s before SIGKILL
UP_LINE = "The cluster stays up; Ctrl-C stops it"
DENIAL = (
    'admission webhook "mutate.tasgate.io" denied the request: PodSet "main" (6 pods × nvidia.com/gpu: 8) '
    'can never fit one "cloud.provider.com/topology-block" domain: the largest block holds 4 such pods '
    "even when empty"
)
WARNING = (
    'Warning: PodSet "main" must wait: the best block has room for 2 of 4 pods now (2 short); '
    "it fits when capacity frees up"
)


class Demo:
    """The demo process, its stdout read by a thread into a queue so every read has a deadline."""

    def __init__(self, stderr: IO[str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "e2e.demo", "--no-build"],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def read_until(self, text: str, timeout: float) -> str:
        """Everything printed until a line containing ``text``; AssertionError on exit or timeout."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no {text!r} after {timeout:g}s; printed:\n{self.output}") from None
            if line is None:
                code = self.proc.wait(10)
                raise AssertionError(f"the demo exited {code} before {text!r}; printed:\n{self.output}")
            self.lines.append(line)
            if text in line:
                return self.output

    def rest(self) -> str:
        """The lines printed up to its exit (the pump ends with the pipe)."""
        while (line := self._queue.get(timeout=STOP_TIMEOUT)) is not None:
            self.lines.append(line)
        return self.output

    @property
    def output(self) -> str:
        return "\n".join(self.lines)


def process_tree(root: int) -> dict[int, str]:
    """Every process descended from ``root`` now: pid -> its start time (to tell a reused pid)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := proc_stat(int(entry))) is not None:
            parents.setdefault(int(stat[1]), []).append(int(entry))
    tree: dict[int, str] = {}
    todo = list(parents.get(root, ()))
    while todo:
        pid = todo.pop()
        if (stat := proc_stat(pid)) is not None:
            tree[pid] = stat[19]
            todo += parents.get(pid, ())
    return tree


def proc_stat(pid: int) -> list[str] | None:
    """``/proc/<pid>/stat`` after the command name: state, ppid, …; None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def still_running(tree: dict[int, str]) -> list[str]:
    """The processes of ``tree`` still there (same start time) and not zombies, with their names."""
    left = []
    for pid, started in tree.items():
        stat = proc_stat(pid)
        if stat is not None and stat[19] == started and stat[0] != "Z":
            left.append(f"{pid} {Path(f'/proc/{pid}/comm').read_text().strip()}")
    return left


def printed(output: str, label: str) -> str:
    found = re.search(rf"^{label}:\s+(\S+)$", output, re.MULTILINE)
    assert found, f"no {label!r} line in:\n{output}"
    return found.group(1)


def kubectl(kubeconfig: str, *args: str) -> str:
    """The real kubectl with only the printed kubeconfig, as a user in another terminal runs it."""
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    run = subprocess.run(
        [str(find_binaries().kubectl), "--kubeconfig", kubeconfig, *args],
        capture_output=True, text=True, timeout=60, check=False, env=env,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    return run.stdout


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Demo]:
    require(find_binaries, find_cluster_binaries, find_kueue)
    with (tmp_path / "demo.err").open("w") as stderr:
        started = Demo(stderr)
        try:
            yield started
        finally:
            if started.proc.poll() is None:  # the test failed while it ran: stop it as Ctrl-C does
                tree = process_tree(started.proc.pid)
                started.proc.send_signal(signal.SIGINT)
                try:
                    started.proc.wait(STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    for pid in [started.proc.pid, *tree]:
                        with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                            os.kill(pid, signal.SIGKILL)
                    started.proc.wait()
    print((tmp_path / "demo.err").read_text(), file=sys.stderr)


def test_make_demo_shows_each_verdict_stays_up_and_stops_clean_on_ctrl_c(demo: Demo) -> None:
    output = demo.read_until(UP_LINE, UP_TIMEOUT)
    print(output)

    # What kubectl apply answered: the denial with its numbers, nothing stored.
    assert DENIAL in output, output
    assert "job.batch/llm-pretrain" not in output, output
    # The admitted gangs: the policy's injection, and their pods Running on kwok.
    for name, level, count in (("resnet-a", "block", 3), ("resnet-b", "rack", 2)):
        assert f"job.batch/{name} created" in output, output
        assert f"podset-required-topology=cloud.provider.com/topology-{level}" in output, output
        assert f"Coscheduling bound its {count} pods; kwok runs them on b" in output, output
    # The gang that must wait: the warning kubectl printed, and Kueue's own figure agreeing.
    assert WARNING in output and "job.batch/llama-finetune created" in output, output
    assert "allows to fit only 2 out of 4 pod(s)" in output, output
    # tasgate status -A lists each gang in its state.
    table = output.split("$ tasgate status -A\n", 1)[1].split("\n\n", 1)[0]
    rows = {line.split()[1]: line.split() for line in table.splitlines()[1:]}
    assert rows["resnet-a"][4:6] == ["running", "AllRunning"], table
    assert rows["resnet-b"][4:6] == ["running", "AllRunning"], table
    assert rows["llama-finetune"][4:6] == ["waiting_topology", "WaitingForCapacity"], table
    assert set(rows) == {"resnet-a", "resnet-b", "llama-finetune"}, table

    # While it stays up, the printed kubeconfig and URL work as they would for a user.
    kubeconfig, topology = printed(output, "kubeconfig"), printed(output, "topology")
    nodes = kubectl(kubeconfig, "get", "nodes", "--no-headers").splitlines()
    assert sorted(line.split()[0] for line in nodes) == sorted(node_names()), nodes
    assert all(line.split()[1] == "Ready" for line in nodes), nodes
    pods = kubectl(kubeconfig, "get", "pods", "-l", "job-name=resnet-a", "--no-headers").splitlines()
    assert [line.split()[1:3] for line in pods] == [["1/1", "Running"]] * 3, pods
    with urllib.request.urlopen(topology, timeout=10) as page:
        html = page.read().decode()
    assert page.status == 200 and "b2-r2-h2" in html and "llama-finetune" in html, html[:2000]

    # Ctrl-C: exit 0, files gone, and not one of the processes it started left running.
    tree = process_tree(demo.proc.pid)
    assert len(tree) >= 8, tree  # etcd, apiserver, kcm, kwok, scheduler, controller, kueue, tasgate
    demo.proc.send_signal(signal.SIGINT)
    assert demo.proc.wait(STOP_TIMEOUT) == 0, demo.rest()
    rest = demo.rest()
    assert "stopping the cluster" in rest and rest.rstrip().endswith("stopped"), rest
    assert not Path(kubeconfig).parent.exists(), f"{Path(kubeconfig).parent} left behind"
    assert still_running(tree) == [], still_running(tree)
