"""The guarded connection's limits on chunked trailers, from a hostile client against a real ``localserve serve``.

Trailer fields count against the head's limit (431) and never become request headers.
"""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import wait_until
from tests.test_e2e import output_of, server
from tests.test_hostile import Answer, answer_of, exchange, read_to_close

pytestmark = pytest.mark.slow

HEADERS_HANDLER = """
def handler(request, context):
    names = sorted(name.lower() for name, _ in request.raw_headers)
    return {"content_type": "application/json", "content": {"headers": names, "body": request.read().decode()}}
"""

CHUNKED_HEAD = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n"


@pytest.fixture(scope="module")
def echo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    project = tmp_path_factory.mktemp("headers")
    (project / "main.py").write_text(HEADERS_HANDLER)
    with server("-p", str(project), "--handler", "main:handler", "--max-headers", "50") as running:
        yield running


def test_an_endless_trailer_is_a_431_and_healthz_answers_while_it_comes(
    echo: tuple[str, subprocess.Popen[bytes]],
) -> None:
    url, proc = echo
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        # A first trailer field of 40,000 bytes; the second begins, so httptools hands the first over.
        sock.sendall(CHUNKED_HEAD + b"2\r\n{}\r\n0\r\nX-First: " + b"t" * 40_000 + b"\r\nX-Trailer: ")
        wait_until(
            lambda: "trailer field 'X-First' dropped" in output_of(proc), "the server parsing the first trailer field"
        )
        # The attack is in progress (the server holds the request in its trailer fields): the loop answers.
        assert httpx.get(f"{url}/healthz", timeout=60).json() == {"status": "ok"}
        answer = exchange_on(sock, *[b"t" * 16_384] * 8)
    assert (answer.status, answer.error()) == (
        431,
        "The trailer fields after the chunked body are over 65536 bytes (--max-header-bytes).",
    ), output_of(proc)
    assert httpx.get(f"{url}/healthz").json() == {"status": "ok"}


def test_a_trailer_that_fits_is_dropped_and_the_request_answered(echo: tuple[str, subprocess.Popen[bytes]]) -> None:
    url, proc = echo
    # Many chunks of one byte each: a read that ends after a chunk's size line is no trailer.
    body = b"".join(b"1\r\n%c\r\n" % c for c in b"hello")
    answer = exchange(url, CHUNKED_HEAD + body + b"0\r\nX-Request-ID: injected\r\nX-Injected: 1\r\n\r\n")
    assert answer.status == 200, output_of(proc)
    assert answer.headers["x-request-id"] != "injected"
    assert json.loads(answer.body) == {"headers": ["content-type", "host", "transfer-encoding"], "body": "hello"}


def test_trailer_fields_count_with_the_headers(echo: tuple[str, subprocess.Popen[bytes]]) -> None:
    url, proc = echo
    trailers = b"".join(b"X-%d: 1\r\n" % i for i in range(48))  # 3 headers + 48 trailer fields > 50
    answer = exchange(url, CHUNKED_HEAD + b"2\r\n{}\r\n0\r\n" + trailers + b"\r\n")
    assert (answer.status, answer.error()) == (431, "The request has more than 50 headers (--max-headers)."), output_of(
        proc
    )


def exchange_on(sock: socket.socket, *pieces: bytes) -> Answer:
    """Send ``pieces`` on ``sock`` (stopping when the server hangs up) and read its answer to the end."""
    for piece in pieces:
        try:
            sock.sendall(piece)
        except (BrokenPipeError, ConnectionResetError):
            break
    head, _, body = read_to_close(sock).partition(b"\r\n\r\n")
    return answer_of(head, body)
