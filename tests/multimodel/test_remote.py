"""Remote model folders (moto's S3 server on loopback, a real process): ``paths`` of ``s3://`` prefixes with
version folders, fetched on first use, their downloaded copies trimmed to ``disk_cache_size`` (and kept so by
describing, listing and polling); ``http(s)://`` zips of version folders."""

from __future__ import annotations

import concurrent.futures
import functools
import http.server
import os
import ssl
import threading
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.models import onnx_linear
from tests.multimodel.helpers import ONNX_PREDICTOR, X, bias_of, expected, models_dir, project_yaml
from tests.runtimes.test_sources import aws_env, bucket, s3_endpoint  # noqa: F401  (fixtures)

pytestmark = pytest.mark.slow


def upload(target: Any, root: Path) -> None:
    for path in sorted(root.rglob("*")):
        if path.is_file():
            target.put_object(Key=path.relative_to(root).as_posix(), Body=path.read_bytes())


def test_s3_models_are_fetched_on_use_and_trimmed_on_disk(
    serve,
    make_project,
    bucket,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The test polls itself (refresh(remote=True) below): the watcher's own poll, every 10 s, would come at a
    # moment of the machine's choosing (CI once met one between the trims and the description).
    monkeypatch.setattr("localserve.runtimes.watch.POLL_SECONDS", 3600.0)
    upload(bucket, models_dir(tmp_path / "upload", {"a": [1, 2], "b": [1], "c": [4]}))
    paths = "".join(f"        - {{name: {m}, path: 's3://{bucket.name}/{m}/'}}\n" for m in "abc")
    models = f"      paths:\n{paths}      cache_size: 1\n      disk_cache_size: 2\n"
    project = make_project({"cortex.yaml": project_yaml(models), "predictor.py": ONNX_PREDICTOR})
    with serve(project) as client:
        for model, version in (("a", 2), ("b", 1), ("c", 4), ("a", 2)):
            response = client.post(f"/multi?model={model}", json=X)
            assert response.status_code == 200, response.text
            assert response.json() == {"logits": expected(model, version)}
        models = client.app.apis["multi"].endpoint.models
        copies = tmp_path / "_cache" / "models"
        assert len(list(copies.glob("s3-*"))) == 2  # a and c; b's copy was deleted
        # Describing the API, listing the V2 models and a remote poll fetch no trimmed copy again.
        assert client.get("/multi").json()["models"]["available"] == {"a": [1, 2], "b": [1], "c": [4]}
        assert [m["name"] for m in client.get("/v2/models").json()] == ["multi.a", "multi.a", "multi.b", "multi.c"]
        assert models.refresh(remote=True) == []
        assert len(list(copies.glob("s3-*"))) == 2
        # A new version of b, uploaded meanwhile: b's next use fetches it, without a poll in between.
        upload(bucket, models_dir(tmp_path / "upload2", {"b": [3]}))
        assert client.post("/multi?model=b", json=X).json() == {"logits": expected("b", 3)}
        assert len(list(copies.glob("s3-*"))) == 2
        events = client.get("/multi").json()["models"]["events"]
    assert [(e["event"], e["model"]) for e in events if "model" in e] == [  # (a remote poll adds "refresh" events)
        ("load", "a"),
        ("load", "b"),
        ("evict", "a"),
        ("disk-evict", "a"),  # c's copy is the third: the least recently used one whose model is not in memory goes
        ("load", "c"),
        ("evict", "b"),
        ("disk-evict", "b"),  # a is fetched again: b's copy goes
        ("load", "a"),
        ("evict", "c"),
        ("disk-evict", "c"),  # b is fetched again (its version 3): c's copy goes
        ("load", "b"),
        ("evict", "a"),
    ]


@dataclass
class Gate:
    """Holds the answer to a request for ``path`` until ``release`` (``entered`` says one is held); the paths in
    ``broken`` answer 500 (a remote error, as S3 or a web server has them now and then)."""

    path: str | None = None
    entered: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    broken: set[str] = field(default_factory=set)


class QuietFiles(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def send_head(self) -> Any:  # HEAD and GET
        gate: Gate = self.server.gate  # type: ignore[attr-defined]
        if self.path in gate.broken:
            self.send_error(500)
            return None
        if self.path == gate.path:
            gate.entered.set()
            assert gate.release.wait(90)  # the bound only catches a hang
        return super().send_head()


@pytest.fixture
def https_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, str, Gate]]:
    """A real HTTPS server on loopback serving the folder it returns; its self-signed certificate trusted
    through SSL_CERT_FILE (which httpx, and so the download, reads)."""
    from tests.cli.test_listen import _self_signed

    (tmp_path / "tls").mkdir()
    key, cert = _self_signed(tmp_path / "tls")
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    site = tmp_path / "site"
    site.mkdir()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietFiles, directory=str(site)))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    server.gate = gate = Gate()  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield site, f"https://127.0.0.1:{server.server_address[1]}", gate
    finally:
        gate.release.set()
        server.shutdown()
        server.server_close()
        thread.join()


def zip_versions(target: Path, model: str, versions: list[int], built: Path) -> None:
    """``target``: a zip of ``model``'s version folders (``1/model.onnx``, ``2/model.onnx``, ...)."""
    folder = models_dir(built, {model: versions}) / model
    with zipfile.ZipFile(target, "w") as archive:
        for path in sorted(folder.rglob("*.onnx")):
            archive.write(path, path.relative_to(folder).as_posix())


def test_https_model_folders_as_zips_of_versions_and_plain_files(serve, make_project, https_site, tmp_path) -> None:
    site, url, _ = https_site
    zip_versions(site / "a.zip", "a", [1, 2], tmp_path / "built")
    zip_versions(site / "c.zip", "c", [1], tmp_path / "built")
    onnx_linear(site / "b.onnx", bias=bias_of("b", 1))  # a plain file: the one version 1
    paths = "".join(
        f"        - {{name: {m}, path: '{url}/{m}.{ext}'}}\n" for m, ext in (("a", "zip"), ("b", "onnx"), ("c", "zip"))
    )
    models = f"      paths:\n{paths}      cache_size: 1\n      disk_cache_size: 2\n"
    project = make_project({"cortex.yaml": project_yaml(models), "predictor.py": ONNX_PREDICTOR})
    copies = tmp_path / "_cache" / "models"
    with serve(project) as client:
        # Described before any use: nothing is downloaded for it (GET /<api> runs on the event loop).
        assert client.get("/multi").json()["models"]["available"] == {"a": None, "b": None, "c": None}
        assert not copies.exists()
        plan = (("model=a", "a", 2), ("model=b", "b", 1), ("model=a&version=1", "a", 1), ("model=c", "c", 1))
        for query, model, version in plan:
            response = client.post(f"/multi?{query}", json=X)
            assert response.status_code == 200, response.text
            assert response.json() == {"logits": expected(model, version)}
        # Two copies on disk, each one entry of the download cache (c.zip extracted beside its archive); b's went.
        assert sorted(p.name for p in copies.iterdir()) == sorted(p.name for p in copies.glob("http-*"))
        assert len(list(copies.iterdir())) == 2
        described = client.get("/multi").json()["models"]
        listed = client.get("/v2/models").json()
        # c.zip changes on the server: a poll fetches the new copy, the old one is deleted, version 1 reloads.
        zip_versions(site / "c.zip", "c", [1, 5], tmp_path / "built2")
        os.utime(site / "c.zip", (1_700_000_000, 1_700_000_000))  # another Last-Modified, whatever the clock
        models = client.app.apis["multi"].endpoint.models
        assert models.refresh(remote=True) == [
            {"model": "c", "version": 5, "change": "added"},
            {"model": "c", "version": 1, "change": "replaced"},
        ]
        assert len(list(copies.iterdir())) == 2
        assert client.post("/multi?model=c", json=X).json() == {"logits": expected("c", 5)}
    assert described["available"] == {"a": [1, 2], "b": [1], "c": [1]}
    assert [(m["name"], m["version"]) for m in listed] == [
        ("multi.a", "1"),
        ("multi.a", "2"),
        ("multi.b", "1"),
        ("multi.c", "1"),
    ]
    assert [(e["event"], e["model"], e.get("version")) for e in described["events"]] == [
        ("load", "a", 2),
        ("load", "b", 1),
        ("evict", "a", 2),
        ("load", "a", 1),
        ("evict", "b", 1),
        ("disk-evict", "b", None),
        ("load", "c", 1),
        ("evict", "a", 1),
    ]


def test_an_https_dir_is_a_zip_of_model_folders(serve, make_project, https_site, tmp_path) -> None:
    site, url, _ = https_site
    folder = models_dir(tmp_path / "built", {"a": [1, 2], "b": [3]})
    with zipfile.ZipFile(site / "models.zip", "w") as archive:
        for path in sorted(folder.rglob("*.onnx")):
            archive.write(path, path.relative_to(folder).as_posix())
    models = f"      dir: '{url}/models.zip'\n      cache_size: 1\n      disk_cache_size: 1\n"
    project = make_project({"cortex.yaml": project_yaml(models), "predictor.py": ONNX_PREDICTOR})
    with serve(project) as client:
        # The dir was fetched and read at load (off the event loop): its models and versions are known at once.
        assert client.get("/multi").json()["models"]["available"] == {"a": [1, 2], "b": [3]}
        for model, version in (("a", 2), ("b", 3)):
            assert client.post(f"/multi?model={model}", json=X).json() == {"logits": expected(model, version)}
        assert client.get("/multi").json()["models"]["available"] == {"a": [1, 2], "b": [3]}


def test_v2_fetches_a_remote_model_off_the_event_loop(serve, make_project, https_site, tmp_path) -> None:
    from tests.protocols.v2.test_multi import logits_of, v2_body

    site, url, gate = https_site
    for model in "ab":
        zip_versions(site / f"{model}.zip", model, [1], tmp_path / "built")
    paths = "".join(f"        - {{name: {m}, path: '{url}/{m}.zip'}}\n" for m in "ab")
    models = f"      paths:\n{paths}      cache_size: 1\n      disk_cache_size: 2\n"
    project = make_project({"cortex.yaml": project_yaml(models), "predictor.py": ONNX_PREDICTOR})
    with serve(project) as client, concurrent.futures.ThreadPoolExecutor(3) as pool:
        gate.path = "/a.zip"
        body, headers = v2_body(X)
        infer = pool.submit(client.post, "/v2/models/multi.a/infer", content=body, headers=headers)
        assert gate.entered.wait(60)  # a's download is under way, held by the server
        # The event loop answers meanwhile (were the download on it, this would wait for the gate, and time out).
        assert pool.submit(client.get, "/healthz").result(60).status_code == 200
        gate.release.set()
        response = infer.result(60)
        assert response.status_code == 200, response.text
        assert logits_of(response) == expected("a", 1)
        gate.path, gate.entered, gate.release = "/b.zip", threading.Event(), threading.Event()
        listing = pool.submit(client.get, "/v2/models")  # lists b's versions: fetches b's copy
        assert gate.entered.wait(60)
        assert pool.submit(client.get, "/healthz").result(60).status_code == 200
        gate.release.set()
        assert [(m["name"], m["version"]) for m in listing.result(60).json()] == [("multi.a", "1"), ("multi.b", "1")]
