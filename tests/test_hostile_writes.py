"""Clients that never read their answer, against a real server.

An answer the client reads none of holds the connection at most --write-timeout seconds; an aborted
large answer is freed by reference counting alone (no ``gc.collect()``).
"""

from __future__ import annotations

import gc
import socket
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from localserve.config import load_config
from localserve.server import ServeOptions
from localserve.server.runner import Runner
from tests.conftest import wait_until
from tests.test_e2e import output_of, server

BIG_HANDLER = """
def handler(request, context):
    return {"content_type": "application/octet-stream", "content": b"x" * 10_000_000}
"""

BIG_PREDICTOR = """
import threading
import weakref
from starlette.responses import Response

refs, calls = [], []
gate = threading.Event()  # set: no request is held
gate.set()


class PythonPredictor:
    def __init__(self, config):
        pass

    def predict(self, payload):
        calls.append(payload)
        gate.wait(120)  # the test holds the API's one thread here to queue the next request
        response = Response(b"x" * 10_000_000, media_type="application/octet-stream")
        refs.append(weakref.ref(response))
        return response
"""


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    project = tmp_path_factory.mktemp("big")
    (project / "main.py").write_text(BIG_HANDLER)
    with server("-p", str(project), "--handler", "main:handler", "--write-timeout", "1") as running:
        yield running


def reader_that_reads_nothing(port: int, path: str = "/") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=120)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.sendall(
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nX-Request-ID: never-read\r\n\r\n{{}}".encode()
    )
    return sock


@pytest.mark.slow
def test_a_client_that_reads_nothing_is_dropped_after_the_write_timeout(
    big: tuple[str, subprocess.Popen[bytes]],
) -> None:
    url, proc = big
    port = int(url.rsplit(":", 1)[1])
    with reader_that_reads_nothing(port) as sock:
        closed = "request never-read from 127.0.0.1:"
        wait_until(lambda: closed in output_of(proc), "the server dropping the connection")
        line = next(line for line in output_of(proc).splitlines() if closed in line)
        assert (
            line.split(closed, 1)[1]
            .split(": ", 1)[1]
            .startswith(
                "the connection is closed, its answer unsent: the client read none of it for 1 s (--write-timeout; "
            )
        ), line
        received = b""
        try:
            while chunk := sock.recv(1 << 20):
                received += chunk
        except ConnectionResetError:
            pass
        assert received.startswith(b"HTTP/1.1 200 OK\r\n") and len(received) < 10_000_000
    assert httpx.get(f"{url}/healthz").json() == {"status": "ok"}


@pytest.fixture
def big_in_process(make_project, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Runner, int, Any]]:
    """``BIG_PREDICTOR`` served in this process, so its answers' weak references can be read: runner, port, module."""
    project: Path = make_project({"predictor.py": BIG_PREDICTOR, "cortex.yaml": CORTEX})
    monkeypatch.chdir(project)
    monkeypatch.syspath_prepend(str(project))
    runner = Runner(load_config(project), ServeOptions(metrics=False))
    port = runner.start_in_thread(wait=60)
    try:
        import predictor

        assert runner.server is not None
        yield runner, port, predictor
    finally:
        runner.stop_thread()


def test_an_aborted_large_answer_is_freed_without_a_collection(big_in_process: tuple[Runner, int, Any]) -> None:
    runner, port, predictor = big_in_process
    assert runner.server is not None
    connections = runner.server.server_state.connections
    gc.collect()
    gc.disable()  # only reference counting may free the answer
    try:
        for linger in (True, False):  # the client resets the connection, or closes it unread
            with reader_that_reads_nothing(port, "/big") as sock:
                assert sock.recv(17) == b"HTTP/1.1 200 OK\r\n"
                if linger:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            wait_until(lambda: not connections, "the server seeing the connection end")
            # Its request ends once the app's task sees the client gone; with no collection, only
            # reference counting can free the answer then (a reference cycle would keep it forever).
            wait_until(lambda: all(ref() is None for ref in predictor.refs), "the aborted answer freed")
        assert len(predictor.refs) == 2
    finally:
        gc.enable()


def test_queued_answers_their_clients_never_read_are_freed_without_a_collection(
    big_in_process: tuple[Runner, int, Any],
) -> None:
    """The issue's reproduction: clients that queue for the API's one thread, never read their 10 MB answer, and
    close. A request that waited got a task listening for its client; that task, cancelled once the request was
    answered, tied the request and its answer into a reference cycle (989 MB after three rounds of 20)."""
    runner, port, predictor = big_in_process
    assert runner.server is not None
    connections, lifecycle = runner.server.server_state.connections, runner.app.apis["big"].lifecycle
    gc.collect()
    gc.disable()  # only reference counting may free the answers
    try:
        predictor.gate.clear()
        first = reader_that_reads_nothing(port, "/big")
        wait_until(lambda: len(predictor.calls) == 1, "the first request holding the API's one thread")
        queued = [reader_that_reads_nothing(port, "/big") for _ in range(3)]
        wait_until(
            lambda: sum(job.listener is not None for job in list(lifecycle.waiting)) == 3,
            "the queued requests listening for their clients",
        )
        predictor.gate.set()
        for sock in (first, *queued):  # each answer begins: it was made, and its client reads none of it
            assert sock.recv(17) == b"HTTP/1.1 200 OK\r\n"
        assert len(predictor.refs) == 4
        for sock in (first, *queued):
            sock.close()
        wait_until(lambda: not connections, "the server seeing the connections end")
        wait_until(lambda: all(ref() is None for ref in predictor.refs), "the aborted answers freed")
    finally:
        gc.enable()
        predictor.gate.set()  # the server's stop waits for the API's thread


CORTEX = """
- name: big
  kind: RealtimeAPI
  predictor:
    type: python
    path: predictor.py
"""
