"""Request: what a handler receives; an ABEJA-compatible read-only mapping that is also file-like.

Example::

    def handler(request, context):
        request["http_method"]                       # 'POST'
        request["content_type"]                      # 'application/json'
        request["http_headers"]["Accept-Encoding"]   # 'gzip' (last value) or None
        data = json.load(request)                    # request.read() works too
        for part in request.get("contents", []):     # multipart/form-data only
            part["form_name"], part["file_name"], part.read()
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Mapping
from functools import cached_property
from typing import Any
from urllib.parse import parse_qsl

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

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        values = self._values.get(name.lower())
        return values[-1] if values else default

    def get_all(self, name: str) -> list[str]:
        return list(self._values.get(name.lower(), ()))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._values

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"HttpHeaders({ {k: v[-1] for k, v in self._values.items()}!r})"


class Content(Mapping[str, Any]):
    """One part of a multipart/form-data body: ``content_type``, ``form_name``, ``file_name`` and ``read()``."""

    def __init__(self, content_type: str | None, form_name: str | None, file_name: str | None, body: bytes) -> None:
        self._items = {"content_type": content_type, "form_name": form_name, "file_name": file_name}
        self._stream = io.BytesIO(body)
        self.body = body

    def read(self, size: int = -1) -> bytes:
        return self._stream.read(size)

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._stream.seek(offset, whence)

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"Content({self._items!r}, {len(self.body)} bytes)"


class Request(Mapping[str, Any]):
    """One HTTP request as user code sees it (ABEJA keys, plus what Cortex predictors may ask for)."""

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
        self.method = method
        self.path = path
        self.raw_headers = raw_headers
        self.query_string = query_string
        self.request_id = request_id
        content_type = None
        for name, value in raw_headers:
            if name == b"content-type":
                content_type = value.decode("latin-1")
        if method == "GET":
            # ABEJA: a GET carries its query string as the body.
            body = query_string
            content_type = FORM_CONTENT_TYPE
        self.body = body
        self.content_type = content_type
        self._stream = io.BytesIO(body)

    # -- file-like ---------------------------------------------------------------------------
    def read(self, size: int | None = -1) -> bytes:
        return self._stream.read(-1 if size is None else size)

    def readline(self, size: int = -1) -> bytes:
        return self._stream.readline(size)

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._stream.seek(offset, whence)

    def tell(self) -> int:
        return self._stream.tell()

    # -- mapping -----------------------------------------------------------------------------
    @cached_property
    def _items(self) -> dict[str, Any]:
        items: dict[str, Any] = {
            "http_method": self.method,
            "content_type": self.content_type,
            "headers": self.headers,
            "http_headers": self.http_headers,
        }
        if self.is_multipart:
            items["contents"] = self.contents
        return items

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

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
        return [
            (name.decode("latin-1").lower(), value.decode("latin-1"))
            for name, value in self.raw_headers
            if name.lower() not in HIDDEN_HEADERS
        ]

    @cached_property
    def headers(self) -> list[dict[str, Any]]:
        """ABEJA's list form: ``[{'key': name, 'values': [...]}, ...]``, names lower-cased and sorted."""
        grouped: dict[str, list[str]] = {}
        for name, value in self._visible_headers:
            grouped.setdefault(name, []).append(value)
        return [{"key": name, "values": grouped[name]} for name in sorted(grouped)]

    @cached_property
    def http_headers(self) -> HttpHeaders:
        return HttpHeaders(self._visible_headers)

    @cached_property
    def query_params(self) -> dict[str, str]:
        return dict(parse_qsl(self.query_string.decode("latin-1"), keep_blank_values=True))

    @property
    def is_multipart(self) -> bool:
        return self.content_type is not None and self.content_type.lower().startswith("multipart/form-data")

    @cached_property
    def contents(self) -> list[Content]:
        if not self.is_multipart:
            return []
        from localserve.payload import parse_multipart

        return parse_multipart(self.content_type or "", self.body)

    @cached_property
    def debug(self) -> bool:
        """``?debug=true``: log each stage of this request (Cortex)."""
        return bool(self.query_string) and self.query_params.get("debug", "").lower() == "true"
