"""One webhook URL in front of several tasgate replicas: a loopback TCP forwarder with failover.

A webhook configuration names one URL; in a cluster that URL is a Service, and kube-proxy sends
each new connection to a replica that is up. This is the loopback stand-in for that Service: each
accepted connection goes to the first backend (in the order given) that accepts a TCP connection,
and its bytes are copied both ways untouched, so TLS is between the API server and the replica
itself (one serving certificate for all replicas: ``e2e.faults.Serving``). A replica that dies
mid-review resets its connections; the forwarder passes the reset on by closing the API server's
side, so the API server sees exactly what it would see from a killed pod behind a Service.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Sequence

from e2e.controlplane import free_ports

CONNECT_TIMEOUT = 1.0
CHUNK = 256 * 1024


class Forwarder:
    """Listen on ``port`` (127.0.0.1); forward each connection to the first backend port that accepts."""

    def __init__(self) -> None:
        (self.port,) = free_ports(1)
        self._backends: list[int] = []
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self._threads: list[threading.Thread] = []
        self.connections: dict[int, int] = {}  # backend port -> connections forwarded to it
        self.unrouted = 0  # connections no backend accepted (closed at once)

    def route(self, ports: Sequence[int], drop: bool = True) -> None:
        """Send new connections to ``ports`` (first that accepts wins); with ``drop``, close the
        open ones so the API server reconnects (to the new backends) on its next call."""
        with self._lock:
            self._backends = list(ports)
            doomed = list(self._open) if drop else []
        for sock in doomed:
            _close(sock)

    def start(self) -> Forwarder:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(128)
        self._listener = listener
        self._spawn(self._accept)
        return self

    def stop(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            _close(listener)
        with self._lock:
            doomed = list(self._open)
        for sock in doomed:
            _close(sock)
        for thread in self._threads:
            thread.join(5)

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        thread.start()
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]

    def _accept(self) -> None:
        while self._listener is not None:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed by stop()
            self._spawn(self._connect, client)

    def _connect(self, client: socket.socket) -> None:
        with self._lock:
            backends = list(self._backends)
        for port in backends:
            try:
                upstream = socket.create_connection(("127.0.0.1", port), timeout=CONNECT_TIMEOUT)
            except OSError:
                continue
            upstream.settimeout(None)
            with self._lock:
                self.connections[port] = self.connections.get(port, 0) + 1
                self._open.update((client, upstream))
            self._spawn(self._pump, upstream, client)
            self._pump(client, upstream)
            return
        with self._lock:
            self.unrouted += 1
        _close(client)

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        """Copy until either side ends, then close both (a reset on one is a reset on the other)."""
        try:
            while True:
                data = source.recv(CHUNK)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                _close(sock)
            with self._lock:
                self._open.difference_update((source, sink))


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
