"""The app in this process behind an httpx transport: its lifespan run on entry and exit, each request one ASGI
exchange with the whole body in and out, requests from several threads served at once on the app's loop.

A small ASGI app of the test's stands in for localserve's, so that what is checked is the transport alone."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import httpx
import pytest

from localserve.testing.transport import AppLoop, InProcessTransport


class Echo:
    """Answers each request with what it received; ``/both`` waits until a second ``/both`` is being served."""

    def __init__(self, fail_startup: bool = False) -> None:
        self.fail_startup = fail_startup
        self.lifespan: list[str] = []
        self.both: asyncio.Event | None = None
        self.waiting = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                self.lifespan.append(message["type"])
                if message["type"] == "lifespan.startup":
                    if self.fail_startup:
                        await send({"type": "lifespan.startup.failed", "message": "no model"})
                        return
                    await send({"type": "lifespan.startup.complete"})
                else:
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if scope["path"] == "/both":
            self.both = self.both or asyncio.Event()
            self.waiting += 1
            if self.waiting == 2:
                self.both.set()
            await asyncio.wait_for(self.both.wait(), 60)  # the bound only catches a transport that serializes
        answer = {
            "method": scope["method"],
            "path": scope["path"],
            "query": scope["query_string"].decode(),
            "body": body.decode(),
            "content_type": dict(scope["headers"]).get(b"content-type", b"").decode(),
        }
        await send({"type": "http.response.start", "status": 201, "headers": [(b"x-echo", b"1")]})
        await send({"type": "http.response.body", "body": json.dumps(answer).encode()})


def test_a_request_is_one_exchange_with_its_whole_body_and_answer() -> None:
    app = Echo()
    with AppLoop(app) as loop, httpx.Client(transport=InProcessTransport(loop), base_url="http://t") as client:
        assert app.lifespan == ["lifespan.startup"]
        response = client.post("/iris?debug=1", json={"a": 1})
    assert app.lifespan == ["lifespan.startup", "lifespan.shutdown"]
    assert (response.status_code, response.headers["x-echo"]) == (201, "1")
    assert response.json() == {
        "method": "POST",
        "path": "/iris",
        "query": "debug=1",
        "body": '{"a":1}',
        "content_type": "application/json",
    }


def test_requests_from_two_threads_are_served_at_once() -> None:
    app = Echo()
    statuses: list[int] = []
    with AppLoop(app) as loop, httpx.Client(transport=InProcessTransport(loop), base_url="http://t") as client:
        threads = [threading.Thread(target=lambda: statuses.append(client.get("/both").status_code)) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert statuses == [201, 201]


def test_a_lifespan_that_fails_to_start_is_raised_and_the_loop_closed() -> None:
    loop = AppLoop(Echo(fail_startup=True))
    with pytest.raises(RuntimeError, match=r"^The app's lifespan failed: no model$"):
        loop.__enter__()
    assert loop.loop.is_closed()
