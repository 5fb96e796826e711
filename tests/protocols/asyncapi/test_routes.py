"""Submit and poll through the real app (TestClient), every status, bad inputs, /readyz, /metrics, config."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from localserve.config import load_config
from localserve.errors import ConfigError
from localserve.server import ServeOptions
from tests.protocols.asyncapi.conftest import needs_redis

Poll = Callable[..., dict[str, Any]]
STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def wait_for(client: Any, job_id: str, *statuses: str) -> dict[str, Any]:
    """Poll until the job reaches one of ``statuses`` (a 60 s deadline only catches a hang)."""
    deadline = time.monotonic() + 60
    while True:
        reply = client.get(f"/jobs/{job_id}")
        assert reply.status_code == 200, reply.text
        body: dict[str, Any] = reply.json()
        if body["status"] in statuses:
            return body
        assert time.monotonic() < deadline, body
        time.sleep(0.01)


def submit(client: Any, payload: Any, path: str = "/jobs", **kwargs: Any) -> str:
    reply = client.post(path, json=payload, **kwargs)
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert list(body) == ["id"] and re.fullmatch(r"[0-9a-f]{32}", body["id"])
    return str(body["id"])


def test_submit_answers_an_id_and_poll_returns_the_result_with_a_timestamp(
    async_project: Callable[..., Path], serve: Callable[..., Any]
) -> None:
    with serve(async_project()) as client:
        job_id = submit(client, {"n": 1}, params={"mode": "fast"}, headers={"X-Agent": "tests"})
        body = wait_for(client, job_id, "completed")
        assert list(body) == ["id", "status", "result", "timestamp"]
        assert body["result"] == {"id": job_id, "payload": {"n": 1}, "query": {"mode": "fast"}, "agent": "tests"}
        assert STAMP.match(body["timestamp"]), body["timestamp"]
        # Text and bytes payloads decode as for a RealtimeAPI; /predict and / submit too (one API).
        text_id = client.post("/jobs/predict", content=b"hi", headers={"Content-Type": "text/plain"}).json()["id"]
        assert wait_for(client, text_id, "completed")["result"]["payload"] == "hi"
        root_id = client.post("/", content=b"\x00\x01", headers={"Content-Type": "application/octet-stream"}).json()
        assert wait_for(client, root_id["id"], "failed", "completed")["status"] == "failed"  # bytes are not JSON
        # GET /jobs still describes the API.
        assert client.get("/jobs").json()["status"] == "ready"


def test_in_queue_and_in_progress_with_one_thread_one_job_at_a_time(
    async_project: Callable[..., Path], serve: Callable[..., Any], tmp_path: Path
) -> None:
    with serve(async_project()) as client:
        first = submit(client, {"wait": True})
        wait_for(client, first, "in_progress")
        second = submit(client, {"n": 2})
        assert client.get(f"/jobs/{second}").json() == {"id": second, "status": "in_queue"}
        metrics = client.get("/metrics").text
        assert 'localserve_async_jobs{api="jobs",status="in_queue"} 1.0' in metrics
        assert 'localserve_async_jobs{api="jobs",status="in_progress"} 1.0' in metrics
        (tmp_path / "gate").touch()
        assert wait_for(client, first, "completed")["result"]["payload"] == {"wait": True}
        assert wait_for(client, second, "completed")["result"]["payload"] == {"n": 2}
        metrics = client.get("/metrics").text
        assert 'localserve_async_job_duration_seconds_count{api="jobs",status="completed"} 2.0' in metrics
        assert 'localserve_async_jobs{api="jobs",status="in_queue"} 0.0' in metrics
        assert 'localserve_async_store_up{api="jobs"} 1.0' in metrics


def test_a_raising_predictor_fails_its_job_and_the_worker_goes_on(
    async_project: Callable[..., Path], serve: Callable[..., Any]
) -> None:
    with serve(async_project()) as client:
        bad = submit(client, {"fail": "no"})
        unjsonable = submit(client, {"unjsonable": True})
        bad_name = submit(client, {"bad_name": True})
        good = submit(client, {"n": 3})
        failed = wait_for(client, bad, "failed")
        assert list(failed) == ["id", "status", "error", "timestamp"]
        assert failed["error"] == "PythonPredictor.predict raised ValueError: boom: no"
        assert STAMP.match(failed["timestamp"])
        assert wait_for(client, unjsonable, "failed")["error"] == (
            "PythonPredictor.predict returned a dict, which is not JSON-serialisable (Object of type type is not "
            "JSON serializable); an AsyncAPI's predict must return JSON-parseable objects (dict, list, str, int, "
            "float, bool, None)."
        )
        # A lone surrogate in the error (UTF-8 cannot store it) is kept as its escape; the job still fails.
        assert wait_for(client, bad_name, "failed")["error"] == (
            "PythonPredictor.predict raised ValueError: cannot read /data/\\udcff.bin"
        )
        assert wait_for(client, good, "completed")["result"]["payload"] == {"n": 3}
        assert (
            'localserve_async_job_duration_seconds_count{api="jobs",status="failed"} 3.0' in client.get("/metrics").text
        )


def test_unknown_and_malformed_ids(async_project: Callable[..., Path], serve: Callable[..., Any]) -> None:
    with serve(async_project()) as client:
        unknown = "0123456789abcdef" * 2
        reply = client.get(f"/jobs/{unknown}")
        expected = {"id": unknown, "status": "not_found", "error": f"id {unknown} not found"}
        assert (reply.status_code, reply.json()) == (404, expected)  # Cortex 0.35+'s 404, with its words
        reply = client.get("/jobs/not-an-id", headers={"X-Request-ID": "r1"})
        assert reply.status_code == 400
        assert reply.json() == {
            "error": "Invalid job id 'not-an-id'; expected the 32 lower-case hex characters that POST /jobs answered.",
            "request_id": "r1",
        }
        stats = client.get("/jobs/stats").json()
        assert stats["api"] == "jobs"  # the API's own routes keep their meaning
        assert stats["requests"] == {"2xx": 0, "4xx": 2, "5xx": 0}  # the polls (a 404 and a 400) count as its requests
        reply = client.get(f"/jobs/{unknown}%0a")  # a trailing newline: no id ($ let it through as a 404)
        assert reply.status_code == 400, reply.text
        reply = client.get("/jobs/" + "a" * 60_000)
        assert reply.status_code == 400 and len(reply.json()["error"]) < 200  # the id is not echoed whole


def test_a_job_route_takes_get_head_and_options_and_answers_other_methods_405(
    async_project: Callable[..., Path], serve: Callable[..., Any]
) -> None:
    with serve(async_project()) as client:
        job_id = submit(client, {"n": 1})
        wait_for(client, job_id, "completed")
        head = client.head(f"/jobs/{job_id}")
        assert (head.status_code, head.content) == (200, b"")
        assert int(head.headers["content-length"]) == len(client.get(f"/jobs/{job_id}").content)
        options = client.options(f"/jobs/{job_id}")
        assert (options.status_code, options.headers["allow"]) == (204, "GET, HEAD, OPTIONS")
        for method in ("DELETE", "PUT", "POST", "PATCH"):
            reply = client.request(method, f"/jobs/{job_id}", headers={"X-Request-ID": "m1"})
            assert (reply.status_code, reply.headers["allow"]) == (405, "GET, HEAD, OPTIONS"), method
            assert reply.json() == {
                "error": f"Method {method} is not allowed on /jobs/{job_id}; it takes GET, HEAD, OPTIONS.",
                "request_id": "m1",
            }
        assert client.get(f"/jobs/{job_id}").json()["status"] == "completed"  # nothing was deleted or replaced


def test_a_body_over_the_limit_is_413_and_stores_nothing(
    async_project: Callable[..., Path], serve: Callable[..., Any]
) -> None:
    with serve(async_project(), ServeOptions(max_body_size=1000)) as client:
        reply = client.post("/jobs", content=b"x" * 1001, headers={"X-Request-ID": "r2"})
        assert reply.status_code == 413
        assert reply.json() == {
            "error": "The request body is too large: 1001 bytes; the limit is 1000 bytes (--max-body-size).",
            "request_id": "r2",
        }
        assert 'localserve_async_jobs{api="jobs",status="in_queue"} 0.0' in client.get("/metrics").text


def test_a_full_store_is_503_at_submit_and_no_id_is_given(
    async_project: Callable[..., Path], serve: Callable[..., Any], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "small.sqlite3"
    project = async_project(f"  async_store: sqlite://{path}?max_bytes=65536\n")
    with serve(project) as client:
        reply = client.post("/jobs", content=b"x" * 200_000, headers={"X-Request-ID": "r3"})
        assert reply.status_code == 503 and reply.headers["retry-after"] == "1"
        assert reply.json() == {  # the path is the server's: the log has it, the client not
            "error": "The job was not stored: the job store is full (max_bytes=65536); try again once old jobs are "
            "purged.",
            "request_id": "r3",
        }
        assert f"The job store {path} is full (max_bytes=65536)" in caplog.text  # the log has the details
        assert 'localserve_async_jobs{api="jobs",status="in_queue"} 0.0' in client.get("/metrics").text
        assert wait_for(client, submit(client, {"n": 4}), "completed")["result"]["payload"] == {"n": 4}


@needs_redis
def test_the_redis_store_from_the_config(
    async_project: Callable[..., Path], serve: Callable[..., Any], redis_url: str
) -> None:
    with serve(async_project(f"  async_store: {redis_url}\n")) as client:
        ok, bad = submit(client, {"n": 5}), submit(client, {"fail": "r"})
        assert wait_for(client, ok, "completed")["result"]["payload"] == {"n": 5}
        assert wait_for(client, bad, "failed")["error"] == "PythonPredictor.predict raised ValueError: boom: r"
        assert client.get(f"/jobs/{'f' * 32}").json()["status"] == "not_found"
        assert (
            'localserve_async_job_duration_seconds_count{api="jobs",status="completed"} 1.0'
            in client.get("/metrics").text
        )


@needs_redis
def test_readyz_fails_and_submit_is_503_while_the_store_is_unreachable(
    async_project: Callable[..., Path], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from starlette.testclient import TestClient

    from localserve.server import create_app
    from tests.conftest import free_port

    port = free_port()  # nothing listens there
    project = async_project(f"  async_store: redis://127.0.0.1:{port}/0\n")
    monkeypatch.chdir(project)
    monkeypatch.syspath_prepend(str(project))
    app = create_app(load_config(project))
    with TestClient(app, raise_server_exceptions=False) as client:
        deadline = time.monotonic() + 60
        while app.apis["jobs"].state != "ready":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        reply = client.get("/readyz")
        assert reply.status_code == 503
        body = reply.json()
        assert body["status"] == "not ready"
        assert body["apis"]["jobs"]["status"] == "ready"
        assert body["apis"]["jobs"]["store"] == "the job store could not be reached (the server log has the details)"
        reply = client.post("/jobs", json={"n": 1})
        assert reply.status_code == 503
        assert reply.json()["error"] == (
            "The job was not stored: the job store could not be written (the server log has the details)."
        )
        reply = client.get(f"/jobs/{'0' * 32}")  # a poll: what failed, without the store's address (item 7)
        assert (reply.status_code, reply.json()["error"]) == (
            503,
            "The job could not be read: the job store could not be read (the server log has the details).",
        )
        assert f"127.0.0.1:{port}" not in reply.text and f"127.0.0.1:{port}" in caplog.text  # the log has it
        assert 'localserve_async_store_up{api="jobs"} 0.0' in client.get("/metrics").text


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            "- kind: RealtimeAPI\n  name: rt\n  predictor: {type: python, path: p.py}\n  async_store: redis://h:1/0\n",
            "cortex.yaml: api 'rt': 'async_store' applies only to 'kind: AsyncAPI'; remove it or change 'kind'.",
        ),
        (
            "- kind: AsyncAPI\n  name: a\n  predictor: {type: python, path: p.py, server_side_batching: "
            "{max_batch_size: 2, batch_interval: 1ms}}\n",
            "cortex.yaml: api 'a': batching does not apply to 'kind: AsyncAPI' (each job runs predict once with its "
            "own payload); remove 'batching' / 'server_side_batching', or use 'kind: RealtimeAPI'.",
        ),
        (
            "- kind: AsyncAPI\n  name: a\n  predictor: {type: python, path: p.py}\n  async_store: mysql://db\n",
            "cortex.yaml: api 'a': invalid value 'mysql://db' for 'async_store'; expected sqlite:///ABSOLUTE/PATH or "
            "redis://HOST:PORT/DB.",
        ),
        (
            "- kind: AsyncAPI\n  name: a\n  predictor: {type: python, path: p.py}\n  async_retention: forever\n",
            "cortex.yaml, line 4: api 'a': invalid value 'forever' for 'async_retention'; expected a duration above 0 "
            "such as 7d, 12h or 30m.",
        ),
    ],
)
def test_config_errors(entry: str, message: str, make_project: Callable[..., Path]) -> None:
    project = make_project({"cortex.yaml": entry, "p.py": ""})
    with pytest.raises(ConfigError) as caught:
        load_config(project)
    assert str(caught.value) == message


def test_config_keys_and_the_command_line_store(make_project: Callable[..., Path]) -> None:
    from localserve.protocols.asyncapi.config import with_async_store

    project = make_project(
        {
            "cortex.yaml": "- kind: AsyncAPI\n  name: a\n  predictor: {type: python, path: p.py}\n"
            "  async_retention: 12h\n- kind: RealtimeAPI\n  name: b\n  predictor: {type: python, path: p.py}\n",
            "p.py": "",
        }
    )
    config = load_config(project)
    a, b = config.apis
    assert (a.is_async, a.async_store, a.async_retention) == (True, None, 12 * 3600.0)
    assert (b.is_async, b.async_retention) == (False, 7 * 86400.0)
    flagged = with_async_store(config, "redis://10.0.0.5:6379/2")
    assert [api.async_store for api in flagged.apis] == ["redis://10.0.0.5:6379/2", None]
    with pytest.raises(ConfigError) as caught:
        with_async_store(config, "memory")
    assert str(caught.value) == (
        "Invalid --async-store 'memory'; expected redis://HOST:PORT/DB or sqlite:///ABSOLUTE/PATH."
    )
    with pytest.raises(ConfigError) as caught:
        with_async_store(config.only(["b"]), "redis://h:1/0")
    assert str(caught.value) == "--async-store 'redis://h:1/0' is given, but cortex.yaml has no 'kind: AsyncAPI' API."


def test_json_body_of_a_completed_poll_is_valid_json(
    async_project: Callable[..., Path], serve: Callable[..., Any]
) -> None:
    with serve(async_project()) as client:
        job_id = submit(client, {"text": 'quote " and unicode é'})
        wait_for(client, job_id, "completed")
        raw = client.get(f"/jobs/{job_id}").content
        assert json.loads(raw)["result"]["payload"] == {"text": 'quote " and unicode é'}


def test_stats_and_localserve_get_show_the_jobs(async_project: Callable[..., Path], serve: Callable[..., Any]) -> None:
    from localserve.cli.get_tables import render_get

    with serve(async_project()) as client:
        ok, bad = submit(client, {"n": 1}), submit(client, {"fail": "x"})
        wait_for(client, ok, "completed")
        wait_for(client, bad, "failed")
        jobs = client.get("/jobs/stats").json()["jobs"]
        mean = jobs.pop("mean_seconds")
        assert jobs == {"in_queue": 0, "in_progress": 0, "completed": 1, "failed": 1}
        assert isinstance(mean, float) and mean >= 0
        (entry,) = client.get("/stats").json()
        assert entry["jobs"]["completed"] == 1
    entry["jobs"]["mean_seconds"] = 0.0125
    assert render_get(entry).split("\n\n")[1] == (
        "jobs: jobs\n"
        "in_queue  in_progress  completed  failed      mean\n"
        "       0            0          1       1  12.50 ms"
    )


def test_an_onnx_predictor_runs_as_an_asyncapi(make_project: Callable[..., Path], serve: Callable[..., Any]) -> None:
    import numpy as np

    from tests.models import linear_reference, onnx_linear

    predictor = (
        "class ONNXPredictor:\n"
        "    def __init__(self, onnx_client, config):\n"
        "        self.client = onnx_client\n\n"
        "    def predict(self, payload, request_id):\n"
        "        probabilities, logits = self.client.predict({'x': payload['x']})\n"
        "        return probabilities if payload.get('raw') else {'p': probabilities.tolist(), 'id': request_id}\n"
    )
    config = "- kind: AsyncAPI\n  name: jobs\n  predictor: {type: onnx, path: predictor.py, models: {path: lin.onnx}}\n"
    project = make_project({"cortex.yaml": config, "predictor.py": predictor})
    onnx_linear(project / "lin.onnx")
    with serve(project) as client:
        ok = submit(client, {"x": [[1, 2, 3, 4]]})
        short = submit(client, {"x": [1, 2]})
        raw = submit(client, {"x": [[1, 2, 3, 4]], "raw": True})
        done = wait_for(client, ok, "completed")["result"]
        assert done["id"] == ok
        assert np.allclose(done["p"], linear_reference([[1, 2, 3, 4]])[0], atol=1e-6)
        assert wait_for(client, short, "failed")["error"] == (
            "Input 'x' expects float32 of shape [-1, 4]; got a list of 2 numbers."
        )
        assert wait_for(client, raw, "failed")["error"] == (
            "ONNXPredictor.predict returned a numpy.ndarray, which is not JSON-serialisable (Object of type ndarray "
            "is not JSON serializable); an AsyncAPI's predict must return JSON-parseable objects (dict, list, str, "
            "int, float, bool, None)."
        )


def test_an_api_that_failed_to_load_takes_no_jobs(
    make_project: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from starlette.testclient import TestClient

    from localserve.server import create_app

    predictor = (
        "class PythonPredictor:\n    def __init__(self, config):\n        raise RuntimeError('no model')\n\n"
        "    def predict(self, payload):\n        return 1\n"
    )
    config = "- kind: AsyncAPI\n  name: jobs\n  predictor: {type: python, path: predictor.py}\n"
    project = make_project({"cortex.yaml": config, "predictor.py": predictor})
    monkeypatch.chdir(project)
    app = create_app(load_config(project), ServeOptions(keep_going=True))
    with TestClient(app, raise_server_exceptions=False) as client:
        deadline = time.monotonic() + 60
        while app.apis["jobs"].state != "failed":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        reply = client.post("/jobs", json={}, headers={"X-Request-ID": "r4"})
        assert reply.status_code == 503
        assert reply.json() == {
            "error": "api 'jobs' failed to load, so it takes no jobs: PythonPredictor.__init__ raised RuntimeError: "
            "no model",
            "request_id": "r4",
        }
