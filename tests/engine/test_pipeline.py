"""The threads of an API: one request at a time or more on request, pinned workers, the model's batches,
and work handed to a stopped API failing at once instead of never running."""

from __future__ import annotations

import collections
import concurrent.futures
import os
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import numpy as np

import localserve.engine
import localserve.engine.pipeline
from localserve.config import ApiConfig
from localserve.engine.pipeline import Pipeline
from localserve.errors import ShuttingDown
from tests.conftest import wait_until as wait_for
from tests.models import ECHO_HANDLER, onnx_batch_echo


def post_async(client, body: str, results: dict) -> threading.Thread:
    thread = threading.Thread(target=lambda: results.__setitem__(body, client.post("/", content=body.encode())))
    thread.start()
    return thread


def test_one_request_at_a_time_by_default_and_more_threads_on_request(serve, make_project) -> None:
    project = make_project(
        {
            "main.py": """
            import threading
            lock = threading.Lock()
            release = threading.Event()
            active = 0
            peak = 0

            def handler(request, context):
                global active, peak
                with lock:
                    active += 1
                    peak = max(peak, active)
                release.wait(120)  # held until the test has seen how many run at once
                with lock:
                    active -= 1
                return {"content": str(peak)}
            """
        }
    )
    for threads in (None, 4):
        flags = {"threads_per_process": threads} if threads else {}
        with serve(project, handler="main:handler", **flags) as client:
            import main

            main.peak = 0
            main.release.clear()
            pipeline = client.app.apis["proj"].pipeline
            results: dict = {}
            workers = []
            for i in range(4):  # one at a time, so that no thread takes two requests from the queue at once
                workers.append(post_async(client, f"r{i}", results))
                if threads:
                    wait_for(lambda i=i: main.active == i + 1, f"{i + 1} requests running at once")
                elif i == 0:
                    wait_for(lambda: main.active == 1, "the first request running")
                else:
                    wait_for(
                        lambda i=i, pipeline=pipeline: pipeline.queue.depth == i,
                        f"{i} requests queued behind the first",
                    )
            assert (main.active, pipeline.queue.depth) == ((4, 0) if threads else (1, 3))
            main.release.set()
            for worker in workers:
                worker.join(60)
            assert sorted(r.status_code for r in results.values()) == [200] * 4
            assert main.peak == (threads or 1)


def test_pin_threads_moves_workers_to_one_core_after_loading(serve, make_project) -> None:

    from localserve.server import ServeOptions

    project = make_project(
        {
            "main.py": """
            import os, threading
            go = threading.Event()
            seen = {}

            def pool_thread():  # like a runtime's thread pool, made while the model loads
                go.wait(60)
                seen["pool"] = sorted(os.sched_getaffinity(0))

            threading.Thread(target=pool_thread, daemon=True).start()

            def handler(request, context):
                go.set()
                return {"content_type": "application/json", "content": {"worker": sorted(os.sched_getaffinity(0))}}
            """
        }
    )
    with serve(project, ServeOptions(pin_threads=True), handler="main:handler") as client:
        import main

        worker = client.post("/").json()["worker"]
        wait_for(lambda: "pool" in main.seen, "the pool thread ran")
    allowed = sorted(os.sched_getaffinity(0))
    assert worker == allowed[:1]
    assert main.seen["pool"] == allowed


ECHO_CONFIG = """
- kind: api
  name: echo
  model: echo.onnx
  request_handler: h.py
  batching: {{max_batch_size: {max}, batch_interval: 10s{sizes}}}
"""


def echo_project(make_project, max_batch_size: int, batch_sizes: str = ""):
    project = make_project(
        {
            "localserve.yaml": ECHO_CONFIG.format(max=max_batch_size, sizes=batch_sizes),
            "h.py": ECHO_HANDLER,
        }
    )
    onnx_batch_echo(project / "echo.onnx")
    return project


def burst(client, rows: list[list[list[float]]]) -> list[httpx.Response]:
    """One blocked request, then ``rows`` queued behind it, then released: the model sees them together."""
    import h

    pool = concurrent.futures.ThreadPoolExecutor(len(rows) + 1)
    first = pool.submit(client.post, "/echo", json={"block": True, "x": [[0.0, 0.0, 0.0, 0.0]]})
    assert h.started.wait(60)
    others = [pool.submit(client.post, "/echo", json={"x": x}) for x in rows]
    pipeline = client.app.apis["echo"].pipeline
    wait_for(lambda: pipeline.queue.depth == len(rows), f"{len(rows)} requests queued")
    h.release.set()
    responses = [first.result(30), *(f.result(30) for f in others)]
    pool.shutdown()
    return responses


def seen_batch(response: httpx.Response, x: list[list[float]]) -> int:
    """The batch size the model ran this request's rows at (the echo model adds it to every value)."""
    assert response.status_code == 200, response.text
    y = np.asarray(response.json()["y"])
    sizes = set((y - np.asarray(x)).ravel().tolist())
    assert len(sizes) == 1, sizes
    return int(sizes.pop())


def test_a_burst_runs_as_one_padded_batch(serve, make_project) -> None:
    project = echo_project(make_project, 8)
    rows = [[[float(i), 1.0, 2.0, 3.0]] for i in range(1, 7)]  # 6 queued + the blocked one: 7 rows
    with serve(project) as client:
        responses = burst(client, rows)
        metrics = client.get("/metrics").text
    assert {seen_batch(r, x) for r, x in zip(responses, [[[0.0] * 4], *rows], strict=True)} == {8}
    assert 'localserve_batch_size_count{api="echo"} 1.0' in metrics  # one model call for 7 requests


def test_a_burst_larger_than_the_largest_bucket_is_split_and_padded(serve, make_project) -> None:
    project = echo_project(make_project, 4)
    rows = [[[float(i), 0.0, 0.0, 0.0]] for i in range(1, 6)]  # 6 rows in all: runs of 4 and 2
    with serve(project) as client:
        responses = burst(client, rows)
    sizes = [seen_batch(r, x) for r, x in zip(responses, [[[0.0] * 4], *rows], strict=True)]
    assert sorted(sizes) == [2, 2, 4, 4, 4, 4]


def test_a_batching_api_spins_its_model_pool_across_the_batch_interval(serve, make_project) -> None:
    project = echo_project(make_project, 4)  # batch_interval 10s: the spin stops at its limit, 20 ms
    with serve(project) as client:
        session = client.app.apis["echo"].endpoint.model.session
        spin = session.get_session_options().get_session_config_entry("session.intra_op.spin_duration_us")
    assert spin == "20000"


def test_configured_batch_sizes_are_the_only_sizes_the_model_sees(serve, make_project) -> None:
    project = echo_project(make_project, 6, ", batch_sizes: [1, 6]")
    rows = [[[float(i), 0.0, 0.0, 0.0]] for i in range(1, 3)]  # 3 rows: padded to 6
    with serve(project) as client:
        responses = burst(client, rows)
        lone = client.post("/echo", json={"x": [[1.0, 1.0, 1.0, 1.0], [2.0, 2.0, 2.0, 2.0]]})
    assert {seen_batch(r, x) for r, x in zip(responses, [[[0.0] * 4], *rows], strict=True)} == {6}
    assert seen_batch(lone, [[1.0] * 4, [2.0] * 4]) == 6  # a lone request of 2 rows is padded too


PIPELINED_HANDLER = """
import threading
started = threading.Event()
release = threading.Event()
model_ran = threading.Event()  # set by the test when the model runs

def pre_inference(sample, metadata):
    if sample.get("block"):
        started.set()
        release.wait(120)
    if sample.get("last"):  # the last request of the burst is prepared only once a batch has run
        assert model_ran.wait(120), "the model ran no batch while the thread prepared the rest"
    return sample["x"]

def post_inference(prediction, metadata):
    return {"y": prediction[0].tolist()}
"""


def test_the_model_runs_a_full_batch_while_the_thread_prepares_the_next(serve, make_project) -> None:
    """A thread takes one batch of requests from the queue at a time and hands it to the model before
    preparing more, and the model runs whole batches: 7 requests behind a blocked one, batches of 2."""
    project = echo_project(make_project, 2)
    (project / "h.py").write_text(PIPELINED_HANDLER)
    rows = [[[float(i), 0.0, 0.0, 0.0]] for i in range(1, 8)]
    with serve(project) as client:
        import h

        batcher = client.app.apis["echo"].pipeline.batcher
        observe = batcher.observe
        sizes: list[int] = []

        def seen(rows: int) -> None:
            sizes.append(rows)
            h.model_ran.set()
            if observe is not None:
                observe(rows)

        batcher.observe = seen
        pool = concurrent.futures.ThreadPoolExecutor(8)
        first = pool.submit(client.post, "/echo", json={"block": True, "x": [[0.0] * 4]})
        assert h.started.wait(60)
        others = []
        for i, x in enumerate(rows, 1):  # one by one: the "last" request must be queued last (a busy machine reorders)
            others.append(pool.submit(client.post, "/echo", json={"x": x, "last": i == 7}))
            wait_for(lambda i=i: client.app.apis["echo"].pipeline.queue.depth == i, f"{i} requests queued")
        h.release.set()
        responses = [first.result(30), *(f.result(30) for f in others)]
        pool.shutdown()
    assert [seen_batch(r, x) for r, x in zip(responses, [[[0.0] * 4], *rows], strict=True)] == [2] * 8
    assert sizes == [2, 2, 2, 2]


def test_a_lone_request_runs_at_once_at_its_own_bucket(serve, make_project) -> None:
    project = echo_project(make_project, 8)
    with serve(project) as client:
        sizes = [seen_batch(client.post("/echo", json={"x": [[1.0, 2.0, 3.0, 4.0]]}), [[1.0, 2.0, 3.0, 4.0]])]
        sizes.append(seen_batch(client.post("/echo", json={"x": [[0.0] * 4] * 3}), [[0.0] * 4] * 3))
    assert sizes == [1, 4]


def engine_calls_on_the_thread(client, api: str, requests: int) -> collections.Counter[str]:
    """The functions of ``localserve.engine`` the API's thread called while serving ``requests`` lone requests."""
    engine = str(Path(localserve.engine.__file__).parent)
    calls: collections.Counter[str] = collections.Counter()

    def profile(frame: Any, event: str, _: Any) -> None:
        if event == "call" and frame.f_code.co_filename.startswith(engine):
            calls[frame.f_code.co_name] += 1

    pipeline = client.app.apis[api].pipeline
    pipeline.call(lambda: sys.setprofile(profile)).result(60)  # a profile sees the thread that sets it
    for _ in range(requests):  # one after the other: each is alone on the thread
        assert client.post(f"/{api}", json={"x": [[1.0, 2.0, 3.0, 4.0]]}).status_code == 200
    pipeline.call(lambda: sys.setprofile(None)).result(60)
    return calls


def test_batching_adds_a_lone_request_only_the_batchers_few_calls(serve, make_project, monkeypatch) -> None:
    # At concurrency 1 every request is lone: what batching adds to its thread's work shows in its throughput against
    # the same API without batching (the profile's own start and end cancel out between one request and three).
    # A request slower than ANSWER_AFTER (a loaded machine) is answered early, through one more call of each of
    # `prepared` and `answer`: the counts here are those of the usual path, whatever the machine's speed.
    monkeypatch.setattr(localserve.engine.pipeline, "ANSWER_AFTER", 3600.0)
    project = echo_project(make_project, 8)
    straight = "- kind: api\n  name: straight\n  model: echo.onnx\n  request_handler: h.py\n"  # the same, unbatched
    (project / "localserve.yaml").write_text((project / "localserve.yaml").read_text() + straight)
    with serve(project) as client:
        per_request = {}
        for api in ("echo", "straight"):
            one, three = (engine_calls_on_the_thread(client, api, n) for n in (1, 3))
            per_request[api] = collections.Counter({k: (three[k] - one[k]) // 2 for k in three if three[k] != one[k]})
    added = per_request["echo"] - per_request["straight"]
    assert added == collections.Counter(
        ["_begin_batched", "submit", "upstream", "run", "lone_rows", "_run", "finish_all"]
    )
    assert per_request["straight"] - per_request["echo"] == collections.Counter(["_begin_straight"])


class Endpoint:
    models = None


def test_a_call_handed_to_a_stopped_pipeline_fails_at_once() -> None:
    """An AsyncAPI job dispatched to a runtime that serve --reload retired a moment before: queued after the
    threads' ends it would never run, and the job would hold its worker's slot for ever."""
    pipeline = Pipeline(ApiConfig(name="api"), Endpoint())  # type: ignore[arg-type]
    pipeline.start()
    assert pipeline.call(lambda: "ran").result(timeout=60) == "ran"
    pipeline.stop()

    refused = pipeline.call(lambda: "ran")

    assert refused.done() and isinstance(refused.exception(), ShuttingDown)
    assert pipeline.join(60) == []


def test_each_batched_request_finishes_in_its_own_context() -> None:
    """The last stage runs in its request's context (its id on log lines): entered once per job, the job whose
    context the thread is already in skipped, whatever order the outcomes come in."""
    import asyncio
    import contextvars

    from localserve.engine.job import Job
    from localserve.logs import request_id_var
    from localserve.messages.request import Request

    seen: list[tuple[str, str | None]] = []

    class Finish:
        rows, ran = 1, None

        def prepare(self, request: Request) -> Any:
            return None

        def finish(self, request: Request, output: Any) -> Any:
            seen.append((request.request_id, request_id_var.get()))
            return output

    def api_thread() -> None:  # run in a context of its own: the ids it sets stay out of later tests
        loop = asyncio.new_event_loop()
        try:
            jobs = [Job(Request("POST", [], b"", request_id=i), loop, Finish()) for i in "ab"]
            pipeline = Pipeline(ApiConfig(name="ctx"), endpoint=None)  # type: ignore[arg-type]
            pipeline._enter(jobs[1])  # the thread prepared b last: it is in b's context
            pipeline.finish_all([(jobs[0], 1), (jobs[1], 2)], [], entered=jobs[1])
        finally:
            loop.close()

    contextvars.Context().run(api_thread)
    assert seen == [("a", "a"), ("b", "b")]
    assert request_id_var.get() is None
