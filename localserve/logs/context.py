"""What every log line reads: the API and request id of the work in progress, and the handler
``configure_logging`` installed (the access log writes its batches through it)."""

from __future__ import annotations

import logging
from contextvars import ContextVar

api_var: ContextVar[str | None] = ContextVar("localserve_api", default=None)
request_id_var: ContextVar[str | None] = ContextVar("localserve_request_id", default=None)


class Installed:
    """The handler of the last ``configure_logging`` (None: none, or a ``--log-config`` replaced it)."""

    handler: logging.Handler | None = None


installed = Installed()
