"""Model downloads from S3 (boto3, unmodified) against a real server on loopback standing in for its endpoint:
a dropped connection resumed with ``Range``, an endpoint that ignores it, an object replaced mid-download."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest

from localserve.errors import ModelLoadError
from localserve.runtimes.sources import resolve_model
from tests.runtimes.site import PIECE, MiB, Site, files


@pytest.fixture
def aws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """boto3 with test credentials and nothing of this machine's AWS configuration."""
    pytest.importorskip("boto3")
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": str(tmp_path / "no-aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-aws-credentials"),
        "AWS_EC2_METADATA_DISABLED": "true",
    }.items():
        monkeypatch.setenv(key, value)


@pytest.mark.usefixtures("aws")
def test_an_s3_object_is_resumed_with_range_after_a_dropped_connection(
    serve_site: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The same server as S3's endpoint (boto3 asks it for /<bucket>/<key>): the drop resumed, the bytes exact."""
    body = os.urandom(3 * MiB)
    site = Site(body, drop_at=MiB + 3 * PIECE)
    url = serve_site(site)
    caplog.set_level("INFO", logger="localserve")
    path = resolve_model("s3://models/m.onnx", tmp_path, cache_root=tmp_path / "cache", progress=False, s3_endpoint=url)
    assert path.read_bytes() == body
    first, second = site.seen
    assert first["range"] is None
    resumed_at = int(second["range"].removeprefix("bytes=").removesuffix("-"))  # type: ignore[union-attr]
    assert 0 < resumed_at <= MiB + 3 * PIECE
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("Download of s3://models/m.onnx: the connection ")
    assert warnings[0].endswith("of 3.0 MiB; trying again in 0.5 s (try 2 of 4)")
    assert files(tmp_path / "cache") == [path]


@pytest.mark.usefixtures("aws")
def test_an_s3_endpoint_that_ignores_range_sends_it_all_again_and_the_bytes_are_exact(
    serve_site: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    body = os.urandom(2 * MiB)
    url = serve_site(Site(body, drop_at=MiB, ranges=False))
    caplog.set_level("INFO", logger="localserve")
    path = resolve_model("s3://models/m.onnx", tmp_path, cache_root=tmp_path / "cache", progress=False, s3_endpoint=url)
    assert path.read_bytes() == body  # not the first MiB twice
    assert "Download of s3://models/m.onnx: the endpoint sent the whole object again; starting over" in caplog.messages


@pytest.mark.usefixtures("aws")
def test_an_s3_object_replaced_during_its_download_is_named_so(serve_site: Any, tmp_path: Path) -> None:
    url = serve_site(Site(os.urandom(2 * MiB), drop_at=MiB, replaced=True))
    with pytest.raises(ModelLoadError) as caught:
        resolve_model("s3://models/m.onnx", tmp_path, cache_root=tmp_path / "cache", progress=False, s3_endpoint=url)
    assert str(caught.value) == (
        "Cannot download the model s3://models/m.onnx: the object changed during the download (its ETag is no "
        "longer v1); load it again to fetch the new one."
    )
    assert files(tmp_path / "cache") == []
