"""The gRPC port's limits against hostile clients, speaking raw HTTP/2 (h2) to a real ``localserve serve --grpc-port``:
calls whose messages stall, calls without the API key, and connections that never call.

Each wait is on an event the server causes (a stream's trailers or reset, a GOAWAY, the connection's end);
the sockets' timeouts only keep a broken server from hanging the suite.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from urllib.parse import unquote

import h2.config
import h2.connection
import h2.events
import httpx
import pytest

from localserve.protocols.v2.grpc.guard import READS_AT_ONCE
from tests.conftest import EXAMPLES, free_port
from tests.protocols.v2.grpc.test_grpc_engine import grpc_app, wait_for
from tests.protocols.v2.test_routes import sample
from tests.test_e2e import output_of, server

pytestmark = pytest.mark.slow

MiB = 1024 * 1024
ANNOUNCED = 50 * MiB  # each call's message, as its gRPC length prefix announces it
SENT = 10 * MiB  # what each call sends of it, at most, before it stalls
CALLS = 60
INFER = "/inference.GRPCInferenceService/ModelInfer"
SAFETY = 60.0  # seconds a socket waits for the server before the test fails (never reached when it works)


def rss(pid: int, field: str = "VmRSS") -> int:
    """A process's resident memory (``VmRSS``) or its peak since the last reset (``VmHWM``), in bytes."""
    with open(f"/proc/{pid}/status") as status:
        line = next(line for line in status if line.startswith(f"{field}:"))
    return int(line.split()[1]) * 1024


@contextmanager
def h2_connection(port: int) -> Iterator[tuple[socket.socket, h2.connection.H2Connection]]:
    sock = socket.create_connection(("127.0.0.1", port), timeout=SAFETY)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    try:
        yield sock, conn
    finally:
        sock.close()


def open_calls(conn: h2.connection.H2Connection, count: int, key: str | None) -> list[int]:
    """``count`` ModelInfer calls, each announcing a ``ANNOUNCED``-byte message; none sends its end."""
    streams = []
    for _ in range(count):
        stream = conn.get_next_available_stream_id()
        headers = [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", INFER),
            (":authority", "localhost"),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
        ]
        if key is not None:
            headers.append(("authorization", f"Bearer {key}"))
        conn.send_headers(stream, headers)
        conn.send_data(stream, b"\x00" + ANNOUNCED.to_bytes(4, "big"))
        streams.append(stream)
    return streams


def push_until_closed(sock: socket.socket, conn: h2.connection.H2Connection, streams: list[int]) -> dict[int, str]:
    """Send each stream's message as far as the server's windows let (``SENT`` at most), and never its rest,
    until the server has ended every stream; each stream's ``grpc-status`` (or ``reset``)."""
    sent = dict.fromkeys(streams, 5)
    ended: dict[int, str] = {}
    chunk = bytes(16384)
    while len(ended) < len(streams):
        for stream in streams:
            while stream not in ended and sent[stream] < SENT:
                room = min(conn.local_flow_control_window(stream), conn.max_outbound_frame_size, SENT - sent[stream])
                if room <= 0:
                    break
                conn.send_data(stream, chunk[:room])
                sent[stream] += room
            sock.sendall(conn.data_to_send())
        data = sock.recv(1 << 20)  # the server's next frames: windows opened, or streams ended
        assert data, f"the connection closed with streams open: {sorted(set(streams) - set(ended))}"
        for event in conn.receive_data(data):
            if isinstance(event, h2.events.TrailersReceived | h2.events.ResponseReceived):
                status = dict(event.headers).get("grpc-status")
                if status is not None:
                    ended[event.stream_id] = f"{status} {unquote(dict(event.headers).get('grpc-message', ''))}"
            elif isinstance(event, h2.events.StreamReset) and event.stream_id not in ended:
                ended[event.stream_id] = "reset"
        sock.sendall(conn.data_to_send())
    return ended


@pytest.fixture(scope="module")
def guarded() -> Iterator[tuple[str, int, int]]:
    """iris over gRPC with an API key and a short --body-timeout: (HTTP url, gRPC port, server pid)."""
    port = free_port()
    args = ("--project", str(EXAMPLES / "iris_onnx"), "--grpc-port", str(port), "--api-key", "s3cret")
    with server(*args, "--body-timeout", "2", "--header-timeout", "1", "--grpc-idle-timeout", "1") as (url, proc):
        yield url, port, proc.pid
        log = output_of(proc)
    assert "Traceback" not in log, log


def test_calls_without_the_key_are_refused_unread(guarded: tuple[str, int, int]) -> None:
    _, port, pid = guarded
    start = rss(pid)
    with open(f"/proc/{pid}/clear_refs", "w") as refs:
        refs.write("5")  # the peak (VmHWM) starts again from here
    with h2_connection(port) as (sock, conn):
        streams = open_calls(conn, CALLS, key=None)
        ended = push_until_closed(sock, conn, streams)
    unauthenticated = (
        "16 Unauthorized: this server requires 'authorization: Bearer <key>' metadata (--api-key); no authorization "
        "metadata."
    )
    assert set(ended.values()) == {unauthenticated}, ended
    assert rss(pid, "VmHWM") - start < 100 * MiB


def test_stalled_messages_are_closed_and_memory_stays_bounded(guarded: tuple[str, int, int]) -> None:
    url, port, pid = guarded
    start = rss(pid)
    with open(f"/proc/{pid}/clear_refs", "w") as refs:
        refs.write("5")
    with h2_connection(port) as (sock, conn):
        streams = open_calls(conn, CALLS, key="s3cret")
        ended = push_until_closed(sock, conn, streams)
    assert set(ended.values()) == {"4 The request message did not arrive within 2 s (--body-timeout)."}, ended
    assert rss(pid, "VmHWM") - start < 100 * MiB, (start, rss(pid, "VmHWM"))
    metrics = httpx.get(f"{url}/metrics", headers={"authorization": "Bearer s3cret"}).text
    assert sample(metrics, "localserve_grpc_refusals_total", reason="message_timeout") == CALLS


def test_idle_connections_are_closed(guarded: tuple[str, int, int]) -> None:
    _, port, _ = guarded
    with socket.create_connection(("127.0.0.1", port), timeout=SAFETY) as silent:
        while silent.recv(1 << 16):  # the server's settings, then its end: --header-timeout without a preface
            pass
    with h2_connection(port) as (sock, conn):
        events: list[h2.events.Event] = []
        while data := sock.recv(1 << 16):  # settings, then a GOAWAY after --grpc-idle-timeout, then the end
            events += conn.receive_data(data)
            sock.sendall(conn.data_to_send())
    assert any(isinstance(event, h2.events.ConnectionTerminated) for event in events), events


def test_a_call_cancelled_while_its_message_is_awaited_leaves_nothing_held(serve, make_project) -> None:
    """A client that resets its call before its message came: the guard keeps nothing of it, neither its
    connection's figures (kept while the connection has calls) nor the watch on its read."""
    with grpc_app(serve, make_project, "") as (client, _, target):
        guard = client.app.grpc.guard
        with h2_connection(int(target.rsplit(":", 1)[1])) as (sock, conn):
            [stream] = open_calls(conn, 1, key=None)
            sock.sendall(conn.data_to_send())
            wait_for(lambda: bool(guard.connections) and bool(guard._reading), "the call's message awaited")
            conn.reset_stream(stream)
            sock.sendall(conn.data_to_send())
            wait_for(lambda: not guard.connections and not guard._reading, "the cancelled call released")


def test_a_connection_reads_at_most_its_share_of_messages_at_once(serve, make_project) -> None:
    """Calls whose messages stall hold their connection's reads: ``READS_AT_ONCE`` of them are read at once (the
    server opens each one's window for its message), the next only once one of them has ended."""
    with grpc_app(serve, make_project, "") as (client, _, target):
        guard = client.app.grpc.guard
        with h2_connection(int(target.rsplit(":", 1)[1])) as (sock, conn):
            streams = open_calls(conn, READS_AT_ONCE + 1, key=None)
            sock.sendall(conn.data_to_send())
            opened: list[int] = []  # the streams whose window the server opened: those being read
            ended: set[int] = set()
            most = 0  # the most streams read at once

            def read_until(done: Callable[[], bool]) -> None:
                nonlocal most
                while not done():
                    data = sock.recv(1 << 16)
                    assert data, "the connection closed"
                    for event in conn.receive_data(data):
                        stream = getattr(event, "stream_id", 0)
                        if isinstance(event, h2.events.WindowUpdated) and stream in streams and stream not in opened:
                            opened.append(stream)
                    sock.sendall(conn.data_to_send())
                    most = max(most, len(set(opened) - ended))

            read_until(lambda: len(opened) == READS_AT_ONCE)
            wait_for(lambda: len(guard._reading) == READS_AT_ONCE + 1, "every call awaiting its message")
            conn.reset_stream(opened[0])  # its read ends: the call still waiting may start
            ended.add(opened[0])
            sock.sendall(conn.data_to_send())
            read_until(lambda: len(opened) == READS_AT_ONCE + 1)
            for stream in set(streams) - ended:
                conn.reset_stream(stream)
            sock.sendall(conn.data_to_send())
            wait_for(lambda: not guard.connections and not guard._reading, "the reset calls released")
    assert most == READS_AT_ONCE and sorted(opened) == streams
