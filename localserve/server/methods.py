"""Which HTTP methods an API route takes: HEAD as GET without a body, OPTIONS, 405 with Allow.

A Cortex API answers ``POST`` (predict) on every route, and ``GET``/``HEAD`` (describe) on
``/<api>`` and ``/``; ``/<api>/predict`` and ``/predict`` take ``POST`` only, as Cortex's
own server did. ``OPTIONS`` answers 204 with ``Allow``; any other method is 405 with
``Allow``, before the body is read or user code runs. ABEJA handlers receive every method
(the platform passed ``http_method`` through), so nothing here applies to them.
"""

from __future__ import annotations

from localserve.engine import answer_other_method, json_reply, send_reply
from localserve.engine.lifecycle import Scope, Send
from localserve.server.api import ApiRuntime
from localserve.server.wire import request_id_of

DESCRIBE_ROUTE = b"GET, HEAD, POST, OPTIONS"
PREDICT_ROUTE = b"POST, OPTIONS"


async def answer_method(route: tuple[ApiRuntime, bool], scope: Scope, send: Send) -> bool:
    """Answer a request the route does not serve itself (OPTIONS, HEAD, 405); True when answered."""
    rt, is_predict = route
    method = scope["method"]
    if rt.api.kind == "abeja" or method == "POST":
        return False
    allow = PREDICT_ROUTE if is_predict else DESCRIBE_ROUTE
    request_id = request_id_of(scope)
    if method in ("GET", "HEAD") and not is_predict:
        await send_reply(send, json_reply(200, rt.describe()), request_id)  # uvicorn sends no body for HEAD
        return True
    await answer_other_method(send, method, scope["path"], allow, request_id)
    return True
