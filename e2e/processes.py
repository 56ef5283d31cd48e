"""The processes the e2e harness runs: free loopback ports, and one server process with its log.

Every process is stopped on ``stop()`` and, when started from the main thread on Linux, by the
kernel if the Python process is killed outright (``PR_SET_PDEATHSIG``), so a crashed test run
leaves nothing listening.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

_PR_SET_PDEATHSIG = 1
_STOP_TIMEOUT = 15.0  # SIGTERM grace before SIGKILL; the API server drains in well under this
LOG_TAIL_LINES = 40


def stop_process(proc: subprocess.Popen[Any], timeout: float = _STOP_TIMEOUT) -> None:
    """SIGTERM, then SIGKILL after ``timeout``; always reaps, so no zombie is left behind."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait()


def free_ports(count: int) -> list[int]:
    """``count`` distinct free loopback ports; all sockets stay bound until every port is picked.

    There is an unavoidable window between closing them and the server binding, which is why
    start-up failures report the server's log (an "address already in use" shows up there).
    """
    with contextlib.ExitStack() as stack:
        sockets = [
            stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) for _ in range(count)
        ]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]


def _die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` asking the kernel to SIGKILL the child when its parent thread dies.

    This is what cleans up after ``kill -9`` of the test runner, where neither ``atexit`` nor
    ``finally`` run. The signal fires when the *thread* that forked exits, so it is only armed from
    the main thread: a control plane started in a worker thread (``asyncio.to_thread``) would
    otherwise be killed when that worker retires.
    """
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int

    def arm() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)

    return arm


class ServerProcess:
    """One server process with its output appended to a log file (kept across restarts)."""

    def __init__(self, name: str, log_path: Path) -> None:
        self.name = name
        self.log_path = log_path
        self.argv: list[str] = []
        self._proc: subprocess.Popen[bytes] | None = None
        self._starts = 0
        self._start_offset = 0

    def start(self, argv: Sequence[str], env: dict[str, str]) -> None:
        self.argv = list(argv)
        self._starts += 1
        with self.log_path.open("ab") as log:
            self._start_offset = log.tell()
            banner = f"\n===== {self.name} start #{self._starts} at {time.strftime('%H:%M:%S')}: "
            log.write((banner + " ".join(self.argv) + "\n").encode())
            log.flush()
            # The child gets its own dup of the log fd; closing ours right after is safe.
            self._proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # a Ctrl-C in the terminal reaches pytest, which stops us in order
                preexec_fn=_die_with_parent(),  # noqa: PLW1509 - only prctl, armed from the main thread
            )

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def exit_code(self) -> int | None:
        """None while running (or never started), else the exit status."""
        return None if self._proc is None else self._proc.poll()

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def stop(self, timeout: float = _STOP_TIMEOUT) -> None:
        """SIGTERM, then SIGKILL after ``timeout``; always reaps, so no zombie is left behind."""
        proc, self._proc = self._proc, None
        if proc is not None:
            stop_process(proc, timeout)

    def output_since_start(self) -> str:
        """What the current (or last) run of the process logged, for classifying its failure."""
        try:
            with self.log_path.open("rb") as log:
                log.seek(self._start_offset)
                return log.read().decode(errors="replace")
        except OSError:
            return ""

    def tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            with self.log_path.open("rb") as log:
                log.seek(0, os.SEEK_END)
                log.seek(max(0, log.tell() - 64 * 1024))
                text = log.read().decode(errors="replace")
        except OSError as exc:
            return f"(cannot read {self.log_path}: {exc})"
        return "\n".join(text.splitlines()[-lines:])
