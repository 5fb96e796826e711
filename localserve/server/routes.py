"""The native routes (ABEJA, Cortex): ``/<api>``, ``/<api>/predict``, and ``/`` and ``/predict`` with one API.

A thin front door onto the engine: the route table is a dict (no per-request Starlette objects), each request one
``Engine.submit`` of an ``HttpExchange`` (``protocols/door.py``).

Methods, as the platforms took them: a Cortex API answers ``POST`` on every route and ``GET``/``HEAD`` (describe) on
``/<api>`` and ``/``. An ABEJA handler also receives ``GET``, ``PUT``, ``PATCH``, ``DELETE`` (its ``http_method``) and
``HEAD`` wherever it receives ``GET``, on every route but ``GET /<api>``. ``OPTIONS`` is a 204 with ``Allow``; any other
method a 405 with ``Allow``, before the body is read. The OpenAPI document lists the same.
"""

from __future__ import annotations

from localserve.config.options import ServeOptions
from localserve.engine.api import ApiRuntime
from localserve.engine.core import Engine
from localserve.protocols.door import HttpWire
from localserve.protocols.http import (
    Receive,
    Scope,
    Send,
    answer_other_method,
    json_reply,
    request_id_of,
)
from localserve.protocols.http import send_reply as send_answer

DESCRIBE_ROUTE = b"GET, HEAD, POST, OPTIONS"
PREDICT_ROUTE = b"POST, OPTIONS"
ABEJA_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")  # what an ABEJA handler receives (server/openapi.py too)
ABEJA_CALLS = (*ABEJA_METHODS, "HEAD")  # HEAD where GET is taken: the handler runs, uvicorn drops the body
ALLOW = {  # (an ABEJA handler, the /predict form) -> the methods the route takes
    (False, False): DESCRIBE_ROUTE,
    (False, True): PREDICT_ROUTE,
    (True, False): b"GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS",
    (True, True): b"GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS",
}
Route = tuple[ApiRuntime, bool]  # the API, and whether the path is the /predict form


class NativeRoutes:
    """The native routes of every API of one replica."""

    def __init__(self, engine: Engine, options: ServeOptions) -> None:
        self.engine = engine
        self.wire = HttpWire.of(options)
        self.routes: dict[str, Route] = {}  # path -> route
        for rt in engine.apis.values():
            self.routes[f"/{rt.api.name}"] = (rt, False)
            self.routes[f"/{rt.api.name}/predict"] = (rt, True)
        if len(engine.apis) == 1:
            only = next(iter(engine.apis.values()))
            self.routes["/"] = (only, only.api.kind == "abeja")
            self.routes["/predict"] = (only, True)

    async def serve(self, route: Route, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer a request on ``route``: predict, describe, or the method's refusal."""
        rt, is_predict = route
        method = scope["method"]
        abeja = rt.api.kind == "abeja"
        describe = method in ("GET", "HEAD") and not is_predict
        if method == "POST" or (abeja and not describe and method in ABEJA_CALLS):
            await self.predict(rt, scope, receive, send)
        elif describe:  # uvicorn sends no body for HEAD
            await send_answer(send, json_reply(200, rt.describe()), request_id_of(scope))
        else:
            allow = ALLOW[abeja, is_predict]
            await answer_other_method(send, method, scope["path"], allow, request_id_of(scope))

    async def predict(self, rt: ApiRuntime, scope: Scope, receive: Receive, send: Send) -> None:
        """One request of ``rt``'s API: one call into the engine."""
        await self.engine.submit(rt, self.wire.exchange(rt.api.name, scope, receive, send, request_id_of(scope)))
