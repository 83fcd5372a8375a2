"""Reading a role's metrics port in tests: a free port, a GET, the exposition's samples."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (for a process the test starts)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def http_get(port: int, path: str) -> tuple[int, str]:
    """``(status, body)`` of ``GET http://127.0.0.1:port/path``; an error status too."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def metric_samples(text: str) -> dict[str, float]:
    """``name value`` lines of a Prometheus exposition (comments and labelled samples left)."""
    return {
        line.split()[0]: float(line.split()[1])
        for line in text.splitlines()
        if line and not line.startswith("#") and "{" not in line
    }
