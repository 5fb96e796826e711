"""Streamed responses: the API's thread stays with a stream until its last chunk."""

from __future__ import annotations

import concurrent.futures

from tests.conftest import wait_until as wait_for


def test_a_stream_holds_the_thread_until_its_last_chunk(serve, make_project) -> None:
    project = make_project(
        {
            "main.py": """
            import threading
            log = []
            streaming = threading.Event()
            go_on = threading.Event()

            def chunks():
                log.append("A0")
                streaming.set()
                yield "a0 "
                go_on.wait(120)
                for i in (1, 2):
                    log.append(f"A{i}")
                    yield f"a{i} "

            def handler(request, context):
                if request.read() == b"stream":
                    return {"content": chunks()}
                log.append("B")
                return {"content": "b"}
            """
        }
    )
    with serve(project, handler="main:handler") as client:
        import main

        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            stream = pool.submit(client.post, "/", content=b"stream")
            assert main.streaming.wait(60)
            other = pool.submit(client.post, "/", content=b"other")
            pipeline = client.app.apis["proj"].pipeline
            wait_for(lambda: pipeline.queue.depth == 1, "the other request queued behind the stream")
            main.go_on.set()
            assert stream.result(30).text == "a0 a1 a2 "
            assert other.result(30).text == "b"
    assert main.log == ["A0", "A1", "A2", "B"]
