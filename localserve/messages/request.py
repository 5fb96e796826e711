"""Request: what a handler receives; an ABEJA-compatible read-only mapping that is also file-like.

Example::

    def handler(request, context):
        request["http_method"]                       # 'POST'
        request["content_type"]                      # 'application/json' (no parameters)
        isinstance(request, dict)                    # True
        request["http_headers"]["Accept-Encoding"]   # 'gzip' (last value) or None
        data = json.load(request)                    # request.read() works too
        for part in request.get("contents", []):     # multipart/form-data only
            part["form_name"], part["file_name"], part.read()
"""

from __future__ import annotations

import functools
import io
from collections.abc import Callable, Iterator, Mapping
from functools import cached_property
from typing import Any
from urllib.parse import parse_qsl

from localserve.messages.multipart import Content, parse_multipart

HIDDEN_HEADERS = frozenset({b"authorization", b"proxy-authorization"})
FORM_CONTENT_TYPE = "application/x-www-form-urlencoded"

RawHeaders = list[tuple[bytes, bytes]]


class HttpHeaders(Mapping[str, str | None]):
    """Case-insensitive view of the request headers: ``h['Accept']`` is the last value, or None."""

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        self._values: dict[str, list[str]] = {}
        for name, value in pairs:
            self._values.setdefault(name.lower(), []).append(value)

    def __getitem__(self, name: str) -> str | None:
        values = self._values.get(name.lower())
        return values[-1] if values else None

    def get(self, name: str, default: Any = None) -> Any:
        """The last value of header ``name`` (any case), or ``default``."""
        values = self._values.get(name.lower())
        return values[-1] if values else default

    def get_all(self, name: str) -> list[str]:
        """Every value of header ``name`` (any case), in the order they came."""
        return list(self._values.get(name.lower(), ()))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._values

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"HttpHeaders({ {k: v[-1] for k, v in self._values.items()}!r})"


def _filled(method: Callable[..., Any]) -> Callable[..., Any]:
    """A dict method of Request that first fills the mapping (built on first use: Cortex APIs never need it)."""

    @functools.wraps(method)
    def wrapper(self: Request, *args: Any, **kwargs: Any) -> Any:
        if not self._mapping_ready:
            self._fill()
        return method(self, *args, **kwargs)

    return wrapper


class Request(dict[str, Any]):
    """One HTTP request as user code sees it: ABEJA's dict (ABEJA Platform docs, *Model handler function for 19.04+*: "This parameter is dict") that is also file-like.

    ``Authorization`` and ``Proxy-Authorization`` are dropped when the request is built, so no
    view of it (the dict, ``raw_headers``, ``header()``, ``http_headers``) can show them.
    """

    def __init__(
        self,
        method: str,
        raw_headers: RawHeaders,
        body: bytes,
        *,
        query_string: bytes = b"",
        request_id: str = "",
        path: str = "/",
    ) -> None:
        super().__init__()
        self._mapping_ready = False
        self.method = method
        self.path = path
        self.query_string = query_string
        self.request_id = request_id
        content_type = None
        visible = raw_headers
        hidden = False
        for name, value in raw_headers:
            if name == b"content-type":
                content_type = value.decode("latin-1")
            elif name in HIDDEN_HEADERS or name.lower() in HIDDEN_HEADERS:
                hidden = True
        if hidden:
            visible = [(n, v) for n, v in raw_headers if n.lower() not in HIDDEN_HEADERS]
        self.raw_headers: RawHeaders = visible
        if method == "GET":
            # ABEJA: a GET carries its query string as the body.
            body = query_string
            content_type = FORM_CONTENT_TYPE
        self.body = body
        self.content_type = content_type  # the whole header, parameters included (payload decoding needs them)
        self._stream = io.BytesIO(body)

    @property
    def media_type(self) -> str | None:
        """The Content-Type without parameters, lower-cased: ``multipart/form-data`` (ABEJA's ``content_type``)."""
        if self.content_type is None:
            return None
        return self.content_type.partition(";")[0].strip().lower()

    # -- file-like ---------------------------------------------------------------------------
    def read(self, size: int | None = -1) -> bytes:
        """Read the body like a file: ``size`` bytes, or the rest."""
        return self._stream.read(-1 if size is None else size)

    def readline(self, size: int = -1) -> bytes:
        """Read one line of the body like a file."""
        return self._stream.readline(size)

    def seek(self, offset: int, whence: int = 0) -> int:
        """Move in the body like a file."""
        return self._stream.seek(offset, whence)

    def tell(self) -> int:
        """The position in the body, like a file."""
        return self._stream.tell()

    # -- the dict ------------------------------------------------------------------------------
    def _fill(self) -> None:
        self._mapping_ready = True
        dict.__setitem__(self, "http_method", self.method)
        dict.__setitem__(self, "content_type", self.media_type)
        dict.__setitem__(self, "headers", self.headers)
        dict.__setitem__(self, "http_headers", self.http_headers)
        if self.is_multipart:
            dict.__setitem__(self, "contents", self.contents)

    __getitem__ = _filled(dict.__getitem__)
    __iter__ = _filled(dict.__iter__)
    __len__ = _filled(dict.__len__)
    __contains__ = _filled(dict.__contains__)
    __eq__ = _filled(dict.__eq__)
    __ne__ = _filled(dict.__ne__)
    __or__ = _filled(dict.__or__)
    __reversed__ = _filled(dict.__reversed__)
    get = _filled(dict.get)
    keys = _filled(dict.keys)
    items = _filled(dict.items)
    values = _filled(dict.values)
    copy = _filled(dict.copy)
    __setitem__ = _filled(dict.__setitem__)
    __delitem__ = _filled(dict.__delitem__)
    pop = _filled(dict.pop)
    popitem = _filled(dict.popitem)
    setdefault = _filled(dict.setdefault)
    update = _filled(dict.update)
    __hash__ = object.__hash__  # type: ignore[assignment]

    def __reduce__(self) -> Any:
        return (dict, (dict(self.items()),))

    def __repr__(self) -> str:
        return f"<Request {self.method} {self.content_type!r} {len(self.body)} bytes id={self.request_id}>"

    def header(self, name: bytes) -> str | None:
        """The last value of one header (``name`` lower-case bytes), without building the views."""
        found = None
        for key, value in self.raw_headers:
            if key == name:
                found = value
        return None if found is None else found.decode("latin-1")

    # -- derived views, computed on first use ------------------------------------------------
    @cached_property
    def _visible_headers(self) -> list[tuple[str, str]]:
        return [(name.decode("latin-1").lower(), value.decode("latin-1")) for name, value in self.raw_headers]

    @cached_property
    def headers(self) -> list[dict[str, Any]]:
        """ABEJA's list form: ``[{'key': name, 'values': [...]}, ...]``, names lower-cased and sorted."""
        grouped: dict[str, list[str]] = {}
        for name, value in self._visible_headers:
            grouped.setdefault(name, []).append(value)
        return [{"key": name, "values": grouped[name]} for name in sorted(grouped)]

    @cached_property
    def http_headers(self) -> HttpHeaders:
        """The headers as a case-insensitive mapping (Cortex's ``headers``)."""
        return HttpHeaders(self._visible_headers)

    @cached_property
    def query_params(self) -> dict[str, str]:
        """The query string as a dict (the last value of a repeated name)."""
        return dict(parse_qsl(self.query_string.decode("latin-1"), keep_blank_values=True))

    @property
    def is_multipart(self) -> bool:
        """Whether the body is multipart/form-data."""
        return self.content_type is not None and self.content_type.lower().startswith("multipart/form-data")

    @cached_property
    def contents(self) -> list[Content]:
        """The parts of a multipart/form-data body (ABEJA's ``contents``); empty for other bodies."""
        if not self.is_multipart:
            return []
        return parse_multipart(self.content_type or "", self.body)

    @property
    def debug(self) -> bool:
        """``?debug=true``: log each stage of this request (Cortex)."""
        # Read up to four times per request by the stages: without a query string, nothing to look up.
        return bool(self.query_string) and self.query_params.get("debug", "").lower() == "true"
