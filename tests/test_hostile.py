"""A catalogue of hostile requests, each sent to a real ``localserve serve`` process over a socket.

Every case gets its exact 4xx (and JSON error with the request id) and the server still
answers ``/healthz`` afterwards.
"""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import msgpack
import pytest

from tests.conftest import EXAMPLES
from tests.test_e2e import output_of, server

pytestmark = pytest.mark.slow


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def error(self) -> str:
        document = json.loads(self.body)
        assert document["request_id"] == self.headers["x-request-id"]
        return str(document["error"])


def exchange(url: str, *pieces: bytes) -> Answer:
    """Send ``pieces`` on one connection (stopping if the server hangs up) and read the answer to its end."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        for piece in pieces:
            try:
                sock.sendall(piece)
            except (BrokenPipeError, ConnectionResetError):
                break  # refused mid-way: the answer is already on its way
        received = b""
        try:
            while chunk := sock.recv(65536):
                received += chunk
                if b"\r\n\r\n" in received and _complete(received):
                    break
        except ConnectionResetError:
            pass
    head, _, body = received.partition(b"\r\n\r\n")
    return answer_of(head, body)


def read_to_close(sock: socket.socket) -> bytes:
    """Every byte the server sends on ``sock`` until it closes the connection (or resets it)."""
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except ConnectionResetError:
        pass
    return received


def answer_of(head: bytes, body: bytes) -> Answer:
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    return Answer(int(lines[0].split()[1]), headers, body)


def _complete(received: bytes) -> bool:
    head, _, body = received.partition(b"\r\n\r\n")
    for line in head.decode("latin-1").lower().split("\r\n"):
        if line.startswith("content-length: "):
            return len(body) >= int(line.split(": ")[1])
    return head.startswith(b"HTTP/1.1 204") or (head.startswith(b"HTTP/1.1 200") and b"HEAD" in received)


def post(path: str, body: bytes, content_type: str = "application/json") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body


def request(method: str, path: str) -> bytes:
    return f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode()


SAMPLE = {"sepal_length": 5.2, "sepal_width": 3.6, "petal_length": 1.4, "petal_width": 0.3}
INPUT = "Input 'input' expects float32 of shape [-1, 4]"


@pytest.fixture(scope="module")
def iris() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    flags = ("--header-timeout", "1", "--body-timeout", "1", "--max-headers", "50")
    with server("--project", str(EXAMPLES / "iris_onnx"), *flags) as running:
        yield running


CASES: dict[str, tuple[tuple[bytes, ...], int, str]] = {
    "one endless header": (
        (b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ", *[b"a" * (1 << 20)] * 8),
        431,
        "The request head (request line and headers) is over 65536 bytes (--max-header-bytes).",
    ),
    "an endless request line": (
        (b"GET /" + b"a" * (1 << 20),),
        431,
        "The request head (request line and headers) is over 65536 bytes (--max-header-bytes).",
    ),
    "too many headers": (
        (b"GET /healthz HTTP/1.1\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(51)) + b"\r\n",),
        431,
        "The request has more than 50 headers (--max-headers).",
    ),
    "a head that never ends": (
        (b"GET /healthz HTTP/1.1\r\nHost: x\r\n",),
        408,
        "The request head did not arrive within 1 s (--header-timeout).",
    ),
    "a body that never ends": (
        (b"POST /iris HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{",),
        408,
        "The request body did not arrive within 1 s (--body-timeout).",
    ),
    "JSON nested 100,000 deep": (
        (post("/iris", b"[" * 100_000),),
        400,
        "The body is not valid JSON: arrays and objects are nested deeper than 1024 levels (at char 1025).",
    ),
    "an integer of 5,000 digits": (
        (post("/iris", b"1" * 5000),),
        400,
        "The body is not valid JSON: an integer has more than 4300 digits.",
    ),
    "JSON that is not UTF-8": (
        (post("/iris", b'{"a": "\xff"}'),),
        400,
        "The body is not valid JSON: it is not UTF-8 (invalid start byte at byte 7).",
    ),
    "msgpack nested 100,000 deep": (
        (post("/iris", b"\x91" * 100_000, "application/msgpack"),),
        400,
        "The body is not valid msgpack: arrays and maps are nested deeper than 1024 levels.",
    ),
    "msgpack with a string that is not UTF-8": (
        (post("/iris", b"\xa2\xff\xfe", "application/msgpack"),),
        400,
        "The body is not valid msgpack: a string is not UTF-8 (invalid start byte); send binary data as msgpack bin, "
        "not str.",
    ),
    "msgpack with an int map key": (
        (post("/iris", msgpack.packb({1: 5.2}), "application/msgpack"),),
        400,
        "The body is not valid msgpack: a map key is an int; map keys must be strings or binary (msgpack str or bin).",
    ),
    "1e39 for a float32 input": (
        (post("/iris", json.dumps({**SAMPLE, "sepal_width": 1e39}).encode()),),
        400,
        f"{INPUT}; the value 1e+39 at [1] is out of range for float32.",
    ),
    "1e400, beyond a double": (
        (post("/iris", b'{"sepal_length": 1e400, "sepal_width": 3.6, "petal_length": 1.4, "petal_width": 0.3}'),),
        400,
        "The body is not valid JSON: the number 1e400 is beyond the range of a double (about ±1.8e308); "
        "write Infinity or -Infinity to mean infinity.",
    ),
    "a boolean for a number": (
        (post("/iris", json.dumps({**SAMPLE, "petal_width": True}).encode()),),
        400,
        f"{INPUT}; the value True at [3] is a boolean, not a number.",
    ),
    "a boolean in msgpack": (
        (post("/iris", msgpack.packb({**SAMPLE, "sepal_length": False}), "application/msgpack"),),
        400,
        f"{INPUT}; the value False at [0] is a boolean, not a number.",
    ),
    "a request line that is not HTTP": (
        (b"GARBAGE\r\n\r\n",),
        400,
        "The request is not valid HTTP/1.1: Invalid method encountered.",
    ),
    "both Content-Length and Transfer-Encoding": (
        (b"POST /iris HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",),
        400,
        "The request is not valid HTTP/1.1: Transfer-Encoding can't be present with Content-Length.",
    ),
    "a transfer coding other than chunked": (
        (b"POST /iris HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n1\r\n{\r\n0\r\n\r\n",),
        501,
        "Transfer-Encoding 'gzip, chunked' is not supported; send the body with Content-Length or with "
        "Transfer-Encoding: chunked alone.",
    ),
    "two Content-Type headers that disagree": (
        (post("/iris", json.dumps(SAMPLE).encode(), "application/json\r\nContent-Type: text/plain"),),
        400,
        "The request has two Content-Type headers that disagree ('application/json' and 'text/plain'); send one.",
    ),
    "PATCH on an API": (
        (request("PATCH", "/iris"),),
        405,
        "Method PATCH is not allowed on /iris; it takes GET, HEAD, POST, OPTIONS.",
    ),
    "GET on a predict route": (
        (request("GET", "/iris/predict"),),
        405,
        "Method GET is not allowed on /iris/predict; it takes POST, OPTIONS.",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_hostile_request_gets_its_4xx_and_the_server_keeps_answering(
    iris: tuple[str, subprocess.Popen[bytes]], case: str
) -> None:
    url, proc = iris
    pieces, status, message = CASES[case]
    answer = exchange(url, *pieces)
    assert (answer.status, answer.error()) == (status, message), output_of(proc)
    assert httpx.get(f"{url}/healthz").json() == {"status": "ok"}
    response = httpx.post(f"{url}/iris", json=SAMPLE)
    assert (response.status_code, response.json()["class_label"]) == (200, "iris-setosa")


def test_a_content_type_sent_twice_alike_is_taken(iris: tuple[str, subprocess.Popen[bytes]]) -> None:
    url, _ = iris
    answer = exchange(
        url, post("/iris", json.dumps(SAMPLE).encode(), "application/json\r\nContent-Type: Application/JSON")
    )
    assert (answer.status, json.loads(answer.body)["class_label"]) == (200, "iris-setosa")


def test_options_star_asks_the_server_as_a_whole(iris: tuple[str, subprocess.Popen[bytes]]) -> None:
    url, _ = iris
    answer = exchange(url, request("OPTIONS", "*"))
    assert (answer.status, answer.headers["allow"], answer.body) == (
        204,
        "get, head, post, options",
        b"",
    )  # header lines read lower-cased


def test_head_and_options(iris: tuple[str, subprocess.Popen[bytes]]) -> None:
    url, _ = iris
    described = httpx.get(f"{url}/iris")
    head = httpx.head(f"{url}/iris")
    assert (head.status_code, head.content, head.headers["content-length"]) == (
        200,
        b"",
        described.headers["content-length"],
    )
    options = httpx.options(f"{url}/iris/predict")
    assert (options.status_code, options.content, options.headers["allow"]) == (204, b"", "POST, OPTIONS")
    assert httpx.options(f"{url}/iris").headers["allow"] == "GET, HEAD, POST, OPTIONS"
    assert httpx.patch(f"{url}/iris").headers["allow"] == "GET, HEAD, POST, OPTIONS"
    put = httpx.put(f"{url}/v2/models/iris/infer")  # a route of the Open Inference Protocol
    assert (put.status_code, put.headers["allow"]) == (405, "POST")
    assert put.json()["error"] == "Method PUT is not allowed on /v2/models/iris/infer; it takes POST."
    assert httpx.delete(f"{url}/healthz").headers["allow"] == "GET, HEAD"


def test_an_idle_connection_is_closed_after_the_header_timeout(iris: tuple[str, subprocess.Popen[bytes]]) -> None:
    url, _ = iris
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        assert sock.recv(1) == b""  # closed by the server (the 30 s timeout would raise instead)


def answers(url: str, data: bytes, *, half_close: bool = False) -> list[Answer]:
    """Send ``data`` on one connection (then shut its writing side) and read every answer until the server closes it."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(data)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        received = read_to_close(sock)
    found = []
    while received:
        head, _, rest = received.partition(b"\r\n\r\n")
        answer = answer_of(head, rest)
        length = int(answer.headers["content-length"])
        answer.body, received = rest[:length], rest[length:]
        found.append(answer)
    return found


def keep_alive_post(path: str, body: bytes) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        + body
    )


PIPELINED = {
    "a head over the limit": (
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 180_000 + b"\r\n\r\n",
        431,
        "The request head (request line and headers) is over 65536 bytes (--max-header-bytes).",
    ),
    "a request that is not HTTP": (
        b"GARBAGE\r\n\r\n",
        400,
        "The request is not valid HTTP/1.1: Invalid method encountered.",
    ),
}


@pytest.mark.parametrize("case", list(PIPELINED))
def test_a_pipelined_request_is_refused_after_the_answer_before_it(
    iris: tuple[str, subprocess.Popen[bytes]], case: str
) -> None:
    url, proc = iris
    refused, status, message = PIPELINED[case]
    # One write: the refused request follows the first one in the same reads.
    found = answers(url, keep_alive_post("/iris", json.dumps(SAMPLE).encode()) + refused)
    assert [a.status for a in found] == [200, status], output_of(proc)
    assert json.loads(found[0].body)["class_label"] == "iris-setosa"
    assert found[1].error() == message


def test_a_keep_alive_connection_between_requests_is_not_a_head_in_progress(
    iris: tuple[str, subprocess.Popen[bytes]],
) -> None:
    url, proc = iris
    host, port = url.removeprefix("http://").split(":")
    ask = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        for attempt in range(2):
            sock.sendall(ask)
            received = b""
            while not (b"\r\n\r\n" in received and _complete(received)):
                chunk = sock.recv(65536)
                assert chunk, output_of(proc)  # closed: the idle time was taken for a slow head
                received += chunk
            assert received.startswith(b"HTTP/1.1 200"), received
            if attempt == 0:  # idle past --header-timeout, proven by a slow head begun later and refused meanwhile
                with socket.create_connection((host, int(port)), timeout=30) as slow:
                    slow.sendall(b"GET /healthz HTTP/1.1\r\nHost")
                    refused = b""
                    while chunk := slow.recv(65536):
                        refused += chunk
                    assert refused.startswith(b"HTTP/1.1 408"), refused


HALF_CLOSED = {
    "a head cut short": (
        b"POST /iris HTTP/1.1\r\nHost: x\r\nContent-Le",
        "The request head ended early: the connection was closed before the blank line that ends the headers.",
    ),
    "a body cut short": (
        b"POST /iris HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{",
        "The request body ended early: the connection was closed after 1 bytes of the 100 bytes its Content-Length "
        "announced.",
    ),
    "a chunked body cut short": (
        b"POST /iris HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n",
        "The request body ended early: the connection was closed after 2 bytes of its chunked body, before the last "
        "(zero-size) chunk.",
    ),
}


@pytest.mark.parametrize("case", list(HALF_CLOSED))
def test_a_request_cut_short_by_a_half_close_is_a_400(iris: tuple[str, subprocess.Popen[bytes]], case: str) -> None:
    url, proc = iris
    sent, message = HALF_CLOSED[case]
    found = answers(url, sent, half_close=True)  # uvicorn alone closes without a word
    assert [a.status for a in found] == [400], output_of(proc)
    assert found[0].error() == message
    assert found[0].headers["connection"] == "close"


@pytest.mark.parametrize(
    ("accept", "content_type"),
    [
        ("APPLICATION/MSGPACK", "application/msgpack"),
        ("Application/X-Msgpack;Q=0.9, application/json;q=0.5", "application/msgpack"),
        ("application/msgpack;q=2", "application/json"),
        ("application/msgpack;q=-1, application/json;q=0.1", "application/json"),
    ],
)
def test_accept_is_matched_without_case_and_a_weight_that_is_no_qvalue_is_not_taken(
    iris: tuple[str, subprocess.Popen[bytes]], accept: str, content_type: str
) -> None:
    url, _ = iris
    answer = httpx.post(f"{url}/iris", json=SAMPLE, headers={"accept": accept})
    assert (answer.status_code, answer.headers["content-type"]) == (200, content_type)
