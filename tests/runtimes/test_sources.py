"""resolve_model against real servers on loopback: moto's S3 server and http.server.

moto's S3 server runs as its own process, the boundary boto3 talks to."""

from __future__ import annotations

import http.server
import io
import os
import socket
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from localserve.errors import ModelLoadError
from localserve.runtimes.cache import scratch_dir
from localserve.runtimes.sources import redact, resolve_model
from tests.conftest import free_port


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("moto server did not start") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def aws_env(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """Fake credentials and boto3's own endpoint override, isolated from the user's ~/.aws."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3_endpoint)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "LOCALSERVE_S3_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    return s3_endpoint


_bucket_counter = iter(range(10_000))


@pytest.fixture
def bucket(aws_env: str) -> Any:
    s3 = boto3.resource("s3", endpoint_url=aws_env)
    b = s3.create_bucket(Bucket=f"models-{os.getpid()}-{next(_bucket_counter)}")
    return b


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


def _zip_bytes(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return buffer.getvalue()


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# --- local paths -------------------------------------------------------------------------------


def test_local_relative_and_absolute_paths(tmp_path: Path, cache: Path) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "iris.onnx").write_bytes(b"onnx")
    assert resolve_model("models/iris.onnx", tmp_path, cache_root=cache) == tmp_path / "models" / "iris.onnx"
    absolute = str(tmp_path / "models")
    assert resolve_model(absolute, Path("/elsewhere"), cache_root=cache) == tmp_path / "models"
    assert not cache.exists()


def test_local_missing_names_path_and_project(tmp_path: Path, cache: Path) -> None:
    with pytest.raises(ModelLoadError) as info:
        resolve_model("models/nope.onnx", tmp_path, cache_root=cache)
    assert str(info.value) == (
        f"Model 'models/nope.onnx' not found: {tmp_path / 'models' / 'nope.onnx'} does not exist "
        f"(relative paths start at the project directory {tmp_path})."
    )


def test_local_zip_extracted_once_into_content_addressed_folder(tmp_path: Path, cache: Path) -> None:
    data = _zip_bytes({"export/saved_model.pb": b"pb", "export/variables/variables.index": b"idx"})
    (tmp_path / "model.zip").write_bytes(data)
    path = resolve_model("model.zip", tmp_path, cache_root=cache)
    import hashlib

    assert path == cache / "models" / f"zip-{hashlib.sha256(data).hexdigest()}" / "export"
    assert _files(path) == {"saved_model.pb": b"pb", "variables/variables.index": b"idx"}
    mtime = (path / "saved_model.pb").stat().st_mtime_ns
    assert resolve_model("model.zip", tmp_path, cache_root=cache) == path
    assert (path / "saved_model.pb").stat().st_mtime_ns == mtime
    assert [p.name for p in (cache / "models").iterdir()] == [path.parent.name]  # no staging left over


def test_local_zip_with_loose_files_returns_extraction_root(tmp_path: Path, cache: Path) -> None:
    (tmp_path / "m.zip").write_bytes(_zip_bytes({"saved_model.pb": b"pb", "assets/vocab.txt": b"a"}))
    path = resolve_model("m.zip", tmp_path, cache_root=cache)
    assert path.name.startswith("zip-")
    assert _files(path) == {"assets/vocab.txt": b"a", "saved_model.pb": b"pb"}


def test_bad_zip(tmp_path: Path, cache: Path) -> None:
    (tmp_path / "m.zip").write_bytes(b"not a zip")
    with pytest.raises(ModelLoadError, match=r"m\.zip is not a valid zip file"):
        resolve_model("m.zip", tmp_path, cache_root=cache)
    assert list((cache / "models").iterdir()) == []


# --- S3 ------------------------------------------------------------------------------------------


def test_s3_object_cached_by_etag(bucket: Any, tmp_path: Path, cache: Path) -> None:
    bucket.put_object(Key="iris/model.onnx", Body=b"version-1")
    location = f"s3://{bucket.name}/iris/model.onnx"
    first = resolve_model(location, tmp_path, cache_root=cache, progress=False)
    assert first.name == "model.onnx"
    assert first.read_bytes() == b"version-1"
    assert first.is_relative_to(cache / "models")

    # Same ETag: the cached copy is used as is, without downloading (our marker survives).
    first.write_bytes(b"cached")
    assert resolve_model(location, tmp_path, cache_root=cache, progress=False) == first
    assert first.read_bytes() == b"cached"

    # A new object (new ETag) is downloaded next to it.
    bucket.put_object(Key="iris/model.onnx", Body=b"version-2")
    second = resolve_model(location, tmp_path, cache_root=cache, progress=False)
    assert second != first
    assert second.read_bytes() == b"version-2"
    assert not [p for p in (cache / "models").rglob("*") if p.name.endswith(".part")]


def test_s3_download_logs_its_start_and_end(
    bucket: Any, tmp_path: Path, cache: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bucket.put_object(Key="m.onnx", Body=b"x" * 2048)
    caplog.set_level("INFO", logger="localserve")
    resolve_model(f"s3://{bucket.name}/m.onnx", tmp_path, cache_root=cache, progress=False)
    lines = [r.getMessage() for r in caplog.records if r.name == "localserve"]
    assert len(lines) == 2  # one chunk: no line between
    assert lines[0] == f"Downloading s3://{bucket.name}/m.onnx (2.0 KiB)"
    assert lines[1].startswith(f"Downloaded s3://{bucket.name}/m.onnx (2.0 KiB) in ")


def test_s3_progress_bar_on_stderr(
    bucket: Any, tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bucket.put_object(Key="m.onnx", Body=b"x" * 2048)
    resolve_model(f"s3://{bucket.name}/m.onnx", tmp_path, cache_root=cache, progress=True)
    err = capsys.readouterr().err
    assert f"s3://{bucket.name}/m.onnx: 100%|" in err  # tqdm's bar
    assert "2.00k/2.00k" in err


def test_s3_zip_object_is_extracted(bucket: Any, tmp_path: Path, cache: Path) -> None:
    bucket.put_object(Key="tf/model.zip", Body=_zip_bytes({"1/saved_model.pb": b"pb", "1/variables/v": b"v"}))
    path = resolve_model(f"s3://{bucket.name}/tf/model.zip", tmp_path, cache_root=cache, progress=False)
    assert path.name == "1"
    assert path.parent.name.startswith("zip-")
    assert _files(path) == {"saved_model.pb": b"pb", "variables/v": b"v"}


@pytest.mark.parametrize("suffix", ["", "/"])
def test_s3_prefix_downloads_a_folder(bucket: Any, tmp_path: Path, cache: Path, suffix: str) -> None:
    bucket.put_object(Key="exports/iris/saved_model.pb", Body=b"pb")
    bucket.put_object(Key="exports/iris/variables/variables.data-00000-of-00001", Body=b"data")
    bucket.put_object(Key="exports/iris/variables/variables.index", Body=b"index")
    bucket.put_object(Key="exports/iris-other/saved_model.pb", Body=b"not this one")
    location = f"s3://{bucket.name}/exports/iris{suffix}"
    path = resolve_model(location, tmp_path, cache_root=cache, progress=False)
    assert _files(path) == {
        "saved_model.pb": b"pb",
        "variables/variables.data-00000-of-00001": b"data",
        "variables/variables.index": b"index",
    }
    (path / "saved_model.pb").write_bytes(b"cached")
    assert resolve_model(location, tmp_path, cache_root=cache, progress=False) == path
    assert (path / "saved_model.pb").read_bytes() == b"cached"
    bucket.put_object(Key="exports/iris/variables/variables.index", Body=b"index-2")
    changed = resolve_model(location, tmp_path, cache_root=cache, progress=False)
    assert changed != path
    assert (changed / "variables" / "variables.index").read_bytes() == b"index-2"


def test_s3_missing_object(bucket: Any, tmp_path: Path, cache: Path) -> None:
    with pytest.raises(ModelLoadError) as info:
        resolve_model(f"s3://{bucket.name}/nope.onnx", tmp_path, cache_root=cache)
    assert str(info.value) == (
        f"Cannot download the model s3://{bucket.name}/nope.onnx: "
        f"there is no object or prefix 'nope.onnx' in bucket '{bucket.name}'."
    )


def test_s3_missing_bucket(aws_env: str, tmp_path: Path, cache: Path) -> None:
    with pytest.raises(ModelLoadError) as info:
        resolve_model("s3://no-such-bucket-here/m.onnx", tmp_path, cache_root=cache)
    assert str(info.value) == (
        "Cannot download the model s3://no-such-bucket-here/m.onnx: the bucket 'no-such-bucket-here' does not exist."
    )


def test_s3_no_credentials(bucket: Any, tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bucket.put_object(Key="m.onnx", Body=b"x")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(ModelLoadError) as info:
        resolve_model(f"s3://{bucket.name}/m.onnx", tmp_path, cache_root=cache)
    assert str(info.value) == (
        f"Cannot download the model s3://{bucket.name}/m.onnx: no AWS credentials found; set AWS_ACCESS_KEY_ID and "
        "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), or run where an instance or pod role applies."
    )


def test_s3_endpoint_given_by_the_cli(
    bucket: Any, tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The deprecated LOCALSERVE_S3_ENDPOINT, read by the CLI (cli.options.environment_settings), arrives here."""
    bucket.put_object(Key="m.onnx", Body=b"via LOCALSERVE_S3_ENDPOINT")
    endpoint = os.environ.pop("AWS_ENDPOINT_URL_S3")
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    path = resolve_model(f"s3://{bucket.name}/m.onnx", tmp_path, cache_root=cache, progress=False, s3_endpoint=endpoint)
    assert path.read_bytes() == b"via LOCALSERVE_S3_ENDPOINT"


def test_without_a_cache_root_a_download_goes_to_the_process_scratch_folder(
    bucket: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default folder is the CLI's decision (cli.options.cache_dir_of); below it, nothing reads XDG_CACHE_HOME."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    bucket.put_object(Key="m.onnx", Body=b"x")
    path = resolve_model(f"s3://{bucket.name}/m.onnx", tmp_path, progress=False)
    assert path.is_relative_to(scratch_dir() / "models")
    assert not (tmp_path / "xdg").exists()


# --- HTTP ----------------------------------------------------------------------------------------


class _Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        if self.path.startswith("/private/") and not self._authorized():
            return
        if self.path.startswith("/signed.onnx?"):
            if "X-Amz-Signature=" not in self.path:
                self.send_error(403)
                return
            self.path = "/iris.onnx"
        if self.path == "/truncated.onnx":
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b"x" * 10)
            self.wfile.flush()
            self.close_connection = True
            return
        super().do_GET()

    def _authorized(self) -> bool:
        if self.headers.get("Authorization") == "Basic dXNlcjpwQHNz":  # user:p@ss
            return True
        self.send_error(401)
        return False

    def do_HEAD(self) -> None:
        if self.path.startswith("/private/") and not self._authorized():
            return
        if self.path.startswith("/signed.onnx?"):
            self.path = "/iris.onnx"
        if self.path == "/truncated.onnx":
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.send_header("ETag", '"t1"')
            self.end_headers()
            return
        super().do_HEAD()


@pytest.fixture
def web(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    root = tmp_path / "www"
    root.mkdir()

    def handler(*args: Any) -> _Handler:
        return _Handler(*args, directory=str(root))

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", root
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_http_download_and_reuse(web: tuple[str, Path], tmp_path: Path, cache: Path) -> None:
    url, root = web
    (root / "iris.onnx").write_bytes(b"from http")
    path = resolve_model(f"{url}/iris.onnx", tmp_path, cache_root=cache, progress=False)
    assert path.name == "iris.onnx"
    assert path.read_bytes() == b"from http"
    path.write_bytes(b"cached")  # same Last-Modified: reused
    assert resolve_model(f"{url}/iris.onnx", tmp_path, cache_root=cache, progress=False) == path
    assert path.read_bytes() == b"cached"
    (root / "iris.onnx").write_bytes(b"from http, v2")
    later = time.time() + 10
    os.utime(root / "iris.onnx", (later, later))
    newer = resolve_model(f"{url}/iris.onnx", tmp_path, cache_root=cache, progress=False)
    assert newer != path
    assert newer.read_bytes() == b"from http, v2"


def test_http_basic_auth_in_the_url(web: tuple[str, Path], tmp_path: Path, cache: Path) -> None:
    url, root = web
    (root / "private").mkdir()
    (root / "private" / "iris.onnx").write_bytes(b"secret model")
    authed = url.replace("http://", "http://user:p%40ss@")
    path = resolve_model(f"{authed}/private/iris.onnx", tmp_path, cache_root=cache, progress=False)
    assert path.read_bytes() == b"secret model"
    with pytest.raises(ModelLoadError) as info:
        resolve_model(f"{url}/private/iris.onnx", tmp_path, cache_root=cache, progress=False)
    assert str(info.value) == f"Cannot download the model {url}/private/iris.onnx: access denied (HTTP 401)."


def test_http_signed_url_is_fetched_by_its_path(web: tuple[str, Path], tmp_path: Path, cache: Path) -> None:
    url, root = web
    (root / "iris.onnx").write_bytes(b"signed model")
    first = resolve_model(f"{url}/signed.onnx?X-Amz-Signature=abc&X-Amz-Expires=60", tmp_path, cache_root=cache)
    assert (first.name, first.read_bytes()) == ("signed.onnx", b"signed model")
    again = resolve_model(f"{url}/signed.onnx?X-Amz-Signature=def&X-Amz-Expires=60", tmp_path, cache_root=cache)
    assert again == first  # re-signed, same object: the cache is reused


def test_http_zip(web: tuple[str, Path], tmp_path: Path, cache: Path) -> None:
    url, root = web
    (root / "model.zip").write_bytes(_zip_bytes({"saved_model.pb": b"pb"}))
    path = resolve_model(f"{url}/model.zip", tmp_path, cache_root=cache, progress=False)
    assert _files(path) == {"saved_model.pb": b"pb"}


def test_http_missing(web: tuple[str, Path], tmp_path: Path, cache: Path) -> None:
    url, _ = web
    with pytest.raises(ModelLoadError) as info:
        resolve_model(f"{url}/nope.onnx", tmp_path, cache_root=cache)
    assert str(info.value) == f"Cannot download the model {url}/nope.onnx: not found (HTTP 404)."


def test_signed_urls_and_passwords_never_reach_errors(web: tuple[str, Path], tmp_path: Path, cache: Path) -> None:
    url, _ = web
    with pytest.raises(ModelLoadError) as info:
        resolve_model(f"{url}/nope.onnx?X-Amz-Signature=secret", tmp_path, cache_root=cache)
    assert str(info.value) == f"Cannot download the model {url}/nope.onnx: not found (HTTP 404)."
    assert redact("https://user:pw@host:8443/m.onnx?sig=x") == "https://host:8443/m.onnx"
    assert redact("models/iris.onnx") == "models/iris.onnx"


def test_http_interrupted_download_leaves_nothing(web: tuple[str, Path], tmp_path: Path, cache: Path) -> None:
    url, _ = web
    with pytest.raises(ModelLoadError) as info:
        resolve_model(f"{url}/truncated.onnx", tmp_path, cache_root=cache, progress=False)
    assert str(info.value) == (
        f"Cannot download the model {url}/truncated.onnx: the connection dropped (peer closed connection without "
        "sending complete message body (received 10 bytes, expected 1000)) after 10 B of 1000 B; "
        "gave up after 4 tries in a row without progress."
    )
    assert [p for p in cache.rglob("*") if p.is_file()] == []


def test_http_unreachable(tmp_path: Path, cache: Path) -> None:
    port = free_port()
    with pytest.raises(ModelLoadError, match=rf"^Cannot download the model http://127\.0\.0\.1:{port}/m\.onnx: "):
        resolve_model(f"http://127.0.0.1:{port}/m.onnx", tmp_path, cache_root=cache)
