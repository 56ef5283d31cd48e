"""`tasgate serve` in live mode as the scale scenario sees it: a process, its memory, its verdicts.

Reviews go through the real TLS server (``/mutate`` and ``/validate`` on the webhook port) on one
keep-alive connection, one at a time, so a latency figure is one review's round trip and nothing
queued behind others.
"""

from __future__ import annotations

import asyncio
import base64
import ssl
import statistics
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import jsonpatch
import orjson
from prometheus_client.parser import text_string_to_metric_families

from e2e.controlplane import ControlPlane, free_ports
from e2e.processes import stop_process
from e2e.serving import serve_argv


@dataclass(frozen=True)
class Verdict:
    """What a review answered, reduced to what a user sees: allowed, why, and the messages."""

    allowed: bool
    reason: str
    fits_now: str
    message: str
    warnings: tuple[str, ...]

    @classmethod
    def of(cls, review: dict[str, Any]) -> Verdict:
        response = review["response"]
        notes = response.get("auditAnnotations") or {}
        return cls(
            allowed=bool(response["allowed"]),
            reason=str(notes.get("reason", "")),
            fits_now=str(notes.get("fits-now", "")),
            message=str((response.get("status") or {}).get("message", "")),
            warnings=tuple(response.get("warnings") or ()),
        )


def review_body(obj: dict[str, Any], resource: str = "jobs") -> bytes:
    """An AdmissionReview creating ``obj`` (a batch/v1 object), as the API server sends it."""
    group, _, version = obj["apiVersion"].rpartition("/")
    request = {
        "uid": str(uuid.uuid4()),
        "kind": {"group": group, "version": version, "kind": obj["kind"]},
        "resource": {"group": group, "version": version, "resource": resource},
        "operation": "CREATE",
        "namespace": obj["metadata"]["namespace"],
        "name": obj["metadata"]["name"],
        "object": obj,
        "userInfo": {"username": "scale-user"},
    }
    return orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})


def memory_mib(pid: int) -> dict[str, float]:
    """Resident memory now (VmRSS) and at its peak (VmHWM), from /proc/<pid>/status."""
    figures: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            figures[f"{key.lower()}_mib"] = round(int(value.split()[0]) / 1024, 1)
    return figures


def percentiles_ms(seconds: list[float]) -> dict[str, float]:
    cuts = statistics.quantiles(seconds, n=100, method="inclusive")
    return {
        "reviews": len(seconds),
        "p50_ms": round(cuts[49] * 1000, 2),
        "p99_ms": round(cuts[98] * 1000, 2),
        "max_ms": round(max(seconds) * 1000, 2),
    }


class Tasgate:
    """One ``tasgate serve --kubeconfig`` process and a TLS client session to its webhook port."""

    def __init__(self, cp: ControlPlane, workdir: Path) -> None:
        self.port, self.metrics_port = free_ports(2)
        self.certs = workdir / "tasgate-certs"
        self.stderr_path = workdir / "tasgate.err"
        argv = serve_argv(cp.kubeconfig, self.port, self.metrics_port, self.certs, "60")
        with (workdir / "tasgate.out").open("wb") as out, self.stderr_path.open("wb") as err:
            self.started = time.perf_counter()
            self.proc = subprocess.Popen(argv, stdout=out, stderr=err)
        self.session: aiohttp.ClientSession | None = None

    async def wait_ready(self, timeout: float = 600.0) -> float:
        """Seconds from the process start to ``/readyz`` answering 200 over TLS."""
        deadline = self.started + timeout
        while time.perf_counter() < deadline:
            self.check_alive()
            if (self.certs / "ca.crt").is_file():
                if self.session is None:
                    context = ssl.create_default_context(cafile=str(self.certs / "ca.crt"))
                    self.session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context, limit=1))
                try:
                    async with self.session.get(self.url("/readyz")) as r:
                        if r.status == 200:
                            return time.perf_counter() - self.started
                except aiohttp.ClientError:
                    pass
            await asyncio.sleep(0.1)
        raise AssertionError(f"tasgate not ready after {timeout:.0f}s:\n{self.log_tail()}")

    def url(self, path: str) -> str:
        return f"https://localhost:{self.port}{path}"

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise AssertionError(f"tasgate serve exited {self.proc.returncode}:\n{self.log_tail()}")

    def log_tail(self) -> str:
        return self.stderr_path.read_text(errors="replace")[-3000:]

    async def review(self, path: str, body: bytes) -> dict[str, Any]:
        assert self.session is not None, "wait_ready() first"
        headers = {"Content-Type": "application/json"}
        async with self.session.post(self.url(f"{path}?timeout=10s"), data=body, headers=headers) as r:
            text = await r.read()
            if r.status != 200:
                raise AssertionError(f"{path}: HTTP {r.status}: {text[:500]!r}")
            answer: dict[str, Any] = orjson.loads(text)
            return answer

    async def mutated(self, obj: dict[str, Any]) -> dict[str, Any]:
        """``obj`` as the API server would store it: tasgate's ``/mutate`` patch applied."""
        response = (await self.review("/mutate", review_body(obj)))["response"]
        if not response["allowed"] or "patch" not in response:
            return obj
        patch = orjson.loads(base64.b64decode(response["patch"]))
        result: dict[str, Any] = jsonpatch.apply_patch(obj, patch)
        return result

    async def verdict(self, body: bytes) -> Verdict:
        return Verdict.of(await self.review("/validate", body))

    async def latencies(self, body: bytes, duration: float) -> tuple[list[float], set[Verdict]]:
        """Reviews of ``body`` one after another for ``duration`` seconds: each round trip in
        seconds, and every distinct verdict they gave."""
        seconds: list[float] = []
        verdicts: set[Verdict] = set()
        end = time.perf_counter() + duration
        while (began := time.perf_counter()) < end:
            answer = await self.review("/validate", body)
            seconds.append(time.perf_counter() - began)
            verdicts.add(Verdict.of(answer))
        return seconds, verdicts

    async def gauge(self, name: str) -> float:
        """The sum of a gauge's series on the plain-HTTP metrics port (one series per flavor here)."""
        assert self.session is not None, "wait_ready() first"
        async with self.session.get(f"http://127.0.0.1:{self.metrics_port}/metrics") as r:
            text = (await r.read()).decode()
        samples = [s for f in text_string_to_metric_families(text) for s in f.samples if s.name == name]
        assert samples, f"no {name} on /metrics"
        return float(sum(s.value for s in samples))

    async def stop(self) -> None:
        if self.session is not None:
            await self.session.close()
        stop_process(self.proc, 20)
