"""The demo's running cluster and its steps: each ``kubectl apply`` as a user types it, and its outcome.

``DemoCluster`` holds the parts e2e/demo.py started (control plane, kwok cluster, Kueue, tasgate)
and does what the demo shows: apply one manifest with the real kubectl and print what kubectl
answered, then wait, by condition and with a bound, for what must follow (Kueue's admission, the
pods Running on kwok, tasgate's tracker seeing the gang), so that the next verdict is made on the
cluster as it then is. An outcome that is not the expected one raises ``DemoError``: a demo that
prints a wrong story must not exit 0.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from e2e.cluster import Cluster
from e2e.controlplane import ControlPlane, display_path
from e2e.demo_world import HOSTS, NAMESPACE, QUEUE, Step, injected, job, running_pods
from e2e.fidelity import TasgateServer
from e2e.kueue import Kueue
from e2e.kueue_admission import condition_true, owned_workloads
from e2e.serving import TASGATE

RUN_TIMEOUT = 120.0  # admitted, ungated, bound and Running on kwok; about 5 s on an idle machine
SEEN_TIMEOUT = 60.0  # tasgate's tracker and Kueue's scheduler each act within seconds
WEBHOOK_PROBE = "tasgate-demo-probe"


class DemoError(RuntimeError):
    """Something the demo shows did not happen as it says."""


def say(text: str = "") -> None:
    print(text, flush=True)


def poll(what: str, check: Callable[[], bool], timeout: float, every: float = 0.5) -> None:
    """Until ``check()``; ``DemoError`` naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise DemoError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(every)


@dataclass
class DemoCluster:
    cp: ControlPlane
    cluster: Cluster
    kueue: Kueue
    tasgate: TasgateServer

    @property
    def manifests(self) -> Path:
        return self.cp.dir / "demo"

    @property
    def topology_url(self) -> str:
        return f"http://127.0.0.1:{self.tasgate.metrics_port}/topology"

    def check_alive(self) -> None:
        """Raise with the first dead component's name (the cluster's own check gives its log tail)."""
        self.cluster.check_alive()
        if not self.cp.running():
            raise DemoError(f"the control plane died; its logs are in {self.cp.dir}")
        if not self.kueue.running():
            raise DemoError(f"Kueue exited; see {self.kueue.log_path}")
        if self.tasgate.proc.poll() is not None:
            raise DemoError(f"tasgate exited {self.tasgate.proc.returncode}; see {self.tasgate.stderr_path}")

    # -- set-up --

    def webhooks_answer(self) -> bool:
        """True once a server-side dry run went through both of tasgate's webhooks (its audit lines)."""
        probe = job(WEBHOOK_PROBE, 1, None)  # fits now: the validating webhook is called too
        self.cp.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(probe), check=False)
        audit = self.tasgate.audit()
        endpoints = {line.get("endpoint") for line in audit if line.get("name") == WEBHOOK_PROBE}
        return endpoints >= {"mutate", "validate"}

    def cluster_queue_active(self) -> bool:
        queues = self.cp.kubectl_json("get", "clusterqueues.kueue.x-k8s.io")["items"]
        return any(condition_true(q, "Active") for q in queues)

    # -- the steps --

    def apply(self, step: Step) -> None:
        """``kubectl apply -f`` the step's manifest, print kubectl's answer, and see its outcome through."""
        self.manifests.mkdir(exist_ok=True)
        path = self.manifests / f"{step.name}.yaml"
        path.write_text(yaml.safe_dump(step.manifest(), sort_keys=False))
        say(f"\n$ kubectl apply -f {path}    # {step.what}")
        result = self.cp.kubectl("apply", "-f", str(path), check=False)
        for line in (result.stderr + result.stdout).splitlines():
            say(f"  {line}")
        answered = result.stderr + result.stdout
        if step.expect == "denied":
            if result.returncode == 0 or "denied the request" not in result.stderr:
                raise DemoError(f"{step.name} was not denied (exit {result.returncode}): {answered}")
            if self.cp.kubectl("get", "job", step.name, "-n", NAMESPACE, check=False).returncode == 0:
                raise DemoError(f"{step.name} was denied, yet the API server stored it")
            say("  -> denied: the API server stored nothing; Kueue would have kept it pending forever")
            return
        if result.returncode != 0:
            raise DemoError(f"kubectl apply of {step.name} failed (exit {result.returncode}): {answered}")
        stored = self.cp.kubectl_json("get", "job", step.name, "-n", NAMESPACE)
        if step.expect == "runs":
            self._runs(step, stored, answered)
        else:
            self._waits(step, answered)

    def _runs(self, step: Step, stored: dict[str, Any], answered: str) -> None:
        if "Warning:" in answered:
            raise DemoError(f"{step.name} was to fit now, but drew a warning: {answered}")
        tags = injected(stored)
        if step.level is None and not tags:
            raise DemoError(f"tasgate injected nothing into {step.name}")
        say(f"  -> tasgate injected: {', '.join(tags)}")
        pods: list[dict[str, Any]] = []

        def all_running() -> bool:
            nonlocal pods
            self.check_alive()
            found = self.cp.kubectl_json("get", "pods", "-n", NAMESPACE, "-l", f"job-name={step.name}")
            pods = found["items"]
            return len(running_pods(pods)) == step.pods == len(pods)

        poll(f"the {step.pods} pods of {step.name} to be Running and Ready", all_running, RUN_TIMEOUT)
        workloads = owned_workloads(self.cp, NAMESPACE, "Job", step.name)
        if not any(condition_true(workload, "Admitted") for workload in workloads):
            raise DemoError(f"{step.name}'s pods run, but Kueue has not admitted its Workload")
        hosts = sorted(str(pod["spec"].get("nodeName")) for pod in pods)
        bound = f"Coscheduling bound its {step.pods} pods"
        say(f"  -> Kueue admitted it; {bound}; kwok runs them on {', '.join(hosts)}")
        self.wait_tracked(step.name, "running")

    def _waits(self, step: Step, answered: str) -> None:
        if "Warning:" not in answered or "must wait" not in answered:
            raise DemoError(f"{step.name} drew no must-wait warning: {answered}")
        message = ""

        def kueue_says() -> bool:
            nonlocal message
            for workload in owned_workloads(self.cp, NAMESPACE, "Job", step.name):
                for cond in (workload.get("status") or {}).get("conditions") or ():
                    if cond.get("type") == "QuotaReserved" and cond.get("status") == "False":
                        message = str(cond.get("message", ""))
            return bool(message)

        poll(f"Kueue to try {step.name}", kueue_says, SEEN_TIMEOUT)
        say(f"  -> stored with that warning; Kueue keeps it queued: {message}")
        self.wait_tracked(step.name, "waiting_topology")

    def wait_tracked(self, name: str, state: str) -> None:
        """Until tasgate's /metrics has Job ``name``'s gang in ``state`` (its tracker's view)."""

        def tracked() -> bool:
            self.check_alive()
            return any(
                line.startswith("tasgate_gang_state_seconds{") and f'name="{name}"' in line
                and f'state="{state}"' in line
                for line in self.metrics().splitlines()
            )  # fmt: skip

        poll(f"tasgate to track {name} as {state}", tracked, SEEN_TIMEOUT)

    def metrics(self) -> str:
        try:
            url = f"http://127.0.0.1:{self.tasgate.metrics_port}/metrics"
            with urllib.request.urlopen(url, timeout=5) as response:
                return str(response.read().decode())
        except (urllib.error.URLError, OSError):
            return ""

    def status(self) -> str:
        """``tasgate status -A`` against the cluster, as a user runs it."""
        argv = [str(TASGATE), "status", "-A", "--kubeconfig", str(self.cp.kubeconfig)]
        run = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        if run.returncode != 0:
            raise DemoError(f"tasgate status exited {run.returncode}: {run.stderr}")
        return run.stdout

    def farewell(self, wait: bool) -> None:
        """Where everything is, for the user's own commands while the cluster stays up."""
        say(f"\nkubeconfig: {self.cp.kubeconfig}")
        say(f"topology:   {self.topology_url}")
        say(f"logs:       {self.cp.dir} (kube-apiserver.log, cluster/, kueue/, tasgate/tasgate.err)")
        say(f"manifests:  {self.manifests}")
        kubectl = display_path(self.cp.binaries.kubectl)
        say("try, in another terminal:")
        say(f"  export KUBECONFIG={self.cp.kubeconfig}")
        say(f"  {kubectl} get pods -o wide")
        say(f"  {display_path(TASGATE)} status -A -o wide")
        note = f"queue {NAMESPACE}/{QUEUE}; a rack here has {HOSTS} hosts"
        say(f"  {kubectl} apply -f examples/job-rack.yaml    # {note}")
        if wait:
            say("The cluster stays up; Ctrl-C stops it and removes its files.")
