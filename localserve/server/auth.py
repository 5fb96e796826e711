"""The optional API key (``serve --api-key`` / ``LOCALSERVE_API_KEY``): an ASGI middleware around the app.

Every HTTP request but the health probes (``/healthz``, ``/readyz``, their aliases) and the pages' own files (``/docs``,
``/dashboard`` and their assets, which ask for the key) must carry ``Authorization: Bearer <key>``, else a 401 with
``WWW-Authenticate: Bearer``. The key is compared in constant time.
"""

from __future__ import annotations

import hmac
import logging
from typing import Any

from localserve.errors import RequestError, Unauthorized
from localserve.protocols.http import Receive, Scope, Send, render_error, request_id_of, send_reply
from localserve.server.pages import PAGE_PATHS

log = logging.getLogger("localserve")
OPEN_PATHS = frozenset({"/healthz", "/health_check", "/readyz", "/v2/health/live", "/v2/health/ready", *PAGE_PATHS})


class ApiKeyMiddleware:
    """Refuse requests without ``Authorization: Bearer <key>`` (401), health probes and the pages' files excepted."""

    def __init__(self, app: Any, key: str) -> None:
        self.app = app
        self.expected = b"bearer " + key.encode("utf-8")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        given = [value for name, value in scope["headers"] if name == b"authorization"]
        if len(given) > 1:  # which one a proxy or a handler would read is a guess: neither is taken
            request_id = request_id_of(scope)
            message = f"The request has {len(given)} Authorization headers; send one."
            log.warning("request %s to %s refused with 400: %s", request_id, scope["path"], message)
            await send_reply(send, render_error(RequestError(message), request_id), request_id)
            return
        await self._check(given[0] if given else b"", scope, receive, send)

    async def _check(self, given: bytes, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve the request if ``given`` carries the key, else answer 401."""
        # The scheme is case-insensitive (RFC 9110); the key is not.
        if hmac.compare_digest(given[:7].lower() + given[7:], self.expected):
            await self.app(scope, receive, send)
            return
        request_id = request_id_of(scope)
        reason = "no Authorization header" if not given else "the key is wrong or not a Bearer token"
        log.warning("request %s to %s refused with 401: %s", request_id, scope["path"], reason)
        message = (
            f"Unauthorized: this server requires 'Authorization: Bearer <key>' (--api-key); {reason}."
            if not given
            else f"Unauthorized: {reason}; expected 'Authorization: Bearer <key>' with the server's --api-key."
        )
        await send_reply(send, render_error(Unauthorized(message), request_id), request_id)


def require_api_key(app: Any, key: str | None) -> Any:
    """``app`` itself without a key, else ``app`` behind an ApiKeyMiddleware."""
    return app if not key else ApiKeyMiddleware(app, key)
