"""uvicorn's Server as localserve runs it: no WebSocket, a plain HTTP answer to an upgrade."""

from __future__ import annotations

import logging
import socket
import threading
from typing import Any

import pytest


def test_a_websocket_upgrade_is_answered_as_plain_http_without_advice_to_install_a_library(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """localserve serves no WebSocket: uvicorn runs with ``ws="none"`` (its websockets library is never imported)
    and the request is answered as the plain HTTP request it also is, quietly."""
    from localserve.config.options import ServeOptions
    from localserve.server.connection.server import uvicorn_server

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"7")]})
        await send({"type": "http.response.body", "body": scope["type"].encode() + b"/" + scope["path"][1:].encode()})

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    started = threading.Event()
    server = uvicorn_server(app, ServeOptions(), on_signal=lambda: None, on_started=started.set)
    assert server.config.ws == "none"
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    with caplog.at_level(logging.DEBUG, logger="localserve"):  # an earlier test may have set its level
        thread.start()
        try:
            assert started.wait(30)
            with socket.create_connection(sock.getsockname(), timeout=30) as client:
                client.sendall(
                    b"GET /ws HTTP/1.1\r\nhost: x\r\nconnection: Upgrade\r\nupgrade: websocket\r\n"
                    b"sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\nsec-websocket-version: 13\r\n\r\n"
                )
                answer = b""
                while b"\r\n\r\n" not in answer or len(answer.split(b"\r\n\r\n", 1)[1]) < 7:  # head and body may
                    chunk = client.recv(65536)  # come in two segments
                    if not chunk:
                        break
                    answer += chunk
        finally:
            server.should_exit = True
            thread.join(30)
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n") and answer.endswith(b"\r\n\r\nhttp/ws"), answer
    assert "asks to upgrade to b'websocket': answered as plain HTTP" in caplog.text
    assert "WebSocket library" not in caplog.text and "Unsupported upgrade" not in caplog.text
