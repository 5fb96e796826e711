"""localserve.testing: the app serve builds, in-process, on a project entered and left as serve enters it."""

from __future__ import annotations

import concurrent.futures
import json
import os
import socket
import sys
import threading
from pathlib import Path

import httpx
import pytest

import localserve.testing
from localserve.errors import ConfigError, HandlerLoadError, ProjectError
from tests.cli.test_cli import in_process
from tests.conftest import EXAMPLES

IRIS = {"sepal_length": 5.2, "sepal_width": 3.6, "petal_length": 1.4, "petal_width": 0.3}
# One main.py per project, each its own behaviour; the packaged file `value.txt` read at /mnt/project.
MAIN = """
import os

WHO = {who!r}


def handler(request, context):
    with open("/mnt/project/value.txt") as file:
        value = file.read()
    env = {{key: os.environ.get(key) for key in ("FROM_DOTENV", "FROM_FLAG")}}
    return {{"content": {{"who": WHO, "value": value, **env}}}}
"""


def state() -> tuple[str, list[str], dict[str, str], object]:
    return os.getcwd(), list(sys.path), dict(os.environ), socket.getaddrinfo


def test_abeja_handler_json_tax() -> None:
    with localserve.testing.client(EXAMPLES / "json_tax", handler="main:handler") as client:
        assert isinstance(client, httpx.Client)
        response = client.post("/", json={"total_without_tax": 100})
        assert (response.status_code, response.json()) == (200, {"total": 108.0})
        assert response.headers["content-type"] == "application/json; charset=utf8"
        response = client.post("/json-tax/predict", json={"total": 100})
        assert (response.status_code, response.json()) == (400, {"message": "total_without_tax is need"})
        assert client.get("/readyz").json() == {"status": "ready", "apis": {"json-tax": {"status": "ready"}}}


def test_cortex_request_handler_with_a_model_and_a_v2_call() -> None:
    v2 = {"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": list(IRIS.values())}]}
    with localserve.testing.client(EXAMPLES / "iris_onnx") as client:
        body = client.post("/iris", json=IRIS).json()
        assert (body["class_label"], body["class_index"]) == ("iris-setosa", 0)
        assert client.post("/", json=IRIS, headers={"Host": "api-iris"}).json() == body  # Cortex 0.25-0.33's host name
        answer = client.post("/v2/models/iris/infer", json=v2)
        assert answer.status_code == 200, answer.text
        (output,) = answer.json()["outputs"]
        assert (output["name"], output["shape"]) == ("probabilities", [1, 3])
        assert output["data"] == pytest.approx(body["probabilities"], abs=1e-6)
        assert os.getcwd() != str(EXAMPLES / "iris_onnx")  # the packaged view, as serve runs it


def test_python_predictor() -> None:
    with localserve.testing.client(EXAMPLES / "python_predictor") as client:
        response = client.post("/tax", json={"total_without_tax": 1200})
    assert response.json() == {"total": 1320.0, "currency": "JPY"}


def test_two_projects_with_a_main_py_each_do_not_leak_into_each_other(make_project, monkeypatch) -> None:
    # A `main` imported before, from elsewhere (a user's own module of that name): set aside, then back.
    elsewhere = make_project({"main.py": "WHO = 'elsewhere'\n"}, name="elsewhere")
    monkeypatch.syspath_prepend(str(elsewhere))
    import main  # type: ignore[import-not-found]

    projects = {
        who: make_project(
            {"main.py": MAIN.format(who=who), "value.txt": f"{who}'s value", ".env": f"FROM_DOTENV={who}"}, name=who
        )
        for who in ("first", "second")
    }
    before = state()
    for who, project in projects.items():
        with localserve.testing.client(project, handler="main:handler", environment={"FROM_FLAG": who}) as client:
            answer = client.post("/", json={}).json()
            assert os.environ["FROM_DOTENV"] == who
        assert answer == {"who": who, "value": f"{who}'s value", "FROM_DOTENV": who, "FROM_FLAG": who}
        assert state() == before
        assert sys.modules["main"] is main and main.WHO == "elsewhere"
        assert "FROM_DOTENV" not in os.environ and "HANDLER" not in os.environ


def test_settings_reach_the_app_and_the_apis(make_project) -> None:
    project = make_project(
        {"main.py": "def handler(request, context):\n    return {'content': {'context': context}}\n"}
    )
    settings = {"api_key": "k", "max_body_size": 10, "max_headers": 20, "context": {"k": 1}}
    with localserve.testing.client(project, handler="main:handler", **settings) as client:
        assert client.post("/", json={}).status_code == 401
        auth = {"Authorization": "Bearer k"}
        assert client.post("/", json={}, headers=auth).json() == {"context": {"k": 1}}
        assert client.post("/", content=b"x" * 11, headers=auth).status_code == 413
        assert client.get("/healthz").status_code == 200


def test_a_peer_api_is_reached_at_its_host_name(make_project) -> None:
    front = (
        "import json, urllib.request\n\nclass PythonPredictor:\n    def __init__(self, config):\n        pass\n\n"
        "    def predict(self, payload):\n"
        "        request = urllib.request.Request('http://api-back:8888/predict', data=b'{}', "
        "headers={'Content-Type': 'application/json'})\n"
        "        with urllib.request.urlopen(request) as answer:\n            return {'back said': json.load(answer)}\n"
    )
    back = "class PythonPredictor:\n    def __init__(self, config):\n        pass\n\n    def predict(self, payload):\n        return {'x': 2}\n"
    config = "".join(
        f"- name: {name}\n  kind: RealtimeAPI\n  predictor: {{type: python, path: {name}.py}}\n"
        for name in ("front", "back")
    )
    project = make_project({"cortex.yaml": config, "front.py": front, "back.py": back})
    resolver = socket.getaddrinfo
    with localserve.testing.client(project, api="front") as client:
        assert client.post("/front", json={}).json() == {"back said": {"x": 2}}
        assert client.get("/readyz").json()["apis"] == {"front": {"status": "ready"}}  # only the API asked for
    assert socket.getaddrinfo is resolver


def test_run_answers_what_the_cli_prints() -> None:
    project = EXAMPLES / "json_tax"
    done = in_process(
        "run", "--project", str(project), "--handler", "main:handler", "--input", str(project / "request.json")
    )
    result = localserve.testing.run(project, input=project / "request.json", handler="main:handler")
    assert (result.exit_code, result.body) == (done.returncode, done.stdout) == (0, b'{"total":108.0}')
    assert (result.status, result.json()) == (200, {"total": 108.0})
    # An error: exit 1, and the status and the body on stderr.
    failed = in_process("run", "-p", str(project), "-h", "main:handler", "--input", str(project / "bad_request.json"))
    result = localserve.testing.run(
        project, input=b'{"total": 1}', handler="main:handler", content_type="application/json"
    )
    assert (result.exit_code, result.status) == (failed.returncode, 400) == (1, 400)
    assert failed.stderr.endswith(b"Error: the handler answered 400:\n" + result.body + b"\n")


def test_run_an_api_of_a_config() -> None:
    result = localserve.testing.run(
        EXAMPLES / "iris_onnx",
        input=json.dumps(IRIS).encode(),
        api="iris",
        headers={"Content-Type": "application/json"},
    )
    assert (result.status, result.json()["class_label"]) == (200, "iris-setosa")
    assert ("content-type", "application/json") in result.headers


def test_errors_say_what_is_wrong(make_project, tmp_path: Path) -> None:
    before = state()
    tax = EXAMPLES / "json_tax"
    with (
        pytest.raises(ConfigError, match=r"Project directory '.*/nowhere' does not exist; expected the folder"),
        localserve.testing.client(tmp_path / "nowhere"),
    ):
        pass  # pragma: no cover
    with (
        pytest.raises(TypeError, match=r"unknown setting 'timout'; did you mean 'timeout'\?"),
        localserve.testing.client(tax, handler="main:handler", timout=3),
    ):
        pass  # pragma: no cover
    with (
        pytest.raises(ValueError, match="runs one replica in this process"),
        localserve.testing.client(tax, handler="main:handler", replicas=2),
    ):
        pass  # pragma: no cover
    with pytest.raises(ConfigError, match=r"input='missing.json': no such file; pass the request body as bytes"):
        localserve.testing.run(EXAMPLES / "json_tax", input="missing.json", handler="main:handler")
    broken = make_project({"main.py": "raise RuntimeError('broken at import')\n"})
    with (
        pytest.raises(HandlerLoadError, match="broken at import"),
        localserve.testing.client(broken, handler="main:handler"),
    ):
        pass  # pragma: no cover
    assert state() == before
    with localserve.testing.client(broken, handler="main:handler", keep_going=True) as client:
        answer = client.post("/", json={})
        assert answer.status_code == 503 and "broken at import" in answer.json()["error"]
    assert state() == before


def test_requests_from_threads_run_at_once(make_project) -> None:
    """Two requests in flight together: each handler waits until the other has started (threads_per_process=2)."""
    project = make_project(
        {
            "main.py": "import threading\n\nBARRIER = threading.Barrier(2, timeout=60)\n\n\n"
            "def handler(request, context):\n    BARRIER.wait()\n    return {'content': {'ok': True}}\n"
        }
    )
    with (
        localserve.testing.client(project, handler="main:handler", threads_per_process=2) as client,
        concurrent.futures.ThreadPoolExecutor(2) as pool,
    ):
        answers = list(pool.map(lambda _: client.post("/", json={}).json(), range(2)))
    assert answers == [{"ok": True}, {"ok": True}]


def test_run_gives_user_code_localserve_url_to_the_other_apis(make_project) -> None:
    """As ``localserve run``: ``$LOCALSERVE_URL/<other>`` reaches another API of the config (started on first use)."""
    front = (
        "import json, os, urllib.request\n\n\nclass PythonPredictor:\n    def __init__(self, config):\n        pass\n\n"
        "    def predict(self, payload):\n"
        "        with urllib.request.urlopen(os.environ['LOCALSERVE_URL'] + '/back', data=b'{}') as answer:\n"
        "            return {'front': json.load(answer)}\n"
    )
    back = 'class PythonPredictor:\n    def __init__(self, config):\n        pass\n\n    def predict(self):\n        return {"v": "back"}\n'
    config = "".join(
        f"- name: {n}\n  kind: RealtimeAPI\n  predictor: {{type: python, path: {n}.py}}\n" for n in ("front", "back")
    )
    project = make_project({"cortex.yaml": config, "front.py": front, "back.py": back})
    result = localserve.testing.run(project, input=b"{}", api="front", headers={"Content-Type": "application/json"})
    assert (result.status, result.json()) == (200, {"front": {"v": "back"}})


def test_requirements_are_installed_for_the_client_and_let_go_after(make_project, tmp_path: Path, monkeypatch) -> None:
    """requirements.txt installed into the cache (as serve does), importable inside, gone from sys.path after."""
    from tests.server.test_reload import wheel

    package = wheel(tmp_path, "1.0", 7)
    project = make_project(
        {
            "main.py": "import lsreload\n\n\ndef handler(request, context):\n"
            "    return {'content': {'value': lsreload.VALUE}}\n",
            "requirements.txt": f"{package}\n",
        }
    )
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # the wheel is a local file: no index is asked
    before = state()
    with localserve.testing.client(project, handler="main:handler", cache_dir=tmp_path / "cache") as client:
        assert client.post("/", json={}).json() == {"value": 7}
        assert any(path.startswith(str(tmp_path / "cache")) for path in sys.path)
    assert state() == before
    assert "lsreload" not in sys.modules
    with (  # install=False: nothing installed, nothing of the cache on sys.path
        pytest.raises(HandlerLoadError, match="No module named 'lsreload'"),
        localserve.testing.client(project, handler="main:handler", install=False, cache_dir=tmp_path / "cache"),
    ):
        pass  # pragma: no cover
    assert state() == before


def test_a_config_file_of_another_name(make_project) -> None:
    """``config=``: the file, relative to the project (or absolute), instead of cortex.yaml / localserve.yaml."""
    predictor = "class PythonPredictor:\n    def __init__(self, config):\n        self.n = config['n']\n\n"
    predictor += "    def predict(self, payload):\n        return {'n': self.n}\n"
    entry = "- name: {name}\n  kind: RealtimeAPI\n  predictor: {{type: python, path: p.py, config: {{n: {n}}}}}\n"
    project = make_project(
        {"p.py": predictor, "cortex.yaml": entry.format(name="main", n=1), "staging.yaml": entry.format(name="st", n=2)}
    )
    with localserve.testing.client(project, config="staging.yaml") as client:
        assert client.post("/st", json={}).json() == {"n": 2}
        assert client.post("/main", json={}).status_code == 404
    with localserve.testing.client(project, config=project / "cortex.yaml") as client:
        assert client.post("/main", json={}).json() == {"n": 1}
    result = localserve.testing.run(project, input=b"{}", config="staging.yaml", content_type="application/json")
    assert (result.status, result.json()) == (200, {"n": 2})


def test_a_second_thread_is_refused_a_project_while_another_thread_has_one(make_project) -> None:
    """A project sets process-wide state (cwd, sys.path, modules): a client for B from another thread while A's is
    open would answer from A's handler, so it is refused, naming both; A's client keeps answering, and B's works
    once A's is closed. Within one thread clients still nest (the localserve_client fixture's two clients)."""
    projects = {who: make_project({"main.py": MAIN.format(who=who), "value.txt": who}, name=who) for who in "AB"}
    opened, tried = threading.Event(), threading.Event()
    answers: list[str] = []

    def first() -> None:
        with localserve.testing.client(projects["A"], handler="main:handler") as client:
            opened.set()
            tried.wait(60)
            answers.append(client.post("/", json={}).json()["who"])

    thread = threading.Thread(target=first, name="first-client")
    thread.start()
    try:
        assert opened.wait(60)
        with pytest.raises(ProjectError) as refused, localserve.testing.client(projects["B"], handler="main:handler"):
            pass
    finally:
        tried.set()
        thread.join(60)
    assert str(refused.value) == (
        f"Project {str(projects['B'])!r} cannot be entered in thread 'MainThread': project {str(projects['A'])!r} "
        "is in use by thread 'first-client' of this process. A project sets the working directory, sys.path, "
        "environment and modules of the whole process, so one thread at a time may serve projects "
        "(localserve.testing.client and run): close the other first, or give each its own process (pytest-xdist, "
        "localserve serve)."
    )
    assert answers == ["A"]
    with localserve.testing.client(projects["B"], handler="main:handler") as client:
        assert client.post("/", json={}).json()["who"] == "B"
