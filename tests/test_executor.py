"""Admission and time limits: the queue bound (503), the timeout (504), dropped work."""

from __future__ import annotations

import threading
import time

BLOCKING = """
import threading
import time

entered = threading.Event()
release = threading.Event()
calls = []

def handler(request, context):
    body = request.read().decode()
    calls.append(body)
    if body.startswith("block"):
        entered.set()
        release.wait(20)
    if body.startswith("sleep"):
        time.sleep(float(body.split()[1]))
    return {"content": body}
"""


def post_async(client, body: str, results: dict) -> threading.Thread:
    thread = threading.Thread(target=lambda: results.__setitem__(body, client.post("/", content=body.encode())))
    thread.start()
    return thread


def test_full_queue_answers_503_with_retry_after_at_once(serve, make_project) -> None:
    project = make_project({"main.py": BLOCKING})
    with serve(project, handler="main:handler", max_queue=1) as client:
        import main

        results: dict = {}
        first = post_async(client, "block", results)
        assert main.entered.wait(5)
        second = post_async(client, "queued", results)
        deadline = time.monotonic() + 5
        while client.app.apis["proj"].executor.depth < 1:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        start = time.perf_counter()
        response = client.post("/", content=b"overflow", headers={"X-Request-ID": "o1"})
        elapsed = time.perf_counter() - start
        assert response.status_code == 503
        assert response.headers["retry-after"] == "1"
        assert response.json() == {
            "error": "API 'proj' is at capacity: 1 requests are already queued (max_queue); retry later.",
            "request_id": "o1",
        }
        assert elapsed < 2  # answered while the worker is still busy
        assert 'localserve_queue_depth{api="proj"} 1.0' in client.get("/metrics").text
        main.release.set()
        first.join(5)
        second.join(5)
        assert 'localserve_queue_depth{api="proj"} 0.0' in client.get("/metrics").text  # told by the worker
        assert results["block"].text == "block" and results["queued"].text == "queued"
        assert "overflow" not in main.calls


def test_timeout_is_504_and_unstarted_work_is_dropped(serve, make_project) -> None:
    project = make_project({"main.py": BLOCKING})
    with serve(project, handler="main:handler", timeout=0.5) as client:
        import main

        results: dict = {}
        first = post_async(client, "sleep 1.5", results)
        time.sleep(0.2)
        second = post_async(client, "never", results)
        first.join(10)
        second.join(10)
        assert results["sleep 1.5"].status_code == 504
        assert results["sleep 1.5"].json()["error"] == (
            "api 'proj' did not answer within its timeout of 0.5 s (it was still running)."
        )
        assert results["never"].status_code == 504
        assert results["never"].json()["error"] == (
            "api 'proj' did not answer within its timeout of 0.5 s (it had not started and was dropped)."
        )
        time.sleep(1.5)
        assert main.calls == ["sleep 1.5"]
        assert client.post("/", content=b"after").text == "after"


def test_one_request_at_a_time_by_default_and_more_threads_on_request(serve, make_project) -> None:
    project = make_project(
        {
            "main.py": """
            import threading, time
            lock = threading.Lock()
            active = 0
            peak = 0

            def handler(request, context):
                global active, peak
                with lock:
                    active += 1
                    peak = max(peak, active)
                time.sleep(0.1)
                with lock:
                    active -= 1
                return {"content": str(peak)}
            """
        }
    )
    for threads, expected in ((None, 1), (4, 4)):
        flags = {"threads_per_process": threads} if threads else {}
        with serve(project, handler="main:handler", **flags) as client:
            import main

            main.peak = 0
            results: dict = {}
            workers = [post_async(client, f"r{i}", results) for i in range(4)]
            for worker in workers:
                worker.join(10)
            assert main.peak == expected


def test_pin_threads_moves_workers_to_one_core_after_loading(serve, make_project) -> None:
    import os

    from localserve.server import ServeOptions

    project = make_project(
        {
            "main.py": """
            import os, threading
            go = threading.Event()
            seen = {}

            def pool_thread():  # like a runtime's thread pool, made while the model loads
                go.wait(10)
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
        deadline = time.monotonic() + 5
        while "pool" not in main.seen:
            assert time.monotonic() < deadline
            time.sleep(0.01)
    allowed = sorted(os.sched_getaffinity(0))
    assert worker == allowed[:1]
    assert main.seen["pool"] == allowed
