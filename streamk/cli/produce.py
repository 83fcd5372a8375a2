"""Write a data file to a Kafka topic as streamk events (``streamk produce FILE --topic T``).

Inputs, chosen by ``format`` or the file suffix:

* ``csv`` (``.csv``): a header row, then one row per event. The target column (the last
  one unless ``target`` names another) becomes ``y`` (an int, else a float, ``true`` or
  ``false`` in any case a bool, else text; an empty cell means unlabelled); the other
  columns become ``x``, a map from column name to number (an empty cell means the feature
  is absent). ``streamk learn`` reads CSV files with the same reader and checks. With
  ``block_size=N`` rows are packed N at a time into block events
  (:func:`~streamk.engine.events.encode_block`, ``x`` then a dense row in header order,
  every cell required), the fast form for high-throughput streams.
* ``jsonl`` (``.jsonl``, ``.ndjson``): one JSON event map per line, re-packed as msgpack.
* ``msgpack`` (anything else): a recorded event log, sent byte for byte as framed by
  :class:`~streamk.sources.replay.ReplaySource` (a torn tail goes as one record, which
  the engine dead-letters, as in ``streamk replay``).

Events are not validated here: the engine validates and dead-letters. The topic is
created with ``partitions`` partitions if it does not exist (an existing topic is used
as it is). Messages carry no key, so the producer spreads them over partitions.
Every ``batch`` messages the producer is flushed, so memory stays bounded and a broker
failure surfaces as :class:`~streamk.sinks.SinkError` within ``timeout_s``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..engine.events import encode_block, encode_event
from ..engine.registry import csv_header, csv_number, csv_rows, parse_label
from ..errors import ConfigError, InvalidInput
from ..sinks import KafkaSink
from .argtypes import positive_int
from .broker import create_topic
from .output import SCHEMA_VERSION

__all__ = ["produce", "iter_messages", "cmd_produce", "add_arguments", "EXAMPLES"]

#: called about once a second with (messages sent, seconds elapsed)
Progress = Callable[[int, float], None]

_FORMATS = ("csv", "jsonl", "msgpack")


def _format_of(path: Path, format: str | None) -> str:
    """The input's format: given, else from its extension past a compression extension
    (``events.jsonl.gz`` is JSON lines, ``data.csv.gz`` a CSV file, read decompressed)."""
    from ..sources.replay import JSON_SUFFIXES, log_suffix

    if format is None:
        suffix = log_suffix(path)
        format = "csv" if suffix == ".csv" else "jsonl" if suffix in JSON_SUFFIXES else "msgpack"
    if format not in _FORMATS:
        raise ConfigError(f"input format must be one of {list(_FORMATS)}, not {format!r}.")
    return format


_Rows = Iterator[tuple[int, list[str], str]]


def _csv_rows(path: Path, target: str | None) -> tuple[list[str], _Rows]:
    """Feature columns and an iterator of ``(line, feature cells, target cell)``.

    The header is checked now, before any topic is created, by the reader ``streamk learn``
    uses too (:func:`~streamk.engine.registry.csv_header`, ``csv_rows``): a file the one
    refuses, the other refuses with the same words.
    """
    header, t = csv_header(path, target)
    features = header[:t] + header[t + 1 :]

    def rows() -> _Rows:
        for line, row in csv_rows(path, len(header)):
            yield line, row[:t] + row[t + 1 :], row[t]

    return features, rows()


def _csv_events(path: Path, features: list[str], rows: _Rows) -> Iterator[bytes]:
    for line, cells, y in rows:
        x = {c: csv_number(path, line, c, v) for c, v in zip(features, cells) if v != ""}
        yield encode_event(x=x, y=parse_label(y))


def _csv_blocks(path: Path, features: list[str], rows: _Rows, block_size: int) -> Iterator[bytes]:
    X: list[list[float]] = []
    ys: list[Any] = []
    for line, cells, y in rows:
        row = []
        for c, v in zip(features, cells):
            if v == "":
                raise InvalidInput(
                    f"{path}:{line}: column {c!r} is empty; block events need every feature "
                    "(drop --block-size to send sparse events)."
                )
            row.append(csv_number(path, line, c, v))
        X.append(row)
        ys.append(parse_label(y))
        if len(X) == block_size:
            yield encode_block(X, ys)
            X, ys = [], []
    if X:
        yield encode_block(X, ys)


def _log_events(path: Path, json_lines: bool) -> Iterator[bytes]:
    from ..sources.replay import ReplaySource, decode_json_record

    source = ReplaySource(path)
    while not source.exhausted():
        for record in source.poll(10_000, 0.0):
            payload = record.payload or b""
            if not json_lines:
                yield payload
                continue
            try:
                yield decode_json_record(payload)  # the engine's own decoder
            except ValueError as exc:
                raise InvalidInput(
                    f"{path}:{record.offset + 1}: not a JSON event ({exc})."
                ) from None


def iter_messages(
    path: str | os.PathLike[str],
    *,
    format: str | None = None,
    target: str | None = None,
    block_size: int | None = None,
) -> Iterator[bytes]:
    """The message values :func:`produce` would send, in order (see the module docstring)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no input file at {path}")
    fmt = _format_of(path, format)
    if block_size is not None:
        if block_size < 1:
            raise ConfigError(f"block_size must be at least 1, not {block_size}.")
        if fmt != "csv":
            raise ConfigError(f"block_size packs CSV rows; {path} is {fmt}.")
        return _csv_blocks(path, *_csv_rows(path, target), block_size)
    if fmt == "csv":  # the header is checked now, before any topic is created
        return _csv_events(path, *_csv_rows(path, target))
    return _log_events(path, fmt == "jsonl")


def produce(
    path: str | os.PathLike[str],
    topic: str,
    bootstrap: str | list[str],
    *,
    format: str | None = None,
    target: str | None = None,
    block_size: int | None = None,
    batch: int = 100_000,
    partitions: int | None = None,
    producer_config: dict[str, Any] | None = None,
    progress: Progress | None = None,
    timeout_s: float = 60.0,
) -> int:
    """Send the events of a file to ``topic``; return how many messages were sent.

    Parameters
    ----------
    path : str or path-like
        A CSV file, a JSON-lines event log or a msgpack event log.
    topic : str
        Destination; created if missing.
    bootstrap : str or list of str
        Kafka bootstrap servers.
    format : {"csv", "jsonl", "msgpack"} or None
        Input format. Default: None (from the suffix; unknown suffixes are msgpack).
    target : str or None
        CSV label column. Default: None (the last column).
    block_size : int or None
        Pack this many CSV rows per block event. Default: None (one event per row).
    batch : int
        Messages between flushes (waits for the broker's acknowledgements). Default: 100000.
    partitions : int or None
        Partitions of a topic created here. Default: None (1).
    producer_config : dict or None
        Extra ``KafkaProducer`` settings (security, compression ...). Default: None.
    progress : callable or None
        Called about once a second with (messages sent, seconds elapsed). Default: None.
    timeout_s : float
        Bound on each flush. Default: 60.0.

    Raises
    ------
    InvalidInput
        A row or line that cannot be turned into an event. The whole file is checked
        before anything is sent, so a bad line means nothing was sent: fix it and run
        the same command again, with no duplicates on the topic.
    SinkError
        The broker did not acknowledge messages within ``timeout_s``.
    """
    if batch < 1:
        raise ConfigError(f"batch must be at least 1, not {batch}.")
    try:  # a first pass over the whole file: a bad line is found before any send
        for _ in iter_messages(path, format=format, target=target, block_size=block_size):
            pass
    except InvalidInput as exc:
        raise InvalidInput(f"{exc} Nothing was sent to {topic!r}.") from None
    messages = iter_messages(path, format=format, target=target, block_size=block_size)
    servers = bootstrap if isinstance(bootstrap, str) else ",".join(bootstrap)
    create_topic(servers, topic, partitions or 1)
    config = {"linger_ms": 20, "batch_size": 256 * 1024, **(producer_config or {})}
    sink = KafkaSink(bootstrap, topic, config, timeout_s)
    start = last = time.monotonic()
    sent = 0
    try:
        for value in messages:
            sink._send(value, None, [])
            sent += 1
            if sent % batch == 0:
                sink.flush()
            if progress is not None and sent % 256 == 0:
                now = time.monotonic()
                if now - last >= 1.0:
                    last = now
                    progress(sent, now - start)
        sink.flush()
    finally:
        sink.close()
    if progress is not None:
        progress(sent, time.monotonic() - start)
    return sent


# -- command line -----------------------------------------------------------------------
EXAMPLES = """\
examples:
  # one event per CSV row, label in the last column, 4 partitions
  streamk produce data.csv --topic events --partitions 4
  # label in column "class"; 512 rows per block event (the fast form)
  streamk produce data.csv --topic events --target class --block-size 512
  # a recorded log (.jsonl or msgpack), against a remote cluster
  streamk produce events.jsonl --topic events --bootstrap-servers kafka1:9092,kafka2:9092
"""


def cmd_produce(args: argparse.Namespace) -> int:
    """Write a CSV file or an event log to a Kafka topic as streamk events."""
    show = not args.quiet and not args.json

    def report(sent: int, elapsed: float) -> None:
        rate = sent / elapsed if elapsed > 0 else 0.0
        print(f"\r{sent:,} messages  {rate:,.0f}/s", end="", file=sys.stderr, flush=True)

    start = time.monotonic()
    sent = produce(
        args.file,
        args.topic,
        args.bootstrap_servers,
        format=args.format,
        target=args.target,
        block_size=args.block_size,
        batch=args.batch,
        partitions=args.partitions,
        progress=report if show else None,
    )
    elapsed = time.monotonic() - start
    if show:
        print(file=sys.stderr)
    if args.json:
        doc = {"topic": args.topic, "messages": sent, "seconds": round(elapsed, 3)}
        print(json.dumps({"schema_version": SCHEMA_VERSION, **doc}))
    elif not args.quiet:
        print(f"produced {sent:,} messages to {args.topic!r} in {elapsed:.1f}s")
    return 0


def add_arguments(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``produce`` on an argparse subparsers object (``func`` set as a default)."""
    parser = subparsers.add_parser(
        "produce",
        help="write a CSV file or an event log to a Kafka topic",
        description=cmd_produce.__doc__,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("file", help="a .csv file, a .jsonl event log or a msgpack event log")
    parser.add_argument("--topic", required=True, help="destination topic (created if missing)")
    parser.add_argument(
        "--bootstrap-servers",
        default=os.environ.get("STREAMK_BOOTSTRAP_SERVERS", "127.0.0.1:9092"),
        help="Kafka bootstrap servers (default: $STREAMK_BOOTSTRAP_SERVERS or 127.0.0.1:9092)",
    )
    parser.add_argument(
        "--partitions", type=positive_int, help="partitions of a topic created here (default: 1)"
    )
    parser.add_argument("--target", help="CSV label column (default: the last one)")
    parser.add_argument(
        "--block-size",
        type=positive_int,
        help="pack this many CSV rows per block event (default: off)",
    )
    parser.add_argument(
        "--format", choices=_FORMATS, help="input format (default: from the file suffix)"
    )
    parser.add_argument(
        "--batch",
        type=positive_int,
        default=100_000,
        help="messages between waits for acknowledgement (default: 100000)",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress display")
    parser.set_defaults(func=cmd_produce)
    return parser
