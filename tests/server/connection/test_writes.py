"""The HTTP protocol's response writer: a response's head and body leave in one write, and in order."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import Any

import pytest
import uvicorn

from localserve.config.options import HttpLimits
from localserve.server.connection.protocol import protocol_class
from localserve.server.connection.writes import OneWrite


class Recorder:
    """A transport that keeps what is written (the socket boundary)."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        assert not self.closed, "written after close"
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str) -> str:
        return f"info {name}"


def test_head_and_body_of_one_step_leave_in_one_write() -> None:
    async def main() -> list[bytes]:
        transport = Recorder()
        writer = OneWrite(transport, asyncio.get_running_loop())  # type: ignore[arg-type]
        writer.write(b"HTTP/1.1 200 OK\r\n\r\n")
        writer.write(b"body")
        writer.write(b"more")
        await asyncio.sleep(0)
        return transport.writes

    assert asyncio.run(main()) == [b"HTTP/1.1 200 OK\r\n\r\nbody", b"more"]


def test_a_head_alone_leaves_at_the_next_turn_of_the_loop() -> None:
    async def main() -> tuple[list[bytes], list[bytes]]:
        transport = Recorder()
        writer = OneWrite(transport, asyncio.get_running_loop())  # type: ignore[arg-type]
        writer.write(b"head")
        before = list(transport.writes)
        await asyncio.sleep(0)
        writer.write(b"body")
        return before, transport.writes

    assert asyncio.run(main()) == ([], [b"head", b"body"])


def test_close_writes_what_is_held_first_and_a_closed_transport_gets_nothing() -> None:
    async def main() -> tuple[list[bytes], list[bytes], str]:
        closing, gone = Recorder(), Recorder()
        loop = asyncio.get_running_loop()
        writer = OneWrite(closing, loop)  # type: ignore[arg-type]
        writer.write(b"head")
        writer.close()
        late = OneWrite(gone, loop)  # type: ignore[arg-type]
        late.write(b"head")
        gone.close()  # the client went away before the loop's next turn
        await asyncio.sleep(0)
        return closing.writes, gone.writes, late.get_extra_info("peername")

    assert asyncio.run(main()) == ([b"head"], [], "info peername")


def _serve(app: Any) -> tuple[uvicorn.Server, threading.Thread, int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    config = uvicorn.Config(app, log_config=None, lifespan="off", http=protocol_class(HttpLimits()))
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    return server, thread, sock.getsockname()[1]


# Two requests in one send; the second asks the server to close the connection after its answer.
TWO_PIPELINED = (
    b"POST /one HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n"
    b"POST /two HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
)


def _read_all(client: socket.socket) -> bytes:
    data = b""
    while chunk := client.recv(65536):
        data += chunk
    return data


def test_a_whole_reply_written_at_once_keeps_the_connection_alive_and_honours_close() -> None:
    """``send_reply`` with our protocol's scope writes the response in one go (``reply_now``); the
    connection then serves its next request (two pipelined here), and ``Connection: close`` ends it
    after the answer, as uvicorn's own ``send`` would. A header uvicorn would refuse falls back to it."""
    from localserve.messages.response import Reply
    from localserve.protocols.http import fast_path, send_reply

    used: list[bool] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await receive()
        used.append(fast_path(scope) is not None)
        body = scope["path"].encode()
        kind = b"text/plain\x01" if scope["path"] == "/bad" else b"text/plain"
        await send_reply(send, Reply(headers=[(b"content-type", kind)], body=body), "id-" + scope["path"][1:], scope)

    server, thread, port = _serve(app)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as client:
            client.sendall(TWO_PIPELINED)
            answers = _read_all(client)  # the server closes the connection after the second answer
        first, second = answers.split(b"HTTP/1.1 ")[1:]
        assert first.startswith(b"200 OK\r\n") and b"x-request-id: id-one\r\n" in first and first.endswith(b"/one")
        assert b"connection: close" not in first.lower()
        assert b"content-length: 4\r\n" in second and b"connection: close\r\n" in second and second.endswith(b"/two")
        assert used == [True, True]
        with socket.create_connection(("127.0.0.1", port), timeout=30) as client:
            client.sendall(b"POST /bad HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            answer = _read_all(client)
        assert answer == b""  # uvicorn's send refused the header and closed the connection, as it always did
    finally:
        server.should_exit = True
        thread.join(30)


def test_a_client_request_id_that_cannot_be_sent_back_is_replaced() -> None:
    from localserve.protocols.http import request_id_of

    assert request_id_of({"headers": [(b"x-request-id", b"abc-1")]}) == "abc-1"
    made = request_id_of({"headers": [(b"x-request-id", b"abc\x01")]})
    assert made != "abc\x01" and len(made) == 32


def _read_answers(client: socket.socket, count: int) -> list[bytes]:
    """``count`` whole responses (each with content-length) from ``client``."""
    data, answers = b"", []
    while len(answers) < count:
        while b"\r\n\r\n" not in data:
            chunk = client.recv(65536)
            assert chunk, f"the connection closed after {len(answers)} answers"
            data += chunk
        head, _, data = data.partition(b"\r\n\r\n")
        length = int(next(line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:"))[15:])
        while len(data) < length:
            chunk = client.recv(65536)
            assert chunk, "the connection closed inside a body"
            data += chunk
        answers.append(head + b"\r\n\r\n" + data[:length])
        data = data[length:]
    return answers


def _its_path_as_answer(scope: dict[str, Any]) -> tuple[Any, list[tuple[bytes, bytes]], bytes]:
    """The request's writer for the API's thread (our connection's), and an answer that is its path."""
    from localserve.protocols.http import fast_path

    path = fast_path(scope)
    assert path is not None and path.writer is not None
    body = scope["path"].encode()
    return path.writer, [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())], body


def test_a_thread_writes_the_answer_while_the_event_loop_is_blocked() -> None:
    """``FastReply`` as the engine's ``ReplyWriter``: the bytes leave from the writing thread (the client reads the whole answer while
    the loop cannot run), and ``complete`` on the loop then serves the pipelined next request, whose
    ``Connection: close`` ends the connection after its answer."""
    client_read = threading.Event()
    rests: list[bytes | None] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await receive()
        writer, headers, body = _its_path_as_answer(scope)
        writing = threading.Thread(target=lambda: rests.append(writer.write(200, headers, body)))
        writing.start()
        if scope["path"] == "/one":
            assert client_read.wait(30), "the client never got the answer the thread wrote"  # the loop is blocked
        writing.join(30)
        writer.complete(rests[-1])

    server, thread, port = _serve(app)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as client:
            client.sendall(TWO_PIPELINED)
            [first] = _read_answers(client, 1)
            client_read.set()
            rest = _read_all(client)  # the server closes the connection after the second answer
        assert first.startswith(b"HTTP/1.1 200 OK\r\n") and first.endswith(b"\r\n\r\n/one")
        assert b"connection: close" not in first.lower()
        assert rest.startswith(b"HTTP/1.1 200 OK\r\n") and b"connection: close\r\n" in rest and rest.endswith(b"/two")
        assert rests == [b"", b""]
    finally:
        client_read.set()
        server.should_exit = True
        thread.join(30)


def test_a_request_after_an_answer_a_thread_wrote_whole_starts_before_the_loop_ends_that_answer() -> None:
    """A keep-alive client sends its next request once it has the answer, often before the loop has ended
    that answer (``complete``). The answer is all out, so the next request is no pipelined one: it starts at
    once (uvicorn would hold it until the first ended), and the late ``complete`` of the first changes nothing
    (each request's end counted once, the connection kept alive, then closed after the answer that asks for it)."""
    events: list[str] = []
    second_began: asyncio.Event | None = None
    first_written = threading.Event()  # the thread's write has returned (else the next head may come first)

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        nonlocal second_began
        if scope["type"] != "http":
            return
        if second_began is None:
            second_began = asyncio.Event()
        await receive()
        writer, headers, body = _its_path_as_answer(scope)
        events.append(f"{scope['path']} began")
        if scope["path"] == "/two":
            second_began.set()
        rest = await asyncio.get_running_loop().run_in_executor(None, writer.write, 200, headers, body)
        if scope["path"] == "/one":  # the client has it, and sends /two: the loop ends /one only after /two began
            first_written.set()
            try:
                await asyncio.wait_for(second_began.wait(), 30)
            except TimeoutError:  # uvicorn holds a request it takes for pipelined until the one before it ends
                events.append("/two held behind /one")
        events.append(f"{scope['path']} ended")
        writer.complete(rest)

    server, thread, port = _serve(app)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=60) as client:
            client.sendall(b"POST /one HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n")
            [first] = _read_answers(client, 1)
            # A head that comes while the thread is still between its write and noting it whole finds the answer
            # not known to be whole: it waits as a pipelined one, as before. Sent once the write has returned.
            assert first_written.wait(30)
            client.sendall(b"POST /two HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            rest = _read_all(client)  # closed after the second answer
        assert first.startswith(b"HTTP/1.1 200 OK\r\n") and first.endswith(b"\r\n\r\n/one")
        assert rest.startswith(b"HTTP/1.1 200 OK\r\n") and b"connection: close\r\n" in rest and rest.endswith(b"/two")
        assert events[:2] == ["/one began", "/two began"] and sorted(events[2:]) == ["/one ended", "/two ended"], events
        deadline = time.monotonic() + 30
        while server.server_state.total_requests < 2:  # the second's end is counted once the loop has run it
            assert time.monotonic() < deadline
            threading.Event().wait(0.01)
        assert server.server_state.total_requests == 2
    finally:
        server.should_exit = True
        thread.join(30)


def test_what_the_socket_does_not_take_the_loop_writes_after_in_order() -> None:
    """A client that does not read: the thread's writes fill the socket, the loop writes the rest of
    the answer the socket took only part of (``complete``), and the thread declines while the loop
    holds bytes, so every byte arrives, in order. A header uvicorn would refuse is declined too (the
    loop's ``send`` then refuses it as always)."""
    from localserve.protocols.http import fast_path

    outcomes: list[str] = []
    size, count = 200 * 1024, 40  # 8 MB: more than a socket buffers

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await receive()
        path = fast_path(scope)
        assert path is not None and path.writer is not None
        writer = path.writer
        index = int(scope["path"][1:])
        body = bytes([48 + index]) * size
        headers = [(b"content-length", str(size).encode())]
        if index == count - 1:
            headers.append((b"x-bad", b"\x01"))
        rest = await asyncio.get_running_loop().run_in_executor(None, writer.write, 200, headers, body)
        if rest is None:
            outcomes.append("declined")
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": body})
        else:
            outcomes.append("partly" if rest else "whole")
            writer.complete(rest)

    server, thread, port = _serve(app)
    try:
        with socket.socket() as client:
            client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connecting: a small window
            client.settimeout(30)
            client.connect(("127.0.0.1", port))
            requests = [f"GET /{i} HTTP/1.1\r\nhost: x\r\n\r\n".encode() for i in range(count - 1)]
            client.sendall(
                b"".join(requests) + f"GET /{count - 1} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n".encode()
            )
            deadline = time.monotonic() + 60
            while "partly" not in outcomes:  # nothing is read until the socket refused part of an answer
                assert time.monotonic() < deadline, outcomes
                threading.Event().wait(0.01)
            answers = _read_answers(client, count - 1)
            leftover = _read_all(client)
        for index, answer in enumerate(answers):
            assert answer.startswith(b"HTTP/1.1 200 OK\r\n")
            assert answer.endswith(b"\r\n\r\n" + bytes([48 + index]) * size), index
        assert leftover == b""  # the last one's header was refused by uvicorn's send, which closes the connection
        first = outcomes.index("partly")  # the socket took the first answers whole, then part of one
        assert outcomes[:first] == ["whole"] * first and outcomes[-1] == "declined", outcomes
    finally:
        server.should_exit = True
        thread.join(30)


async def _answer_ok(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """An app that reads the request and answers "ok" through the front doors' own send (its fast path)."""
    from localserve.messages.response import Reply
    from localserve.protocols.http import send_reply

    if scope["type"] != "http":
        return
    await receive()
    await send_reply(send, Reply(headers=[(b"content-type", b"text/plain")], body=b"ok"), "id", scope)


def test_a_request_leaves_no_reference_cycle_for_the_collector() -> None:
    """Each request's objects (uvicorn's cycle, its scope, our ``FastReply``) are freed when it ends, by their
    reference counts: were they a reference cycle, only the collector would free them, with a gen-0 collection
    every ~70 requests that stalls the request it falls on (the c=1 p99, benchmarks/README.md)."""
    import gc

    from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

    server, thread, port = _serve(_answer_ok)
    gc.collect()
    gc.disable()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as client:
            for i in range(20):
                client.sendall(f"POST /cycle-{i} HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n".encode())
                [answer] = _read_answers(client, 1)
                assert answer.endswith(b"\r\n\r\nok")
            alive = [
                o
                for o in gc.get_objects()
                if isinstance(o, RequestResponseCycle) and o.scope["path"].startswith("/cycle-")
            ]
        assert len(alive) <= 1, f"{len(alive)} of 20 requests' cycles wait for the collector"  # the protocol's current
    finally:
        gc.enable()
        server.should_exit = True
        thread.join(30)


@pytest.mark.parametrize("how", ["connection: close", "the client closes", "keep-alive, then the client closes"])
def test_a_closed_connection_leaves_no_reference_cycle_for_the_collector(how: str) -> None:
    """A connection's objects (our protocol, uvloop's transport, uvicorn's cycle and flow control, the last
    scope and its ``FastReply``) are freed by their reference counts once it closes. Left to the collector, a
    client that opens a connection per request made a 3.4 ms gen-0 collection every ~450 requests (iris, c=8,
    ``benchmarks/hotpath.py --connection-close``)."""
    import gc

    from localserve.server.connection.protocol import LimitedHttpProtocol

    server, thread, port = _serve(_answer_ok)
    header = "connection: close\r\n" if how == "connection: close" else ""
    gc.collect()
    gc.disable()
    try:
        for i in range(10):
            with socket.create_connection(("127.0.0.1", port), timeout=30) as client:
                for _ in range(2 if how.startswith("keep-alive") else 1):
                    client.sendall(f"POST /c-{i} HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n{header}\r\n".encode())
                    [answer] = _read_answers(client, 1)
                    assert answer.endswith(b"\r\n\r\nok")
        deadline = time.monotonic() + 60
        while server.server_state.connections:  # each closed on the loop's side too (connection_lost)
            assert time.monotonic() < deadline
            threading.Event().wait(0.01)
        left = [o for o in gc.get_objects() if isinstance(o, LimitedHttpProtocol)]
        assert left == [], f"{len(left)} of 10 closed connections wait for the collector"
    finally:
        gc.enable()
        server.should_exit = True
        thread.join(30)
