"""Clients that never read their answer (issue 32, item 5), against a real server.

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
import weakref
from starlette.responses import Response

refs = []


class PythonPredictor:
    def __init__(self, config):
        pass

    def predict(self, payload):
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


def test_an_aborted_large_answer_is_freed_without_a_collection(make_project, monkeypatch: pytest.MonkeyPatch) -> None:
    project: Path = make_project({"predictor.py": BIG_PREDICTOR, "cortex.yaml": CORTEX})
    monkeypatch.chdir(project)
    monkeypatch.syspath_prepend(str(project))
    runner = Runner(load_config(project), ServeOptions(metrics=False))
    port = runner.start_in_thread(wait=60)
    try:
        import predictor

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
    finally:
        runner.stop_thread()


CORTEX = """
- name: big
  kind: RealtimeAPI
  predictor:
    type: python
    path: predictor.py
"""
