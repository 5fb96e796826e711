"""A model file server on loopback for the download tests: it drops a connection mid-body, ignores Range,
answers 503 while busy, or replaces the object (a new ETag), as ``Site`` says; and serves it as S3's endpoint."""

from __future__ import annotations

import http.server
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MiB = 1024 * 1024
PIECE = 64 * 1024  # the server writes the body in pieces of this size


@dataclass
class Site:
    """What the test server serves and what it saw."""

    body: bytes
    drop_at: int | None = None  # the first GET sends this many bytes of the body, then closes the connection
    ranges: bool = True  # whether Range is honoured
    headers: dict[str, str] = field(default_factory=dict)  # extra response headers
    seen: list[dict[str, str | None]] = field(default_factory=list)  # each GET's Range and If-Range
    busy: int = 0  # the first GETs answered 503, this many
    replaced: bool = False  # the object is replaced (a new ETag) once the first GET has dropped

    etag: str = '"v1"'


def _refusal(site: Site, if_match: str | None) -> int | None:
    """503 while busy; 412 to an If-Match of another ETag (S3's answer once the object was replaced); else None."""
    if len(site.seen) <= site.busy:
        return 503
    if site.replaced and len(site.seen) > site.busy + 1:
        site.etag = '"v2"'
    return 412 if if_match not in (None, site.etag) else None


def _handler(site: Site) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _head(self, status: int, length: int, extra: dict[str, str]) -> None:
            self.send_response(status)
            self.send_header("Content-Length", str(length))
            self.send_header("ETag", site.etag)
            self.send_header("Accept-Ranges", "bytes" if site.ranges else "none")
            for key, value in {**site.headers, **extra}.items():
                self.send_header(key, value)
            self.end_headers()

        def do_HEAD(self) -> None:
            self._head(200, len(site.body), {})

        def do_GET(self) -> None:
            asked = self.headers.get("Range")
            site.seen.append({"range": asked, "if-range": self.headers.get("If-Range")})
            refused = _refusal(site, self.headers.get("If-Match"))
            if refused is not None:
                self.send_response(refused)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            start = 0
            if asked and site.ranges and self.headers.get("If-Range") in (None, site.etag):
                start = int(re.fullmatch(r"bytes=(\d+)-", asked).group(1))  # type: ignore[union-attr]
                end = len(site.body) - 1
                self._head(206, len(site.body) - start, {"Content-Range": f"bytes {start}-{end}/{len(site.body)}"})
            else:
                self._head(200, len(site.body), {})
            body = site.body[start:]
            drop = site.drop_at if len(site.seen) == site.busy + 1 else None
            for offset in range(0, len(body), PIECE):
                if drop is not None and offset >= drop:
                    self.close_connection = True
                    self.connection.shutdown(2)  # the connection drops in the middle of the body
                    return
                self.wfile.write(body[offset : offset + PIECE])

    return Handler


def files(cache: Path) -> list[Path]:
    return [p for p in cache.rglob("*") if p.is_file()]


@contextmanager
def serving() -> Iterator[Callable[[Site], str]]:
    """``start(site)`` -> the URL of a new server of ``site``; every server is shut down at the end."""
    servers = []

    def start(site: Site) -> str:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(site))
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        servers.append((server, thread))
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server, thread in servers:
        server.shutdown()
        server.server_close()
        thread.join()
