"""The app end to end in-process (localserve.testing, Starlette's TestClient): ABEJA handlers, routing, errors."""

from __future__ import annotations

import gc
import hashlib
import io
import threading

import numpy as np
from PIL import Image

import localserve.testing
from localserve.engine.memory import GEN0_THRESHOLD
from localserve.server import ServeOptions
from tests.conftest import EXAMPLES

ECHO = """
import json

def handler(request, context):
    return {
        "content_type": "application/json",
        "content": {
            "method": request["http_method"],
            "content_type": request["content_type"],
            "headers": request["headers"],
            "auth": request["http_headers"]["Authorization"],
            "body": request.read().decode("latin-1"),
            "context": context,
        },
    }
"""


def test_json_tax_example(localserve_client) -> None:
    client = localserve_client(EXAMPLES / "json_tax", handler="main:handler")
    response = client.post("/", json={"total_without_tax": 100})
    assert (response.status_code, response.json()) == (200, {"total": 108.0})
    assert response.headers["content-type"] == "application/json; charset=utf8"
    response = client.post("/predict", json={"total": 100})
    assert (response.status_code, response.json()) == (400, {"message": "total_without_tax is need"})


def test_image_flip_example_mirrors_the_jpeg() -> None:
    jpeg = (EXAMPLES / "image_flip" / "cat.jpg").read_bytes()
    # install=False: its requirements.txt names Pillow, a test dependency (installs are tested in tests/cli).
    with localserve.testing.client(EXAMPLES / "image_flip", handler="main:handler", install=False) as client:
        response = client.post("/", content=jpeg, headers={"Content-Type": "image/jpeg"})
    assert response.status_code == 200
    assert response.headers["content-type"] == "image/jpeg"
    original = np.asarray(Image.open(io.BytesIO(jpeg))).astype(int)
    flipped = np.asarray(Image.open(io.BytesIO(response.content))).astype(int)
    assert flipped.shape == original.shape
    assert np.abs(flipped - original[:, ::-1]).mean() < 3  # JPEG re-encoding noise only
    assert np.abs(flipped - original).mean() > 50


def test_multipart_echo_example() -> None:
    jpeg = (EXAMPLES / "image_flip" / "cat.jpg").read_bytes()
    with localserve.testing.client(EXAMPLES / "multipart_echo", handler="main:handler") as client:
        response = client.post(
            "/",
            files={"file1": (None, b'{"foo": "bar"}', "application/json"), "image": ("cat.jpg", jpeg, "image/jpeg")},
        )
        assert response.status_code == 200, response.text
        assert response.headers["x-parts"] == "2"
        assert response.json() == {
            "parts": [
                {
                    "form_name": "file1",
                    "file_name": None,
                    "content_type": "application/json",
                    "size": 14,
                    "sha256": hashlib.sha256(b'{"foo": "bar"}').hexdigest(),
                },
                {
                    "form_name": "image",
                    "file_name": "cat.jpg",
                    "content_type": "image/jpeg",
                    "size": len(jpeg),
                    "sha256": hashlib.sha256(jpeg).hexdigest(),
                },
            ]
        }
        bad = client.post(
            "/", content=b"--zz\r\nnot multipart", headers={"Content-Type": "multipart/form-data; boundary=zz"}
        )
        assert bad.status_code == 400
        assert bad.json()["error"].startswith(
            "Malformed multipart body at byte 9: a part's header line is not 'Name: value'"
        )
        assert client.get("/healthz").status_code == 200


def test_request_seen_by_the_handler(serve, make_project) -> None:
    project = make_project({"main.py": ECHO})
    with serve(project, handler="main:handler", context={"k": 1}) as client:
        response = client.post(
            "/", content=b"abc", headers={"Content-Type": "text/plain", "Authorization": "Bearer x", "X-Custom": "v"}
        )
        seen = response.json()
        assert seen["method"] == "POST"
        assert seen["content_type"] == "text/plain"
        assert seen["auth"] is None
        assert {"key": "x-custom", "values": ["v"]} in seen["headers"]
        assert all(h["key"] != "authorization" for h in seen["headers"])
        assert seen["body"] == "abc"
        assert seen["context"] == {"k": 1}
        response = client.get("/?a=1&b=2")
        assert response.json()["body"] == "a=1&b=2"
        assert response.json()["content_type"] == "application/x-www-form-urlencoded"
        assert client.put("/predict", content=b"x").json()["method"] == "PUT"


def test_request_id_is_kept_or_made(serve, make_project) -> None:
    project = make_project({"main.py": "def handler(request, context):\n    return {'content': 'ok'}\n"})
    with serve(project, handler="main:handler") as client:
        assert client.post("/", headers={"X-Request-ID": "abc-123"}).headers["x-request-id"] == "abc-123"
        made = client.post("/").headers["x-request-id"]
        assert len(made) == 32 and made != client.post("/").headers["x-request-id"]


def test_handler_errors_are_json_500s_without_traceback(serve, make_project, caplog) -> None:
    project = make_project(
        {
            "main.py": """
            def handler(request, context):
                body = request.read()
                if body == b"raise":
                    raise ValueError("bad things")
                if body == b"list":
                    return ["not", "a", "dict"]
                return {"content_type": "application/json", "content": {"x": object()}}
            """
        }
    )
    with serve(project, handler="main:handler") as client:
        response = client.post("/", content=b"raise", headers={"X-Request-ID": "r1"})
        assert response.status_code == 500
        assert response.json() == {"error": 'Handler "main:handler" raised ValueError: bad things', "request_id": "r1"}
        assert "Traceback" in caplog.text and "bad things" in caplog.text
        response = client.post("/", content=b"list", headers={"X-Request-ID": "r2"})
        assert response.json() == {
            "error": "The handler returned a list; expected a dict with 'status_code', 'content_type', 'content' and 'metadata'.",
            "request_id": "r2",
        }
        response = client.post("/", content=b"obj")
        assert response.status_code == 500
        assert (
            response.json()["error"]
            == "The response cannot be serialised as JSON: Object of type object is not JSON serializable."
        )
        assert client.post("/", content=b"raise").status_code == 500  # still serving


def test_unknown_path_and_body_limit(serve, make_project, caplog) -> None:
    project = make_project(
        {"main.py": "def handler(request, context):\n    return {'content': str(len(request.read()))}\n"}
    )
    with serve(project, ServeOptions(max_body_size=1000), handler="main:handler") as client:
        response = client.post("/nope")
        assert response.status_code == 404
        assert response.json()["error"] == "No route '/nope'; the APIs answer at /, /predict, /proj."
        long = client.post("/" + "a" * 60_000).json()["error"]  # the path is not echoed whole
        assert long == f"No route '/{'a' * 199}...'; the APIs answer at /, /predict, /proj."
        assert client.post("/", content=b"x" * 1000).text == "1000"
        response = client.post("/", content=b"x" * 1001)
        assert response.status_code == 413
        assert response.json()["error"] == (
            "The request body is too large: 1001 bytes; the limit is 1000 bytes (--max-body-size)."
        )
        assert "over the limit of 1000 bytes" in caplog.text
        chunks = (b"x" * 600 for _ in range(3))  # no Content-Length: counted while reading
        response = client.post("/", content=chunks)
        assert response.status_code == 413


def test_streamed_generator_content(serve, make_project) -> None:
    project = make_project(
        {"main.py": "def handler(request, context):\n    return {'content': (f'line {i}\\n' for i in range(3))}\n"}
    )
    with serve(project, handler="main:handler") as client:
        response = client.post("/")
        assert response.text == "line 0\nline 1\nline 2\n"
        assert "content-length" not in response.headers


def test_health_answers_while_the_handler_is_busy(serve, make_project) -> None:
    project = make_project(
        {
            "main.py": """
            import threading
            started = threading.Event()
            release = threading.Event()
            finished = threading.Event()

            def handler(request, context):
                started.set()
                release.wait(30)
                finished.set()
                return {"content": "done"}
            """
        }
    )
    with serve(project, handler="main:handler") as client:
        import main  # the handler's own module: the test holds its events

        result = {}
        thread = threading.Thread(target=lambda: result.setdefault("r", client.post("/")))
        thread.start()
        assert main.started.wait(5)
        assert client.get("/healthz").json() == {"status": "ok"}
        assert client.get("/readyz").status_code == 200
        assert not main.finished.is_set(), "the health checks waited for the busy handler"
        main.release.set()
        thread.join(5)
        assert result["r"].text == "done"


def test_what_loading_made_is_frozen_out_of_later_collections(serve, make_project) -> None:
    project = make_project(
        {"main.py": "LOADED = [['made while loading']]\n\ndef handler(request, context):\n    return {}\n"}
    )
    at_start = gc.get_freeze_count()  # not 0 on Python 3.12, which freezes some of its own objects
    thresholds = gc.get_threshold()
    try:
        with serve(project, ServeOptions(freeze_heap=True), handler="main:handler") as client:
            import main

            assert client.post("/").status_code == 200
            made_now = [["made after loading"]]  # lists of lists: containers the collector tracks
            assert gc.is_tracked(main.LOADED) and gc.is_tracked(made_now)
            tracked = {id(o) for o in gc.get_objects()}  # the frozen generation is left out
            assert id(main.LOADED) not in tracked
            assert id(made_now) in tracked
            assert gc.get_freeze_count() > at_start
            assert gc.get_threshold() == (GEN0_THRESHOLD, *thresholds[1:])  # the youngest collected less often
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)


def test_garbage_made_while_loading_is_collected_not_frozen(serve, make_project) -> None:
    """What start-up imported is frozen before loading begins; loading's own garbage is still collected first."""
    main = (
        "import weakref\n\nclass Node:\n    pass\n\n"
        "node = Node()\nnode.itself = node  # a cycle: only the collector frees it\nGARBAGE = weakref.ref(node)\n"
        "del node\n\ndef handler(request, context):\n    return {}\n"
    )
    project = make_project({"main.py": main})
    thresholds = gc.get_threshold()
    gc.disable()  # no collection of the test's own between the import and the freeze
    try:
        with serve(project, ServeOptions(freeze_heap=True), handler="main:handler") as client:
            import main

            assert client.post("/").status_code == 200
            assert main.GARBAGE() is None
    finally:
        gc.enable()
        gc.unfreeze()
        gc.set_threshold(*thresholds)


def test_without_freeze_heap_the_test_process_heap_is_left_alone(serve, make_project) -> None:
    project = make_project({"main.py": "def handler(request, context):\n    return {}\n"})
    at_start, thresholds = gc.get_freeze_count(), gc.get_threshold()
    with serve(project, handler="main:handler") as client:
        assert client.post("/").status_code == 200
        assert gc.get_freeze_count() == at_start
        assert gc.get_threshold() == thresholds
