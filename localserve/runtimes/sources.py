"""Model locations: a local file or folder, a ``.zip``, ``s3://bucket/key`` or ``http(s)://`` URL.

Example::

    path = resolve_model("s3://my-bucket/iris.onnx", Path("iris-classifier"))
    # ~/.cache/localserve/models/s3-1f0c.../iris.onnx, downloaded once per ETag

Remote models are cached under ``<cache>/models/``, keyed by location and ETag (or
Last-Modified), so a restart reuses what it has. Nothing half-written is ever left where it
would be used: files are downloaded to a temporary name in the same folder, fsynced and
renamed; folders are built in a temporary folder and renamed.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from localserve.errors import ModelLoadError
from localserve.project import default_cache_dir

__all__ = ["extract_zip", "resolve_model"]

logger = logging.getLogger("localserve")

CHUNK = 1024 * 1024
NO_CREDENTIALS_HINT = (
    "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), or run where an instance or pod role applies"
)


def resolve_model(
    location: str,
    project: Path,
    *,
    cache_root: Path | None = None,
    progress: bool | None = None,
    s3_endpoint: str | None = None,
) -> Path:
    """A local path to the model at ``location``, fetching and extracting it into the cache when needed.

    ``progress``: True draws a progress bar on stderr, False logs one line per download, None
    draws the bar only when stderr is a terminal. ``cache_root``: ``--cache-dir`` (None: the default
    folder). ``s3_endpoint``: the S3 endpoint URL (None: botocore's own choice, ``AWS_ENDPOINT_URL_S3``
    included).
    """
    models = (cache_root if cache_root is not None else default_cache_dir()) / "models"
    show_bar = sys.stderr.isatty() if progress is None else progress
    if location.startswith("s3://"):
        path = _fetch_s3(location, models, show_bar, s3_endpoint)
    elif location.startswith(("http://", "https://")):
        path = _fetch_http(location, models, show_bar)
    else:
        path = Path(location).expanduser()
        if not path.is_absolute():
            path = project / path
        if not path.exists():
            raise ModelLoadError(
                f"Model {location!r} not found: {path} does not exist "
                f"(relative paths start at the project directory {project})."
            )
    if path.is_file() and path.suffix.lower() == ".zip":
        return extract_zip(path, models)
    return path


def extract_zip(archive: Path, models: Path) -> Path:
    """Extract ``archive`` once into ``<models>/zip-<sha256>/``; a single top SavedModel folder is returned itself."""
    digest = hashlib.sha256()
    with archive.open("rb") as stream:
        for chunk in iter(lambda: stream.read(CHUNK), b""):
            digest.update(chunk)
    target = models / f"zip-{digest.hexdigest()}"
    if not target.is_dir():
        models.mkdir(parents=True, exist_ok=True)
        with _staging_dir(models, target) as staging:
            try:
                with zipfile.ZipFile(archive) as zf:
                    zf.extractall(staging)  # zipfile drops absolute paths and '..' parts of member names
            except zipfile.BadZipFile as exc:
                raise ModelLoadError(f"Model archive {archive} is not a valid zip file ({exc}).") from None
    return _model_root(target)


def _model_root(folder: Path) -> Path:
    """The folder itself, or its single sub-folder when that one is a SavedModel (zips often wrap one)."""
    if (folder / "saved_model.pb").is_file():
        return folder
    entries = [p for p in folder.iterdir() if p.name != "__MACOSX"]
    if len(entries) == 1 and entries[0].is_dir() and (entries[0] / "saved_model.pb").is_file():
        return entries[0]
    return folder


# ---------------------------------------------------------------------------------------------
# S3


def _fetch_s3(location: str, models: Path, show_bar: bool, endpoint: str | None) -> Path:
    bucket, _, key = location[len("s3://") :].partition("/")
    if not bucket:
        raise ModelLoadError(f"Invalid model location {location!r}: expected s3://<bucket>/<key>.")
    import boto3  # the s3 extra; only S3 models need it
    from botocore.exceptions import (
        BotoCoreError,
        ClientError,
        IncompleteReadError,
        NoCredentialsError,
        ResponseStreamingError,
    )

    try:
        # A fresh session per call: a session caches the credentials it first found.
        client = boto3.session.Session().client("s3", endpoint_url=endpoint)
        if key and not key.endswith("/"):
            try:
                head = client.head_object(Bucket=bucket, Key=key)
            except ClientError as exc:
                if _s3_code(exc) not in ("404", "NoSuchKey", "NotFound"):
                    raise
            else:
                return _fetch_s3_object(client, location, bucket, key, head, models, show_bar)
        prefix = key.rstrip("/") + "/" if key else ""
        objects = [
            obj
            for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
            for obj in page.get("Contents", [])
            if not obj["Key"].endswith("/")
        ]
        if not objects:
            raise ModelLoadError(
                f"Cannot download the model {location}: there is no object or prefix {key!r} in bucket {bucket!r}."
            )
        return _fetch_s3_prefix(client, location, bucket, prefix, objects, models, show_bar)
    except NoCredentialsError:
        raise ModelLoadError(
            f"Cannot download the model {location}: no AWS credentials found; {NO_CREDENTIALS_HINT}."
        ) from None
    except ClientError as exc:
        code = _s3_code(exc)
        if code == "NoSuchBucket":
            raise ModelLoadError(
                f"Cannot download the model {location}: the bucket {bucket!r} does not exist."
            ) from None
        if code in ("403", "AccessDenied", "AllAccessDisabled", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
            raise ModelLoadError(
                f"Cannot download the model {location}: access denied ({code}); "
                f"check that the credentials may read bucket {bucket!r}."
            ) from None
        raise ModelLoadError(f"Cannot download the model {location}: {exc}") from None
    except (IncompleteReadError, ResponseStreamingError) as exc:
        raise ModelLoadError(f"Download of {location} was interrupted: {exc}") from None
    except BotoCoreError as exc:  # endpoint unreachable, read timeouts
        raise ModelLoadError(f"Cannot download the model {location}: {exc}") from None


def _s3_code(exc: Any) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _fetch_s3_object(
    client: Any, location: str, bucket: str, key: str, head: dict[str, Any], models: Path, show_bar: bool
) -> Path:
    etag = str(head.get("ETag", "")).strip('"')
    name = _safe_name(key.rsplit("/", 1)[-1])
    folder = models / f"s3-{_digest(location, etag)}"
    target = folder / name
    if target.is_file():
        logger.debug("Using cached %s for %s (ETag %s)", target, location, etag)
        return target
    folder.mkdir(parents=True, exist_ok=True)
    body = client.get_object(Bucket=bucket, Key=key, IfMatch=head["ETag"])["Body"]
    try:
        _download(body.read, target, int(head["ContentLength"]), location, show_bar)
    finally:
        body.close()
    return target


def _fetch_s3_prefix(
    client: Any,
    location: str,
    bucket: str,
    prefix: str,
    objects: list[dict[str, Any]],
    models: Path,
    show_bar: bool,
) -> Path:
    validators = "\n".join(f"{obj['Key']} {obj.get('ETag', '')}" for obj in sorted(objects, key=lambda o: o["Key"]))
    target = models / f"s3-{_digest(location, validators)}"
    if target.is_dir():
        logger.debug("Using cached %s for %s", target, location)
        return _model_root(target)
    models.mkdir(parents=True, exist_ok=True)
    with _staging_dir(models, target) as staging:
        for obj in objects:
            relative = obj["Key"][len(prefix) :]
            dest = (staging / relative).resolve()
            if not dest.is_relative_to(staging.resolve()):
                raise ModelLoadError(f"Cannot download the model {location}: unsafe object key {obj['Key']!r}.")
            dest.parent.mkdir(parents=True, exist_ok=True)
            body = client.get_object(Bucket=bucket, Key=obj["Key"])["Body"]
            try:
                _download(body.read, dest, int(obj["Size"]), f"s3://{bucket}/{obj['Key']}", show_bar)
            finally:
                body.close()
    return _model_root(target)


# ---------------------------------------------------------------------------------------------
# HTTP(S)


def _fetch_http(url: str, models: Path, show_bar: bool) -> Path:
    shown = redact(url)  # logs and errors never carry a signed query or a password
    name = _safe_name(urllib.parse.unquote(urllib.parse.urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1]) or "model")
    url, headers = _credentials(url)
    validator = ""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers, method="HEAD"), timeout=30) as head:
            validator = head.headers.get("ETag") or head.headers.get("Last-Modified") or ""
    except urllib.error.HTTPError as exc:
        if exc.code not in (405, 501):  # a server without HEAD still gets a GET
            raise _http_error(shown, exc) from None
    except (urllib.error.URLError, OSError) as exc:
        raise ModelLoadError(f"Cannot download the model {shown}: {getattr(exc, 'reason', exc)}.") from None
    folder = models / f"http-{_digest(redact(url), validator)}"  # a re-signed URL (new query) reuses the cache
    target = folder / name
    if validator and target.is_file():
        logger.debug("Using cached %s for %s (%s)", target, shown, validator)
        return target
    folder.mkdir(parents=True, exist_ok=True)
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=60) as response:
            length = response.headers.get("Content-Length")
            _download(response.read, target, int(length) if length else None, shown, show_bar)
    except urllib.error.HTTPError as exc:
        raise _http_error(shown, exc) from None
    except urllib.error.URLError as exc:
        raise ModelLoadError(f"Cannot download the model {shown}: {exc.reason}.") from None
    return target


def _credentials(url: str) -> tuple[str, dict[str, str]]:
    """``https://user:pass@host/m.onnx`` -> the URL without them and a Basic Authorization header.

    urllib cannot open a URL with a user part (it takes ``pass@host`` for a port); the query
    string (a signed URL's signature) is kept as it is.
    """
    parts = urllib.parse.urlsplit(url)
    if parts.username is None:
        return url, {}
    import base64

    user = urllib.parse.unquote(parts.username)
    password = urllib.parse.unquote(parts.password or "")
    token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    netloc = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc)), {"Authorization": f"Basic {token}"}


def _http_error(url: str, exc: urllib.error.HTTPError) -> ModelLoadError:
    exc.close()
    if exc.code == 404:
        return ModelLoadError(f"Cannot download the model {url}: not found (HTTP 404).")
    if exc.code in (401, 403):
        return ModelLoadError(f"Cannot download the model {url}: access denied (HTTP {exc.code}).")
    return ModelLoadError(f"Cannot download the model {url}: HTTP {exc.code} {exc.reason}.")


def redact(location: str) -> str:
    """A model location fit for logs and errors: no query string (signed URLs) and no password."""
    parts = urllib.parse.urlsplit(location)
    if not parts.scheme or parts.scheme == "file":
        return location
    netloc = parts.hostname or ""
    if parts.port:
        netloc += f":{parts.port}"
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


# ---------------------------------------------------------------------------------------------
# shared: atomic files and folders, progress


def _download(read: Callable[[int], bytes], target: Path, total: int | None, label: str, show_bar: bool) -> None:
    """Stream ``read`` into ``target`` atomically; a short or broken stream raises and leaves nothing behind."""
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    tmp = Path(tmp_name)
    started = time.monotonic()
    done = 0
    bar = _Bar(label, total) if show_bar else None
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                for chunk in _chunks(read, label):
                    out.write(chunk)
                    done += len(chunk)
                    if bar is not None:
                        bar.update(done)
            except _Truncated:
                if total is None:
                    raise ModelLoadError(f"Download of {label} was interrupted after {done} bytes.") from None
            out.flush()
            os.fsync(out.fileno())
        if total is not None and done != total:
            raise ModelLoadError(f"Download of {label} was interrupted: got {done} of {total} bytes.")
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        if bar is not None:
            bar.close()
    seconds = time.monotonic() - started
    logger.info("Downloaded %s (%s) in %.1fs to %s", label, _size(done), seconds, target)


def _chunks(read: Callable[[int], bytes], label: str) -> Iterator[bytes]:
    """Chunks of ``read`` until the end; _Truncated when the stream is cut short."""
    import http.client

    while True:
        try:
            chunk = read(CHUNK)
        except http.client.IncompleteRead:
            raise _Truncated from None
        except (OSError, http.client.HTTPException) as exc:
            raise ModelLoadError(f"Download of {label} was interrupted: {exc}.") from None
        if not chunk:
            return
        yield chunk


class _Truncated(Exception):
    pass


@contextmanager
def _staging_dir(parent: Path, target: Path) -> Iterator[Path]:
    """A temporary folder beside ``target``, renamed to it on success and removed on failure."""
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".part", dir=parent))
    try:
        yield staging
        try:
            os.rename(staging, target)
        except OSError:
            if not target.is_dir():  # not another replica that finished first
                raise
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


class _Bar:
    """A one-line progress bar on stderr."""

    def __init__(self, label: str, total: int | None, stream: IO[str] | None = None) -> None:
        self.label, self.total, self.stream = label, total, stream or sys.stderr
        self.last = 0.0

    def update(self, done: int) -> None:
        now = time.monotonic()
        if now - self.last < 0.1 and done != self.total:
            return
        self.last = now
        if self.total:
            filled = int(30 * done / self.total)
            self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (30 - filled)}] {_size(done)}/{_size(self.total)}")
        else:
            self.stream.write(f"\r{self.label} {_size(done)}")
        self.stream.flush()

    def close(self) -> None:
        self.stream.write("\n")
        self.stream.flush()


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


def _safe_name(name: str) -> str:
    return name if name not in ("", ".", "..") and "/" not in name and "\\" not in name else "model"


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"
