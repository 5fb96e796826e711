"""``kind: TrafficSplitter``: a front door that picks one of its APIs by weight and hands the request to the engine.

A request to ``/<splitter>`` (or ``/<splitter>/predict``) goes to one of its APIs, chosen at random with the weights'
probabilities, as that API's request (one ``Engine.submit``); ``X-Localserve-Api`` names it. A shadow gets a copy of
``weight`` percent of the requests (Istio's ``mirrorPercentage``, as Cortex set it) once the chosen API has read the
body: a second submit nobody waits for, dropped when the shadow cannot admit it, never reaching the client.
``ExtraMetrics`` counts requests per target and shadow copies by outcome.

Splitter requests go through ASGI's sends (not the connection's fast path), so the header is added to every kind of
answer: a Reply, a stream, a Starlette Response of user code, an error.
"""

from __future__ import annotations

import asyncio
import logging
import random
from typing import Any

from localserve.config import SplitterConfig, TrafficSplit
from localserve.engine.api import ApiRuntime
from localserve.engine.core import Engine
from localserve.engine.ports import Headers
from localserve.errors import LocalServeError
from localserve.messages.request import Request
from localserve.messages.response import Reply
from localserve.metrics.extras import SHADOW_OUTCOMES, ExtraMetrics, SplitterFigures, read_splitters
from localserve.metrics.summary import STATUS_CLASSES
from localserve.protocols.door import HttpWire, native_request
from localserve.protocols.http import (
    FAST_PATH,
    Message,
    Receive,
    Scope,
    Send,
    answer_other_method,
    json_reply,
    render_error,
    request_id_of,
    send_reply,
)
from localserve.tracing import Traced

log = logging.getLogger("localserve")

SERVED_BY = b"x-localserve-api"  # the API that answered a splitter's request
ALLOW = b"GET, HEAD, POST, OPTIONS"


class ShadowExchange:
    """The shadow's copy of a request, as the engine's ``Exchange``: its body already read, its answer dropped
    (its errors logged as any request's, never sent)."""

    client: DiscardClient
    deadline = None
    writer = None
    tracked = True

    def __init__(self, request: Request, api: str) -> None:
        self.request: Request | None = request
        self.api = api
        self.method, self.path, self.request_id = request.method, request.path, request.request_id
        self.client = DiscardClient()
        self.received = False  # False: the shadow did not admit it (not ready, queue full), so it was dropped

    async def receive(self) -> tuple[Request, None]:
        request, self.request = self.request, None
        assert request is not None
        self.received = True
        return request, None

    async def send(self, reply: Reply) -> None:
        pass

    def traced(self) -> Traced:
        """A child of the request it copies (the current context, inherited by the copy's task)."""
        attributes = {"http.request.method": self.method, "url.path": self.path, "localserve.shadow": True}
        return Traced({}, f"{self.method} {self.path}", attributes)

    def render(self, error: LocalServeError) -> Reply:
        if not self.received:
            log.info("request %s: the copy for shadow api %r was dropped: %s", self.request_id, self.api, error)
            return Reply(status=error.status_code)
        return render_error(error, self.request_id, api=self.api)  # logged; the body is never sent


class DiscardClient:
    """The shadow copy's ``Client``: it never leaves, and a streamed answer is read and dropped."""

    async def left(self) -> None:
        await asyncio.Event().wait()

    async def stream_start(self, status: int, headers: Headers) -> None:
        pass

    async def stream_chunk(self, data: bytes, more: bool) -> None:
        pass


class Splitter:
    """One TrafficSplitter of this replica: its targets with their cumulative weights, and its shadow."""

    def __init__(self, config: SplitterConfig, apis: dict[str, ApiRuntime]) -> None:
        self.config = config
        self.name = config.name
        self.targets: list[tuple[int, ApiRuntime]] = []  # (cumulative weight, API); weight-0 APIs never chosen
        total = 0
        for split in config.targets:
            if split.weight:
                total += split.weight
                self.targets.append((total, apis[split.name]))
        shadow = config.shadow
        self.shadow: tuple[TrafficSplit, ApiRuntime] | None = None if shadow is None else (shadow, apis[shadow.name])

    def pick(self, rng: random.Random) -> ApiRuntime:
        """An API of the splitter, with probability weight / 100."""
        draw = rng.randrange(100)
        for bound, rt in self.targets:
            if draw < bound:
                return rt
        raise AssertionError("the weights add up to 100")  # config.splitter checked it

    def describe(self) -> dict[str, Any]:
        """JSON for GET /<splitter>."""
        apis = [{"name": s.name, "weight": s.weight, "shadow": s.shadow} for s in self.config.apis]
        return {"name": self.name, "kind": "TrafficSplitter", "apis": apis}


class SplitterRoutes:
    """The routes of every TrafficSplitter of one replica: ``/<splitter>`` and ``/<splitter>/predict``.

    ``rng`` decides the routing (``random.Random()``: fresh entropy); a test may give a seeded one.
    """

    def __init__(
        self,
        engine: Engine,
        splitters: tuple[SplitterConfig, ...],
        wire: HttpWire,
        extras: ExtraMetrics | None,
        rng: random.Random | None = None,
    ) -> None:
        self.engine = engine
        self.wire = wire
        self.extras = extras
        self.rng = rng or random.Random()
        self.splitters = {config.name: Splitter(config, engine.apis) for config in splitters}
        self.routes: dict[str, tuple[Splitter, bool]] = {}
        for splitter in self.splitters.values():
            self.routes[f"/{splitter.name}"] = (splitter, False)
            self.routes[f"/{splitter.name}/predict"] = (splitter, True)
        self.shadows: set[asyncio.Task[None]] = set()  # copies in flight (held so they are not collected)

    def __bool__(self) -> bool:
        return bool(self.splitters)

    async def serve(self, route: tuple[Splitter, bool], scope: Scope, receive: Receive, send: Send) -> None:
        """Answer a request on a splitter's route: predict through one of its APIs, describe it, or refuse."""
        splitter, is_predict = route
        method = scope["method"]
        request_id = request_id_of(scope)
        if method == "POST":
            await self.predict(splitter, scope, receive, send, request_id)
        elif method in ("GET", "HEAD") and not is_predict:
            await send_reply(send, json_reply(200, splitter.describe()), request_id)
        else:
            await answer_other_method(
                send, method, scope["path"], b"POST, OPTIONS" if is_predict else ALLOW, request_id
            )

    async def predict(self, splitter: Splitter, scope: Scope, receive: Receive, send: Send, request_id: str) -> None:
        """One request: the chosen API answers it (counted as its request), the shadow may get a copy."""
        rt = splitter.pick(self.rng)
        if splitter.shadow is not None and self.rng.randrange(100) < splitter.shadow[0].weight:
            receive = self._teed(splitter, receive, scope, request_id)
        extensions = scope.get("extensions")
        if extensions and FAST_PATH in extensions:  # ASGI's sends, where the header is added
            scope = {**scope, "extensions": {k: v for k, v in extensions.items() if k != FAST_PATH}}
        exchange = self.wire.exchange(rt.api.name, scope, receive, _served_by(send, rt.api.name.encode()), request_id)
        status = 499
        try:
            status = (await self.engine.submit(rt, exchange)).status
        finally:
            if self.extras is not None:
                self.extras.routed(splitter.name, rt.api.name, status)

    def _teed(self, splitter: Splitter, receive: Receive, scope: Scope, request_id: str) -> Receive:
        """``receive``, and once the body is whole, its copy submitted to the shadow."""
        chunks: list[bytes] = []
        whole = False

        async def teed() -> Message:
            nonlocal whole
            message = await receive()
            if message["type"] == "http.request" and not whole:
                chunks.append(message.get("body", b""))
                if not message.get("more_body"):
                    whole = True
                    body = b"".join(chunks)
                    chunks.clear()
                    self._shadow(splitter, scope, body, request_id)
            return message

        return teed

    def _shadow(self, splitter: Splitter, scope: Scope, body: bytes, request_id: str) -> None:
        assert splitter.shadow is not None
        task = asyncio.get_running_loop().create_task(self._copy(splitter, splitter.shadow[1], scope, body, request_id))
        self.shadows.add(task)
        task.add_done_callback(self.shadows.discard)

    async def _copy(self, splitter: Splitter, rt: ApiRuntime, scope: Scope, body: bytes, request_id: str) -> None:
        """The shadow's copy: admitted or dropped, run on the shadow's threads, its answer dropped."""
        copy = ShadowExchange(native_request(scope, body, request_id), rt.api.name)
        outcome = "dropped"
        try:
            status = (await self.engine.submit(rt, copy)).status
            if copy.received:
                outcome = "answered" if 200 <= status < 300 else "failed"
        finally:
            self._shadowed(splitter, rt, outcome)

    def _shadowed(self, splitter: Splitter, rt: ApiRuntime, outcome: str) -> None:
        if self.extras is not None:
            self.extras.shadowed(splitter.name, rt.api.name, outcome)

    def stats_json(self) -> list[dict[str, Any]]:
        """Each splitter's ``/stats`` entry: its requests per target (and status class), its shadow's copies."""
        figures = read_splitters(self.engine.figures.collect()) if self.extras is not None else {}
        return [_stats(splitter, figures.get(name) or SplitterFigures()) for name, splitter in self.splitters.items()]

    async def drain(self) -> None:
        """Wait for the shadow copies in flight (tests; shutdown answers them like any request)."""
        while self.shadows:
            await asyncio.gather(*self.shadows, return_exceptions=True)


def _by_class(codes: dict[str, float]) -> dict[str, int]:
    return {c: int(sum(n for code, n in codes.items() if code[:1] == c[:1])) for c in STATUS_CLASSES}


def _stats(splitter: Splitter, figures: SplitterFigures) -> dict[str, Any]:
    targets: dict[str, dict[str, Any]] = {
        split.name: {"weight": split.weight, "requests": _by_class(figures.targets.get(split.name, {}))}
        for split in splitter.config.targets
    }
    states = [rt.state for _, rt in splitter.targets]
    entry: dict[str, Any] = {
        "api": splitter.name,
        "kind": "TrafficSplitter",
        "status": next((state for state in states if state != "ready"), "ready"),
        "requests": {c: sum(t["requests"][c] for t in targets.values()) for c in STATUS_CLASSES},
        "latency": {"mean": None, "p50": None, "p99": None},  # each target's own entry has its latency
        "tracker": None,
        "targets": targets,
    }
    if splitter.shadow is not None:
        split = splitter.shadow[0]
        copies = figures.shadow.get(split.name, {})
        entry["shadow"] = {
            "api": split.name,
            "weight": split.weight,
            **{o: int(copies.get(o, 0)) for o in SHADOW_OUTCOMES},
        }
    return entry


def _served_by(send: Send, name: bytes) -> Send:
    """``send``, with ``X-Localserve-Api: <name>`` added to the head of the answer."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()), (SERVED_BY, name)]}
        await send(message)

    return sending
