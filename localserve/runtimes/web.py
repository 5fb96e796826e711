"""Models at ``http(s)://`` URLs, fetched with httpx: resumed where a dropped connection left off, and checked.

Example::

    path = fetch_http("https://host/models/iris.onnx#sha256=9f86d0...", models, show_bar=False)

- **Cache**: keyed by the URL without its query (a re-signed URL reuses it), and the ETag or Last-Modified or the
  checksum the URL gives.
- **Resume**: a dropped connection (or a 502/503/504) is retried ``ATTEMPTS`` times without progress, after
  ``RETRY_DELAYS``, asking for the rest only (``Range`` with ``If-Range``, so a changed file comes whole); a 200 sends
  the file again from the start. The last failure is an error naming the URL.
- **Checksums** (docs/reference/models.md): pip's URL fragment ``#sha256=<hex>`` (any of ``HASHES``), and the server's
  ``Content-MD5``, ``x-goog-hash``'s ``md5`` and ``Repr-Digest``'s ``sha-256``/``sha-512`` (RFC 9530). An ETag is never
  taken for an MD5: it is opaque, and many servers' look alike.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import re
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from localserve.errors import ModelLoadError
from localserve.runtimes.cache import RESTART, cache_key, download, safe_name
from localserve.runtimes.progress import human_size

__all__ = ["ATTEMPTS", "HASHES", "RETRY_DELAYS", "Tries", "fetch_http", "redact"]

logger = logging.getLogger("localserve")
ATTEMPTS = 4  # tries in a row that bring no new byte before the download fails
RETRY_DELAYS = (0.5, 1.0, 2.0)  # seconds before the 2nd, 3rd and 4th of them
HASHES = ("sha256", "sha384", "sha512", "sha224", "sha1", "md5")  # pip's fragment names
RETRY_STATUSES = (502, 503, 504)
Checksum = tuple[str, str, str]  # algorithm, hex digest, where it was given


def fetch_http(url: str, models: Path, show_bar: bool) -> Path:
    """The file at ``url`` in the cache (downloaded into it when needed); ModelLoadError naming the URL."""
    import httpx

    shown = redact(url)  # logs and errors never carry a signed query or a password
    address, fragment = urllib.parse.urldefrag(url)
    wanted = url_checksums(fragment, shown)
    name = safe_name(urllib.parse.unquote(urllib.parse.urlsplit(address).path.rstrip("/").rsplit("/", 1)[-1]))
    address, headers = _credentials(address)
    headers["Accept-Encoding"] = "identity"  # byte ranges and lengths of the file itself
    timeout = httpx.Timeout(60.0, connect=30.0)
    with httpx.Client(timeout=timeout, follow_redirects=True, headers=headers) as client:
        head = _head(client, address, shown)
        validator = (head.get("etag") or head.get("last-modified") or "") if head is not None else ""
        keys = [redact(url), validator] + ([fragment] if wanted else [])
        target = models / f"http-{cache_key(*keys)}" / name
        if (validator or wanted) and target.is_file():
            logger.debug("Using cached %s for %s (%s)", target, shown, validator or fragment)
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        transfer = _Transfer(client, address, shown, validator)
        first = transfer.open(0)
        checksums = wanted + server_checksums(first.headers) + (server_checksums(head) if head is not None else [])
        length = first.headers.get("content-length")
        total = int(length) if length and length.isdigit() else None
        download(transfer.chunks(first, total, checksums), target, total, shown, show_bar)
    return target


class Tries:
    """A download's failed tries: a wait before the next one, or its error after ``ATTEMPTS`` in a row without progress."""

    def __init__(self, shown: str) -> None:
        self.shown = shown  # the location as logs and errors show it
        self.failures = 0  # in a row, without a new byte
        self.best = 0  # the most bytes a try has brought

    def fail(self, done: int, total: int | None, why: str) -> None:
        """Count a failed try; wait before the next one, or raise after the last."""
        if done > self.best:
            self.best, self.failures = done, 0
        self.failures += 1
        of = f" of {human_size(total)}" if total is not None else ""
        if self.failures >= ATTEMPTS:
            raise ModelLoadError(
                f"Cannot download the model {self.shown}: {why} after {human_size(done)}{of}; "
                f"gave up after {ATTEMPTS} tries in a row without progress."
            )
        delay = RETRY_DELAYS[min(self.failures, len(RETRY_DELAYS)) - 1]
        logger.warning(
            "Download of %s: %s after %s%s; trying again in %.1f s (try %d of %d)",
            self.shown,
            why,
            human_size(done),
            of,
            delay,
            self.failures + 1,
            ATTEMPTS,
        )
        time.sleep(delay)


class _Transfer(Tries):
    """One file's GET requests: the first, and those that resume it after a drop."""

    def __init__(self, client: Any, url: str, shown: str, validator: str) -> None:
        super().__init__(shown)
        self.client, self.url, self.validator = client, url, validator

    def open(self, offset: int, total: int | None = None) -> Any:
        """A streamed response of the file from byte ``offset`` (200: from the start; 206: from ``offset``)."""
        import httpx

        headers = {"Range": f"bytes={offset}-"} if offset else {}
        if offset and self.validator and not self.validator.startswith("W/"):
            headers["If-Range"] = self.validator
        while True:
            try:
                response = self.client.send(self.client.build_request("GET", self.url, headers=headers), stream=True)
            except (httpx.ConnectError, httpx.UnsupportedProtocol) as exc:
                raise ModelLoadError(f"Cannot download the model {self.shown}: {exc}.") from None
            except httpx.TransportError as exc:
                self.fail(offset, total, f"the connection failed ({exc or type(exc).__name__})")
                continue
            if response.status_code == 200 or (
                response.status_code == 206 and response.headers.get("content-range", "").startswith(f"bytes {offset}-")
            ):
                return response
            response.close()
            if response.status_code in RETRY_STATUSES:
                self.fail(offset, total, f"HTTP {response.status_code}")
                continue
            if response.status_code in (206, 416) and offset:  # not the range asked for: all of it again
                offset, headers = 0, {}
                continue
            raise _http_error(self.shown, response.status_code, response.reason_phrase)

    def chunks(self, response: Any, total: int | None, checksums: list[Checksum]) -> Iterator[bytes]:
        """The file's bytes, across as many responses as drops; the checksums verified at the end."""
        import httpx

        digests = [(hashlib.new(algorithm), algorithm, hexdigest, source) for algorithm, hexdigest, source in checksums]
        done = 0
        while True:
            try:
                for chunk in response.iter_raw():  # as it arrives: a drop loses nothing received
                    done += len(chunk)
                    for digest, *_ in digests:
                        digest.update(chunk)
                    yield chunk
                break
            except httpx.TransportError as exc:
                self.fail(done, total, f"the connection dropped ({exc or type(exc).__name__})")
            finally:
                response.close()
            response = self.open(done, total)
            if response.status_code == 200 and done:
                logger.info("Download of %s: the server sent the whole file again; starting over", self.shown)
                done = 0
                digests = [(hashlib.new(a), a, h, s) for _, a, h, s in digests]
                yield RESTART
        for digest, algorithm, hexdigest, source in digests:
            if digest.hexdigest() != hexdigest:
                raise ModelLoadError(
                    f"Cannot download the model {self.shown}: its {algorithm} is {digest.hexdigest()}, but {source} "
                    f"says {hexdigest}; the file was not kept."
                )


def url_checksums(fragment: str, shown: str) -> list[Checksum]:
    """The checksums of a URL's fragment, as pip reads them: ``sha256=<hex>`` (``HASHES``); others ignored."""
    found = []
    for key, _, value in (part.partition("=") for part in fragment.split("&") if part):
        if key in HASHES:
            if not re.fullmatch(r"[0-9a-fA-F]+", value) or len(value) != hashlib.new(key).digest_size * 2:
                raise ModelLoadError(
                    f"Cannot download the model {shown}: #{key}={value} is not a {key} digest "
                    f"(expected {hashlib.new(key).digest_size * 2} hex digits)."
                )
            found.append((key, value.lower(), f"the URL's #{key}"))
    return found


def server_checksums(headers: Any) -> list[Checksum]:
    """The whole file's checksums a response states: Content-MD5 (of a 200 only), x-goog-hash md5, Repr-Digest."""
    found: list[Checksum] = []
    md5 = headers.get("content-md5")
    if md5 and headers.get("content-range") is None:
        found += _b64("md5", md5, "the server's Content-MD5")
    for part in (headers.get("x-goog-hash") or "").split(","):
        key, _, value = part.strip().partition("=")
        if key == "md5":
            found += _b64("md5", value, "the server's x-goog-hash")
    for part in (headers.get("repr-digest") or "").split(","):
        key, _, value = part.strip().partition("=")
        algorithm = {"sha-256": "sha256", "sha-512": "sha512"}.get(key.lower())
        if algorithm is not None:
            found += _b64(algorithm, value.strip(":"), "the server's Repr-Digest")
    return found


def _b64(algorithm: str, value: str, source: str) -> list[Checksum]:
    try:
        raw = base64.b64decode(value.strip(), validate=True)
    except ValueError:
        return []  # not a digest we can read: nothing to check against
    return [(algorithm, raw.hex(), source)] if len(raw) == hashlib.new(algorithm).digest_size else []


def _head(client: Any, url: str, shown: str) -> Any:
    """The headers of a HEAD (None from a server without HEAD, which still gets its GET)."""
    import httpx

    try:
        response = client.head(url)
    except httpx.TransportError as exc:
        raise ModelLoadError(f"Cannot download the model {shown}: {exc}.") from None
    if response.status_code in (405, 501) or response.status_code in RETRY_STATUSES:
        return None
    if response.status_code >= 400:
        raise _http_error(shown, response.status_code, response.reason_phrase)
    return response.headers


def _credentials(url: str) -> tuple[str, dict[str, str]]:
    """``https://user:pass@host/m.onnx`` -> the URL without them and a Basic Authorization header."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None:
        return url, {}
    user = urllib.parse.unquote(parts.username)
    password = urllib.parse.unquote(parts.password or "")
    token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    netloc = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc)), {"Authorization": f"Basic {token}"}


def _http_error(url: str, status: int, reason: str) -> ModelLoadError:
    if status == 404:
        return ModelLoadError(f"Cannot download the model {url}: not found (HTTP 404).")
    if status in (401, 403):
        return ModelLoadError(f"Cannot download the model {url}: access denied (HTTP {status}).")
    return ModelLoadError(f"Cannot download the model {url}: HTTP {status} {reason}.")


def redact(location: str) -> str:
    """A model location fit for logs and errors: no query string (signed URLs), password or fragment."""
    parts = urllib.parse.urlsplit(location)
    if not parts.scheme or parts.scheme == "file":
        return location
    netloc = parts.hostname or ""
    if parts.port:
        netloc += f":{parts.port}"
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))
