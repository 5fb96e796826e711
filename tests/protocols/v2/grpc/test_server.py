"""The gRPC server of one replica: a port it cannot bind stops the start; a stop refuses new calls and lets those in
flight finish."""

from __future__ import annotations

import concurrent.futures

import pytest
import tritonclient.grpc as triton

from localserve.config.options import ServeOptions
from tests.protocols.v2.grpc.test_grpc_engine import grpc_app, grpc_status, row_input, wait_for


def test_shutdown_refuses_new_calls_and_lets_those_in_flight_finish(serve, make_project) -> None:
    with grpc_app(serve, make_project, "") as (client, h, target), concurrent.futures.ThreadPoolExecutor(2) as pool:
        grpc_client = triton.InferenceServerClient(target)
        blocked = pool.submit(client.post, "/echo", json={"block": True, "x": [[0.0] * 4]})
        assert h.started.wait(10)
        in_flight = pool.submit(grpc_client.infer, "echo", [row_input([1.0] * 4)])
        pipeline = client.app.apis["echo"].pipeline
        wait_for(lambda: pipeline.queue.depth == 1, "the request never queued")
        client.portal.call(client.app.shutdown.begin)  # what SIGTERM does, on the app's event loop
        assert grpc_status(lambda: grpc_client.infer("echo", [row_input([2.0] * 4)])) == (
            "StatusCode.UNAVAILABLE",
            "The server is shutting down: the request had not started and never will; retry on another replica or "
            "later.",
        )
        assert grpc_client.is_server_live() and not grpc_client.is_server_ready()
        h.release.set()
        assert blocked.result(30).status_code == 200
        assert in_flight.result(30).as_numpy("y").tolist() == [[2.0] * 4]  # x + the batch size it ran at (1)
        grpc_client.close()


def test_a_taken_port_stops_the_start(make_project, monkeypatch) -> None:
    import socket

    from starlette.testclient import TestClient

    from localserve.config import load_config
    from localserve.server import create_app

    project = make_project({"cortex.yaml": "- {kind: api, name: broken, model: missing.onnx}\n"})
    monkeypatch.chdir(project)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        app = create_app(load_config(project), ServeOptions(keep_going=True, grpc_port=port))
        with pytest.raises(Exception) as caught, TestClient(app):
            pass
    assert str(caught.value).startswith(f"Cannot serve gRPC on 127.0.0.1:{port} (--grpc-port): ")
