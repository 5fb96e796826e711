"""An API's lifecycle: admission (503), the deadline (504), dropped work, a deadline against a claimed answer."""

from __future__ import annotations

import logging
import threading

import pytest

from localserve.engine import lifecycle
from tests.conftest import wait_until as wait_for

BLOCKING = """
import threading

entered = threading.Event()
release = threading.Event()
calls = []

def handler(request, context):
    body = request.read().decode()
    calls.append(body)
    if body.startswith("block"):
        entered.set()
        release.wait(120)  # the bound only catches a hang
    return {"content": body}
"""


def post_async(client, body: str, results: dict) -> threading.Thread:
    thread = threading.Thread(target=lambda: results.__setitem__(body, client.post("/", content=body.encode())))
    thread.start()
    return thread


def test_full_queue_answers_503_with_retry_after_at_once(serve, make_project, monkeypatch, caplog) -> None:
    clock = [1000.0]
    monkeypatch.setattr(lifecycle, "_clock", lambda: clock[0])
    project = make_project({"main.py": BLOCKING})
    with serve(project, handler="main:handler", max_queue=1) as client, caplog.at_level(logging.WARNING, "localserve"):
        import main

        results: dict = {}
        first = post_async(client, "block", results)
        assert main.entered.wait(60)
        second = post_async(client, "queued", results)
        wait_for(lambda: client.app.apis["proj"].pipeline.queue.depth == 1, "the second request queued")
        response = client.post("/", content=b"overflow", headers={"X-Request-ID": "o1"})
        assert results == {}  # answered at once: the worker still holds "block", "queued" still waits
        assert response.status_code == 503
        assert response.headers["retry-after"] == "1"
        assert response.json() == {
            "error": "API 'proj' is at capacity: 1 requests are already queued (max_queue); retry later.",
            "request_id": "o1",
        }
        assert 'localserve_queue_depth{api="proj"} 1.0' in client.get("/metrics").text
        # The log tells the first 503 of a full queue at once, then counts them: one line a minute at most.
        assert client.post("/", content=b"overflow").status_code == 503
        clock[0] += lifecycle.CAPACITY_WARNING_EVERY
        assert client.post("/", content=b"overflow").status_code == 503
        assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
            "api 'proj' is at capacity: 1 requests are queued in this replica (max_queue), so new ones are answered "
            "503 with Retry-After; raise max_queue, run more replicas (--replicas), or send fewer requests at once",
            "api 'proj': 2 more request(s) answered 503 at capacity (max_queue 1) since the last warning",
        ]
        main.release.set()
        first.join(60)
        second.join(60)
        assert 'localserve_queue_depth{api="proj"} 0.0' in client.get("/metrics").text  # told by the worker
        assert results["block"].text == "block" and results["queued"].text == "queued"
        assert "overflow" not in main.calls


def test_timeout_is_504_and_unstarted_work_is_dropped(serve, make_project) -> None:
    project = make_project({"main.py": BLOCKING})
    with serve(project, handler="main:handler", timeout=1) as client:
        import main

        results: dict = {}
        first = post_async(client, "block", results)
        assert main.entered.wait(60)
        second = post_async(client, "never", results)
        wait_for(lambda: client.app.apis["proj"].pipeline.queue.depth == 1, "the second request queued")
        first.join(60)
        second.join(60)
        assert results["block"].status_code == 504
        assert results["block"].json()["error"] == (
            "api 'proj' did not answer within its timeout of 1 s (it was still running)."
        )
        assert results["never"].status_code == 504
        assert results["never"].json()["error"] == (
            "api 'proj' did not answer within its timeout of 1 s (it had not started and was dropped)."
        )
        main.release.set()
        # The API's one thread takes requests in order: once "after" is answered, "never" had its turn.
        assert client.post("/", content=b"after").text == "after"
        assert main.calls == ["block", "after"]


GATED = """
import threading

entered = {name: threading.Event() for name in "abc"}
gates = {name: threading.Event() for name in "abc"}
answered = threading.Event()  # set by the test when the answer to "b" has reached its client
calls = []

def handler(request, context):
    body = request.read().decode()
    calls.append(body)
    if body in gates:
        entered[body].set()
        gates[body].wait(120)
    if body == "d":
        calls.append(f"d saw b answered: {answered.wait(60)}")
    return {"content": body}
"""


def queue_behind_a(client, main, results: dict, *bodies: str) -> list[threading.Thread]:
    """Post "a" (it blocks the API's one thread), then ``bodies``, queued together behind it."""
    posts = [post_async(client, "a", results)]
    assert main.entered["a"].wait(60)
    for count, body in enumerate(bodies, start=1):  # one after the other: queued in this order
        posts.append(post_async(client, body, results))
        wait_for(lambda count=count: client.app.apis["proj"].pipeline.queue.depth == count, f"{body} queued")
    return posts


def test_a_drained_job_whose_deadline_passes_before_it_starts_is_dropped(serve, make_project) -> None:
    """The thread takes b, c and d from the queue at once; c's deadline passes while b runs: c never runs."""
    project = make_project({"main.py": GATED})
    with serve(project, handler="main:handler", timeout=3) as client:
        import main

        main.answered.set()  # d does not wait for anything here
        results: dict = {}
        posts = queue_behind_a(client, main, results, "b", "c", "d")
        main.gates["a"].set()  # the thread now takes b, c and d together
        assert main.entered["b"].wait(60)
        posts[2].join(60)  # c's deadline passes while b holds the thread
        main.gates["b"].set()
        for post in posts:
            post.join(60)
        assert results["c"].status_code == 504
        assert results["c"].json()["error"] == (
            "api 'proj' did not answer within its timeout of 3 s (it had not started and was dropped)."
        )
        assert main.calls[:2] == ["a", "b"] and "c" not in main.calls  # d runs if its own deadline has not passed
        assert client.post("/", content=b"after").text == "after"


def test_drained_jobs_that_run_long_are_answered_one_by_one(serve, make_project, monkeypatch) -> None:
    """Answers of jobs taken together go out together only while they are quick: b's answer leaves before d runs."""
    monkeypatch.setattr("localserve.engine.pipeline.ANSWER_AFTER", 0.0)  # every job "runs long"
    project = make_project({"main.py": GATED})
    with serve(project, handler="main:handler") as client:
        import main

        results: dict = {}
        posts = queue_behind_a(client, main, results, "b", "d")
        watcher = threading.Thread(target=lambda: (posts[1].join(60), main.answered.set()))
        watcher.start()
        main.gates["b"].set()  # b is quick here
        main.gates["a"].set()
        for post in [*posts, watcher]:
            post.join(60)
        assert [results[body].text for body in "abd"] == ["a", "b", "d"]
        assert main.calls == ["a", "b", "d", "d saw b answered: True"]


def test_a_request_whose_answer_a_thread_is_writing_gets_no_504() -> None:
    """The deadline and a thread writing the answer itself (a ``ReplyWriter``) both want to answer: one
    ``Job.claim`` decides. Once a thread holds it, the deadline passes without a 504 and the thread's
    Reply is the answer; a request nobody claimed gets its 504."""
    import asyncio

    from localserve.config import ApiConfig
    from localserve.engine import Lifecycle
    from localserve.engine.pipeline import Pipeline
    from localserve.errors import Timeout
    from localserve.messages.request import Request
    from localserve.messages.response import Reply

    async def main() -> tuple[Reply, type[BaseException]]:
        api = ApiConfig(name="claimed", timeout=0.01)
        pipeline = Pipeline(api, endpoint=None)  # type: ignore[arg-type]  # no threads: jobs stay queued
        lifecycle = Lifecycle(pipeline, status=lambda: ("ready", None))

        def request() -> Request:
            return Request("POST", [], b"{}", request_id="r")

        sweeps = asyncio.Queue[None]()
        sweep = lifecycle._sweep

        def counted_sweep() -> None:  # each sweep told to the test: it waits for sweeps, not for time
            sweep()
            sweeps.put_nowait(None)

        lifecycle._sweep = counted_sweep  # type: ignore[method-assign]
        claimed = asyncio.ensure_future(lifecycle.run(request()))
        unclaimed = asyncio.ensure_future(lifecycle.run(request()))
        await asyncio.sleep(0)
        first = next(iter(lifecycle.waiting))  # admission order: the claimed request came first
        assert first.claim()  # what an API thread does before it writes the answer
        with pytest.raises(Timeout) as timed_out:
            await asyncio.wait_for(unclaimed, 5)
        for _ in range(5):  # five more sweeps, each past the claimed request's deadline
            await asyncio.wait_for(sweeps.get(), 5)
        assert not claimed.done()
        reply = Reply(status=200, body=b"written by the thread")
        first.future.set_result(reply)  # the thread's settle
        return await claimed, timed_out.type

    reply, error = asyncio.run(main())
    assert reply.body == b"written by the thread" and error is Timeout
