"""The HTTP/1.1 connection (uvicorn's httptools protocol with our limits) under a real uvicorn server."""

from __future__ import annotations

import asyncio
import socket
import threading
from typing import Any

import uvicorn

from localserve.config.options import HttpLimits
from localserve.server.connection.protocol import protocol_class


def test_a_real_server_sends_a_head_before_a_body_that_waits(tmp_path: Any) -> None:
    """The head of a streamed answer reaches the client while the body is not yet written (no timing: the
    app writes its body only once the client has read the head), and a HEAD request is answered."""
    head_read = threading.Event()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        headers = [(b"content-type", b"text/plain")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        if scope["method"] == "GET":
            await asyncio.get_running_loop().run_in_executor(None, head_read.wait, 30)
            await send({"type": "http.response.body", "body": b"late", "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()  # connections wait in the backlog until the server runs
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_config=None, lifespan="off", http=protocol_class(HttpLimits()))
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as client:
            client.sendall(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
            head = b""
            while b"\r\n\r\n" not in head:
                head += client.recv(4096)
            assert head.startswith(b"HTTP/1.1 200 OK\r\n")
            assert b"transfer-encoding: chunked\r\n" in head
            assert head.endswith(b"\r\n\r\n")  # nothing of the body came: the app has not written it
            head_read.set()
            rest = b""
            while not rest.endswith(b"0\r\n\r\n"):
                rest += client.recv(4096)
            assert rest == b"4\r\nlate\r\n0\r\n\r\n"
            client.sendall(b"HEAD / HTTP/1.1\r\nhost: x\r\n\r\n")
            answer = b""
            while b"\r\n\r\n" not in answer:
                answer += client.recv(4096)
            assert answer.startswith(b"HTTP/1.1 200 OK\r\n")
            assert answer.endswith(b"\r\n\r\n")
    finally:
        server.should_exit = True
        thread.join(30)
