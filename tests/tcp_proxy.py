"""A TCP proxy on 127.0.0.1 that a test can cut and restore, to provoke a network outage.

Clients reach the broker through the proxy (the broker *advertises* the proxy's port,
so every connection, bootstrap or not, goes through it). :meth:`TcpProxy.cut` closes
every relayed connection and the listening socket, so new connections are refused
(ECONNREFUSED), exactly what a client sees when the broker's host goes away;
:meth:`TcpProxy.restore` listens again on the same port.
"""

from __future__ import annotations

import contextlib
import socket
import threading

__all__ = ["TcpProxy"]


class TcpProxy:
    """Relay ``127.0.0.1:port`` to ``upstream`` with plain threads (one pump per direction).

    Parameters
    ----------
    upstream_port : int or None
        Port of the real server on 127.0.0.1; may be set later through
        :attr:`upstream_port` (the broker needs the proxy's port before it starts).
    """

    host = "127.0.0.1"

    def __init__(self, upstream_port: int | None = None) -> None:
        self.upstream_port = upstream_port
        self._lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self._accepting: threading.Thread | None = None
        self.accepted = 0
        #: every byte clients sent (upstream direction), for tests that inspect requests
        self.sent = bytearray()
        self.port = self._listen(0)

    # -- control --------------------------------------------------------------------------
    def cut(self) -> None:
        """Close every relayed connection and stop listening (new connects are refused)."""
        with self._lock:
            listener, self._listener = self._listener, None
            conns, self._conns = self._conns, set()
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()
        if self._accepting is not None:
            self._accepting.join(timeout=5)

    def restore(self) -> None:
        """Listen again on the same port."""
        self._listen(self.port)

    def close(self) -> None:
        """Stop for good (same as :meth:`cut`)."""
        self.cut()

    @property
    def cut_off(self) -> bool:
        return self._listener is None

    # -- internals ------------------------------------------------------------------------
    def _listen(self, port: int) -> int:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, port))
        sock.listen(64)
        sock.settimeout(0.2)  # lets the accept loop notice a cut promptly
        with self._lock:
            self._listener = sock
        self._accepting = threading.Thread(
            target=self._accept_loop, args=(sock,), name="tcp-proxy-accept", daemon=True
        )
        self._accepting.start()
        return int(sock.getsockname()[1])

    def _accept_loop(self, listener: socket.socket) -> None:
        while self._listener is listener:
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed by cut()
            try:
                upstream = socket.create_connection((self.host, int(self.upstream_port or 0)), 5)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._listener is not listener:  # cut meanwhile
                    client.close()
                    upstream.close()
                    return
                self._conns.update((client, upstream))
                self.accepted += 1
            for a, b, tap in ((client, upstream, True), (upstream, client, False)):
                threading.Thread(
                    target=self._pump, args=(a, b, tap), name="tcp-proxy-pump", daemon=True
                ).start()

    def _pump(self, src: socket.socket, dst: socket.socket, tap: bool) -> None:
        try:
            try:
                src.setblocking(True)
            except OSError:  # cut() closed the connection before this pump started
                return
            while True:
                try:
                    data = src.recv(65536)
                except OSError:
                    break
                if not data:
                    break
                if tap:
                    with self._lock:
                        self.sent += data
                try:
                    dst.sendall(data)
                except OSError:
                    break
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()
            with self._lock:
                self._conns.discard(src)
                self._conns.discard(dst)

    def __enter__(self) -> TcpProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
