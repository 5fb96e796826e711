"""List batching: a predictor with ``batching`` gets the queued requests' payloads as one list, and must answer each."""

from __future__ import annotations

import concurrent.futures

from tests.conftest import wait_until
from tests.handlers.test_predictor import project_with


def test_batched_predictor_gets_lists_and_must_return_one_per_payload(serve, make_project) -> None:
    project = project_with(
        make_project,
        """
        import threading
        batches = []
        started = threading.Event()
        release = threading.Event()

        class PythonPredictor:
            def __init__(self, config):
                pass

            def predict(self, payload):
                batches.append(list(payload))
                if payload == ["block"]:
                    started.set()
                    release.wait(20)
                    return ["released"]
                if any(p == "short" for p in payload):
                    return payload[:-1]
                if "dict" in payload:
                    return {}
                return [p * 2 for p in payload]
        """,
        extra="batching: {max_batch_size: 4, batch_interval: 10s}",
    )
    with serve(project) as client:
        import predictor

        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            first = pool.submit(client.post, "/pred", json="block")
            assert predictor.started.wait(10)
            queued = [pool.submit(client.post, "/pred", json=v) for v in (1, 2, 3)]
            pipeline = client.app.apis["pred"].pipeline
            wait_until(lambda: pipeline.queue.depth == 3, "the three requests queued")
            predictor.release.set()
            assert first.result(30).text == "released"
            assert sorted(q.result(30).json() for q in queued) == [2, 4, 6]
        assert predictor.batches[0] == ["block"] and sorted(predictor.batches[1]) == [1, 2, 3]
        assert len(predictor.batches) == 2  # the three queued requests were one call
        short = client.post("/pred", json="short")
        assert short.status_code == 500
        assert short.json()["error"] == (
            "PythonPredictor.predict received a batch of 1 payloads (batching is on) and must return a list "
            "of 1 predictions; it returned a list of 0."
        )
        not_a_list = client.post("/pred", json="dict")
        assert not_a_list.json()["error"].endswith("it returned a dict.")
