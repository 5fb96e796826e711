"""Model locations: a local file or folder, a ``.zip``, ``s3://bucket/key`` or ``http(s)://`` URL.

Example::

    path = resolve_model("s3://my-bucket/iris.onnx", Path("iris-classifier"))
    # ~/.cache/localserve/models/s3-1f0c.../iris.onnx, downloaded once per ETag

Remote models are cached under ``<cache>/models/``, keyed by location and ETag (or Last-Modified), so a restart reuses
them. Nothing half-written is left where it would be used: files are downloaded under a temporary name, fsynced and
renamed, folders built aside and renamed (``cache``). S3 is in ``s3``, HTTP(S) in ``web``, progress in ``progress``.
"""

from __future__ import annotations

import hashlib
import logging
import sys
from pathlib import Path

from localserve.errors import ModelLoadError
from localserve.runtimes.cache import CHUNK, model_root, scratch_dir, staging_dir
from localserve.runtimes.s3 import fetch_s3
from localserve.runtimes.web import fetch_http
from localserve.runtimes.web import redact as redact_url

__all__ = ["cache_entry", "extract_zip", "redact", "resolve_model"]

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

    ``progress``: True draws a bar on stderr, False logs the progress, None draws the bar only on a terminal.
    ``cache_root``: the cache folder (None: a temporary one). ``s3_endpoint``: the S3 endpoint URL (None: botocore's own
    choice, ``AWS_ENDPOINT_URL_S3`` included).
    """
    models = (cache_root if cache_root is not None else scratch_dir()) / "models"
    show_bar = sys.stderr.isatty() if progress is None else progress
    if location.startswith("s3://"):  # the downloaders (http.client, IDNA) are imported for a remote model only
        path = fetch_s3(location, models, show_bar, s3_endpoint)
    elif location.startswith(("http://", "https://")):
        path = fetch_http(location, models, show_bar)
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
        # A downloaded archive is extracted beside it, so a remote model's copy is one entry of the cache.
        return extract_zip(path, path.parent if "://" in location else models)
    return path


def redact(location: str) -> str:
    """A model location fit for logs and errors (``web.redact``: no query string, password or fragment)."""
    if "://" not in location:  # a path: nothing to hide, and no URL parsing to import
        return location
    return redact_url(location)


def cache_entry(path: Path, cache_root: Path | None = None) -> Path:
    """The entry of the download cache that holds ``path`` (all of a remote model's copy); ``path`` outside it."""
    models = (cache_root if cache_root is not None else scratch_dir()) / "models"
    try:
        return models / path.relative_to(models).parts[0]
    except (ValueError, IndexError):
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
            import zipfile  # lazy: zipped models only; a few milliseconds of every start otherwise

            try:
                with zipfile.ZipFile(archive) as zf:
                    zf.extractall(staging)  # zipfile drops absolute paths and '..' parts of member names
            except zipfile.BadZipFile as exc:
                raise ModelLoadError(f"Model archive {archive} is not a valid zip file ({exc}).") from None
    return model_root(target)
