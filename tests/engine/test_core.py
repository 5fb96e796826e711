"""The engine of one replica: a request's objects freed once it is answered, the shutdown past the graceful timeout.

In-process but for the graceful timeout, which a real ``serve`` gets as SIGTERM."""

from __future__ import annotations

import concurrent.futures
import gc
import json
import signal

import httpx
import pytest

from tests.conftest import wait_until as wait_for


def test_the_body_of_a_finished_request_is_freed_without_a_collection(serve, make_project) -> None:
    project = make_project(
        {
            "main.py": """
            import weakref
            refs = []

            def handler(request, context):
                refs.append(weakref.ref(request))
                if request.read() == b"fail":
                    raise ValueError("failed on purpose")
                return {"content": "ok"}
            """
        }
    )
    with serve(project, handler="main:handler") as client:
        import main

        gc.collect()
        gc.disable()  # only reference counting may free the request
        try:
            assert client.post("/", content=b"x" * 1_000_000).text == "ok"
            assert client.post("/", content=b"fail").status_code == 500
            # The API's one thread resolves a request's future, then leaves its loop iteration; the
            # next request is taken only after that, so once it is answered the first two are done.
            assert client.post("/", content=b"y").text == "ok"
            assert [ref() for ref in main.refs[:2]] == [None, None]
        finally:
            gc.enable()


def test_a_request_that_waited_in_the_queue_is_freed_with_its_answer_without_a_collection(serve, make_project) -> None:
    """A request queued long enough gets a task that listens for its client leaving; cancelling that
    task once the request is answered must not tie the request (and its answer) into a reference cycle."""
    project = make_project(
        {
            "main.py": """
            import threading, weakref
            refs, gate = [], threading.Event()

            def handler(request, context):
                refs.append(weakref.ref(request))
                if request.read() == b"first":
                    gate.wait(120)
                return {"content": b"x" * 1_000_000}
            """
        }
    )
    with serve(project, handler="main:handler") as client:
        import main

        lifecycle = client.app.apis["proj"].lifecycle
        gc.collect()
        gc.disable()  # only reference counting may free the requests
        try:
            with concurrent.futures.ThreadPoolExecutor(2) as pool:
                first = pool.submit(client.post, "/", content=b"first")
                wait_for(lambda: len(main.refs) == 1, "the first request holding the API's one thread")
                second = pool.submit(client.post, "/", content=b"second")
                wait_for(
                    lambda: any(job.listener is not None for job in list(lifecycle.waiting)),
                    "the queued request listening for its client",
                )
                main.gate.set()
                assert [len(first.result(60).content), len(second.result(60).content)] == [1_000_000] * 2
            assert client.post("/", content=b"y").status_code == 200  # the first two are done (see above)
            assert [ref() for ref in main.refs[:2]] == [None, None]
        finally:
            gc.enable()


@pytest.mark.slow
def test_after_the_graceful_timeout_waiting_clients_get_503_and_queued_work_never_runs(make_project, tmp_path) -> None:
    from tests.test_e2e import output_of, server

    ran = tmp_path / "ran.log"
    project = make_project(
        {
            "main.py": f"""
            import threading, time

            def forever():  # a non-daemon thread left by user code
                while True:
                    time.sleep(0.1)

            threading.Thread(target=forever, name="user-thread", daemon=False).start()

            def handler(request, context):
                with open({str(ran)!r}, "a") as f:
                    f.write(request.read().decode() + "\\n")
                threading.Event().wait()  # never returns: the graceful timeout ends it
                return {{"content": "finished"}}
            """
        }
    )
    with server("-p", str(project), "--handler", "main:handler", "--graceful-timeout", "1") as (url, proc):
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            first = pool.submit(httpx.post, url, content=b"r0", timeout=60)
            wait_for(lambda: ran.exists(), "the first request running")
            queued = [pool.submit(httpx.post, url, content=f"r{i}".encode(), timeout=60) for i in (1, 2)]
            wait_for(lambda: 'localserve_queue_depth{api="proj"} 2.0' in httpx.get(f"{url}/metrics").text, "2 queued")
            proc.send_signal(signal.SIGTERM)
            answers = [first.result(60), *(q.result(60) for q in queued)]
        assert proc.wait(30) == 0, output_of(proc)
    assert [a.status_code for a in answers] == [503, 503, 503]
    assert [a.headers["content-type"] for a in answers] == ["application/json"] * 3
    assert json.loads(answers[0].text)["error"] == (
        "The server is shutting down: the request was still running when the graceful timeout ran out; "
        "retry on another replica or later."
    )
    assert json.loads(answers[1].text)["error"] == (
        "The server is shutting down: the request had not started and never will; retry on another replica or later."
    )
    assert ran.read_text().split() == ["r0"]  # the queued requests never ran
    assert "exiting although user code left threads running: user-thread" in output_of(proc)
