"""Request ids: the client's X-Request-ID, or a new one unique in this process."""

from __future__ import annotations

import itertools
import uuid

from uvicorn.protocols.http.httptools_impl import HEADER_VALUE_RE  # what uvicorn refuses in a header value

from localserve.engine.lifecycle import Scope

_ID_PREFIX = uuid.uuid4().hex[:16]
_id_counter = itertools.count(1)


def request_id_of(scope: Scope) -> str:
    """The client's X-Request-ID, or a new one: unique per process prefix + counter (no syscall per request).

    A client's id holding control characters is replaced: it could not be sent back as a header.
    """
    for name, value in scope["headers"]:
        if name == b"x-request-id" and value and not HEADER_VALUE_RE.search(value):  # it is sent back as a header
            return str(value.decode("latin-1")[:200])
    return f"{_ID_PREFIX}{next(_id_counter):016x}"
