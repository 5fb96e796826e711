"""create_app(config) -> the ASGI app: one route per API, health, readiness, errors as JSON.

Example::

    app = create_app(load_config(Path("iris-classifier")))
    uvicorn.run(app, port=8888)

Prediction routes are dispatched from a dict straight to the engine (``server/routes.py``), with no per-request
Starlette objects: on small models the server's own work is most of a request's cost. Everything else (health, stats,
metrics, 404s) is a plain Starlette app.
"""

from __future__ import annotations

from collections.abc import Callable

from localserve.config import ServeConfig
from localserve.config.options import HttpLimits, ServeOptions
from localserve.errors import LocalServeError
from localserve.server.app import App

__all__ = ["App", "HttpLimits", "ServeOptions", "create_app"]


def create_app(
    config: ServeConfig,
    options: ServeOptions | None = None,
    on_fatal: Callable[[LocalServeError], None] | None = None,
) -> App:
    """The ASGI app serving every API of ``config``."""
    return App(config, options, on_fatal)
