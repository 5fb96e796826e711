"""Models on S3 (``s3://bucket/key``, an object or a prefix), downloaded into the cache once per ETag;
boto3 (the s3 extra) is imported only when an S3 model is loaded. A connection that drops in the middle
of an object is resumed where it left off (``Range``, the same ETag by ``IfMatch``), as ``web`` resumes a URL.
Every failure is a ModelLoadError that says what to fix (credentials, the bucket, access)."""

from __future__ import annotations

import http.client
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from localserve.errors import ModelLoadError
from localserve.runtimes.cache import CHUNK, RESTART, cache_key, download, model_root, safe_name, staging_dir
from localserve.runtimes.web import Tries

logger = logging.getLogger("localserve")

NO_CREDENTIALS_HINT = (
    "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), or run where an instance or pod role applies"
)


def fetch_s3(location: str, models: Path, show_bar: bool, endpoint: str | None) -> Path:
    """A local path to the S3 object or prefix at ``location``, downloaded into ``models`` once."""
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
        return _fetch_s3_key(client, location, bucket, key, models, show_bar)
    except NoCredentialsError:
        raise ModelLoadError(
            f"Cannot download the model {location}: no AWS credentials found; {NO_CREDENTIALS_HINT}."
        ) from None
    except ClientError as exc:
        raise _client_error(location, bucket, exc) from None
    except (IncompleteReadError, ResponseStreamingError) as exc:
        raise ModelLoadError(f"Download of {location} was interrupted: {exc}") from None
    except BotoCoreError as exc:  # endpoint unreachable, read timeouts
        raise ModelLoadError(f"Cannot download the model {location}: {exc}") from None


def _fetch_s3_key(client: Any, location: str, bucket: str, key: str, models: Path, show_bar: bool) -> Path:
    """The object ``key`` when there is one, else every object under the prefix ``key/``."""
    from botocore.exceptions import ClientError

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


def _client_error(location: str, bucket: str, exc: Any) -> ModelLoadError:
    """An S3 error answer in words: a missing bucket, access denied, or S3's own message."""
    code = _s3_code(exc)
    if code == "NoSuchBucket":
        return ModelLoadError(f"Cannot download the model {location}: the bucket {bucket!r} does not exist.")
    if code in ("403", "AccessDenied", "AllAccessDisabled", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
        return ModelLoadError(
            f"Cannot download the model {location}: access denied ({code}); "
            f"check that the credentials may read bucket {bucket!r}."
        )
    return ModelLoadError(f"Cannot download the model {location}: {exc}")


def _s3_code(exc: Any) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _fetch_s3_object(
    client: Any, location: str, bucket: str, key: str, head: dict[str, Any], models: Path, show_bar: bool
) -> Path:
    etag = str(head.get("ETag", "")).strip('"')
    name = safe_name(key.rsplit("/", 1)[-1])
    folder = models / f"s3-{cache_key(location, etag)}"
    target = folder / name
    if target.is_file():
        logger.debug("Using cached %s for %s (ETag %s)", target, location, etag)
        return target
    folder.mkdir(parents=True, exist_ok=True)
    total = int(head["ContentLength"])
    download(_object_chunks(client, bucket, key, head["ETag"], total, location), target, total, location, show_bar)
    return target


def _object_chunks(client: Any, bucket: str, key: str, etag: str, total: int, shown: str) -> Iterator[bytes]:
    """The object's bytes, across as many GETs as dropped connections: each resumes where the last left off
    (``RESTART`` first when an S3-compatible endpoint ignored ``Range`` and sent the whole object again)."""
    from botocore.exceptions import ClientError, IncompleteReadError, ResponseStreamingError

    tries = Tries(shown)
    done = 0
    while True:
        resume = {"Range": f"bytes={done}-"} if done else {}
        try:
            answer = client.get_object(Bucket=bucket, Key=key, IfMatch=etag, **resume)
        except ClientError as exc:
            if _s3_code(exc) not in ("PreconditionFailed", "412"):
                raise
            raise ModelLoadError(
                f"Cannot download the model {shown}: the object changed during the download (its ETag is no longer "
                f"{etag.strip(chr(34))}); load it again to fetch the new one."
            ) from None
        if done and "ContentRange" not in answer:
            logger.info("Download of %s: the endpoint sent the whole object again; starting over", shown)
            done = 0
            yield RESTART
        body = answer["Body"]
        try:
            while chunk := body.read(CHUNK):
                done += len(chunk)
                yield chunk
            if done >= total:
                return
            why = "the connection closed early"
        except (IncompleteReadError, ResponseStreamingError, OSError, http.client.HTTPException) as exc:
            why = f"the connection dropped ({exc or type(exc).__name__})"
        finally:
            body.close()
        tries.fail(done, total, why)


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
    target = models / f"s3-{cache_key(location, validators)}"
    if target.is_dir():
        logger.debug("Using cached %s for %s", target, location)
        return model_root(target)
    models.mkdir(parents=True, exist_ok=True)
    with staging_dir(models, target) as staging:
        for obj in objects:
            relative = obj["Key"][len(prefix) :]
            dest = (staging / relative).resolve()
            if not dest.is_relative_to(staging.resolve()):
                raise ModelLoadError(f"Cannot download the model {location}: unsafe object key {obj['Key']!r}.")
            dest.parent.mkdir(parents=True, exist_ok=True)
            label, size = f"s3://{bucket}/{obj['Key']}", int(obj["Size"])
            download(_object_chunks(client, bucket, obj["Key"], obj["ETag"], size, label), dest, size, label, show_bar)
    return model_root(target)
