"""Model locations: a local file or folder, a ``.zip``, ``s3://bucket/key`` or ``http(s)://`` URL.

Example::

    path = resolve_model("s3://my-bucket/iris.onnx", Path("iris-classifier"))
    # ~/.cache/localserve/models/s3-1f0c.../iris.onnx, downloaded once per ETag

Remote models are cached under ``<cache>/models/``, keyed by location and ETag (or
Last-Modified), so a restart reuses what it has. Nothing half-written is ever left where it
would be used: files are downloaded to a temporary name in the same folder, fsynced and
renamed; folders are built in a temporary folder and renamed (``cache``). S3 is in ``s3``.
"""

from __future__ import annotations

import hashlib
import logging
import sys
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path

from localserve.errors import ModelLoadError
from localserve.project import default_cache_dir
from localserve.runtimes.cache import CHUNK, cache_key, download, model_root, safe_name, staging_dir
from localserve.runtimes.s3 import fetch_s3

__all__ = ["extract_zip", "resolve_model"]

logger = logging.getLogger("localserve")


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
        path = fetch_s3(location, models, show_bar, s3_endpoint)
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
        with staging_dir(models, target) as staging:
            try:
                with zipfile.ZipFile(archive) as zf:
                    zf.extractall(staging)  # zipfile drops absolute paths and '..' parts of member names
            except zipfile.BadZipFile as exc:
                raise ModelLoadError(f"Model archive {archive} is not a valid zip file ({exc}).") from None
    return model_root(target)


# ---------------------------------------------------------------------------------------------
# HTTP(S)


def _fetch_http(url: str, models: Path, show_bar: bool) -> Path:
    shown = redact(url)  # logs and errors never carry a signed query or a password
    name = safe_name(urllib.parse.unquote(urllib.parse.urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1]) or "model")
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
    folder = models / f"http-{cache_key(redact(url), validator)}"  # a re-signed URL (new query) reuses the cache
    target = folder / name
    if validator and target.is_file():
        logger.debug("Using cached %s for %s (%s)", target, shown, validator)
        return target
    folder.mkdir(parents=True, exist_ok=True)
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=60) as response:
            length = response.headers.get("Content-Length")
            download(response.read, target, int(length) if length else None, shown, show_bar)
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
