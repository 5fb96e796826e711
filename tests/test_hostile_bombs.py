"""Compressed V2 bodies from a hostile client, against a real ``localserve serve``.

A gzip bomb is inflated off the event loop in bounded steps: ``/healthz`` answers while bombs are
being inflated, each bomb gets its 413, and data after the first gzip member is a 400.
"""

from __future__ import annotations

import gzip
import json
import socket
import subprocess
import zlib
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import EXAMPLES, wait_until
from tests.test_e2e import output_of, server
from tests.test_hostile import Answer, answer_of, exchange, read_to_close

pytestmark = pytest.mark.slow

LIMIT = 256 * 1024 * 1024
BOMBS = 4
INFER = "/v2/models/iris/infer"


def gzip_of_zeros(size: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = b"\0" * (1 << 20)
    return b"".join([*(packer.compress(block) for _ in range(size >> 20)), packer.flush()])


def infer(body: bytes, coding: str = "gzip") -> bytes:
    return (
        f"POST {INFER} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Encoding: {coding}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body


@pytest.fixture(scope="module")
def iris() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    flags = ("--max-body-size", str(LIMIT), "--log-level", "debug")
    with server("--project", str(EXAMPLES / "iris_onnx"), *flags) as running:
        yield running


def read_answer(sock: socket.socket) -> Answer:
    head, _, body = read_to_close(sock).partition(b"\r\n\r\n")
    return answer_of(head, body)


def test_healthz_answers_while_gzip_bombs_are_inflated(iris: tuple[str, subprocess.Popen[bytes]]) -> None:
    url, proc = iris
    host, port = url.removeprefix("http://").split(":")
    bomb = gzip_of_zeros(LIMIT + (1 << 20))  # about 260 KB that inflate past the limit
    socks = [socket.create_connection((host, int(port)), timeout=120) for _ in range(BOMBS)]
    try:
        for sock in socks:
            sock.sendall(infer(bomb))
        inflating = "a gzip request body is inflated off the event loop"
        wait_until(lambda: output_of(proc).count(inflating) == BOMBS, "every bomb being inflated")
        assert httpx.get(f"{url}/healthz", timeout=120).json() == {"status": "ok"}
        # /healthz answered while the bombs were known to be inflating: not every one was refused yet.
        assert output_of(proc).count("rejected a gzip request body") < BOMBS, output_of(proc)
        answers = [read_answer(sock) for sock in socks]
    finally:
        for sock in socks:
            sock.close()
    message = (
        f"The request body decompresses to more than {LIMIT} bytes (--max-body-size); {len(bomb)} bytes were sent "
        "with Content-Encoding gzip."
    )
    assert [(answer.status, json.loads(answer.body)) for answer in answers] == [(413, {"error": message})] * BOMBS


def test_data_after_the_first_gzip_member_is_a_400(iris: tuple[str, subprocess.Popen[bytes]]) -> None:
    url, proc = iris
    document = {"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": [5.1, 3.5, 1.4, 0.2]}]}
    first, second = gzip.compress(json.dumps(document).encode()), gzip.compress(b"{}")
    assert exchange(url, infer(first)).status == 200
    answer = exchange(url, infer(first + second))
    message = (
        f"The gzip body has {len(second)} bytes after the end of its compressed stream (a second gzip member, or "
        "junk); send one stream (Content-Encoding: gzip)."
    )
    assert (answer.status, json.loads(answer.body)) == (400, {"error": message}), output_of(proc)


def test_one_output_named_100_times_is_a_400(iris: tuple[str, subprocess.Popen[bytes]]) -> None:
    """100 copies of ``probabilities`` in a 1.6 MB request answered 114.5 MB."""
    url, proc = iris
    rows = 1000
    document = {
        "inputs": [{"name": "input", "shape": [rows, 4], "datatype": "FP32", "data": [5.1, 3.5, 1.4, 0.2] * rows}],
        "outputs": [{"name": "probabilities"}] * 100,
    }
    answer = exchange(url, infer(json.dumps(document).encode(), "identity"))
    message = "Output 'probabilities' is requested twice; name each output once."
    assert (answer.status, json.loads(answer.body)) == (400, {"error": message}), output_of(proc)
    assert httpx.get(f"{url}/healthz").json() == {"status": "ok"}
