"""An API's runtimes (``ApiRuntime.load_runtime`` and ``swap``, through ``Engine.replace_api``, serve --reload's
engine surface): a new runtime loads beside the one serving, then serves; a failure changes nothing; the
replaced one drains and its threads end."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from localserve.errors import HandlerLoadError
from tests.conftest import wait_until

HANDLERS = {
    "one.py": "def handler(request, context):\n    return {'content': 'one'}\n",
    "two.py": "def handler(request, context):\n    return {'content': 'two'}\n",
    "broken.py": "def handler(request, context):\n    return 1 +\n",
    "failing.py": "raise RuntimeError('at import')\n",
}


def test_replace_api_swaps_after_loading_and_a_failure_changes_nothing(serve, make_project) -> None:
    project = make_project(HANDLERS)
    with serve(project, handler="one:handler") as client:
        engine = client.app.engine
        rt = engine.apis[project.name]
        first = rt.runtime
        assert client.post("/").text == "one"

        for spec, error in (("broken:handler", "SyntaxError"), ("failing:handler", "RuntimeError: at import")):
            with pytest.raises(HandlerLoadError, match=error):
                client.portal.call(engine.replace_api, rt.api.name, dataclasses.replace(rt.api, handler=spec))
            assert rt.runtime is first and rt.state == "ready" and rt.error is None
            assert client.post("/").text == "one"
        assert not engine.retiring

        seconds = client.portal.call(
            engine.replace_api, rt.api.name, dataclasses.replace(rt.api, handler="two:handler")
        )
        assert seconds >= 0 and rt.runtime is not first and rt.api.handler == "two:handler"
        assert client.post("/").text == "two"
        # Nothing was in flight on the old runtime: it drains at once, and its thread ends.
        wait_until(lambda: not engine.retiring, "the old runtime retired")
        assert first.pipeline.join(30) == []


POST_PREDICT = """
import os, time


class PythonPredictor:
    def __init__(self, config):
        self.gate, self.ran = config["gate"], config["ran"]

    def predict(self, payload):
        return {"v": 1}

    def post_predict(self, response):
        while not os.path.exists(self.gate):  # held by the test, released by a file
            time.sleep(0.005)
        with open(self.ran, "w") as f:
            f.write("ran")
"""


def test_a_replaced_runtime_retires_only_once_its_post_predict_has_run(serve, make_project, tmp_path) -> None:
    """post_predict runs on the runtime that answered, and a replaced runtime keeps its threads until it has run."""
    gate, ran = tmp_path / "gate", tmp_path / "ran"
    config = (
        "- name: p\n  kind: RealtimeAPI\n  predictor:\n    type: python\n    path: predictor.py\n"
        f"    config: {{gate: '{gate}', ran: '{ran}'}}\n"
    )
    project = make_project({"cortex.yaml": config, "predictor.py": POST_PREDICT})
    with serve(project) as client:
        engine = client.app.engine
        rt = engine.apis["p"]
        first = rt.runtime
        assert client.post("/p", json={}).json() == {"v": 1}
        assert first.lifecycle.after_pending == 1  # answered; its post_predict held at the gate
        client.portal.call(engine.replace_api, "p", rt.api)
        assert rt.runtime is not first
        client.portal.call(asyncio.sleep, 0)  # one turn of the loop: the old runtime's retirement starts
        assert first in engine.retiring and not ran.exists()
        gate.touch()
        wait_until(lambda: not engine.retiring, "the old runtime retired")
        assert ran.read_text() == "ran" and first.lifecycle.after_pending == 0
        assert first.pipeline.join(30) == []


BLOCKING = """
import threading

entered, release = threading.Event(), threading.Event()


def handler(request, context):
    if request.read() == b"hold":
        entered.set()
        release.wait(120)  # the bound only catches a hang
    return {'content': 'done'}
"""


def test_a_request_past_its_timeout_keeps_a_replaced_runtime_thread_joined_at_shutdown(serve, make_project) -> None:
    """A 504 leaves its request running; once the runtime is replaced and has drained (no client waits there),
    its thread still runs user code, so ``join_threads`` must still wait for it and name it while it runs."""
    project = make_project({"main.py": BLOCKING})
    with serve(project, handler="main:handler", timeout=1) as client:
        import main

        engine = client.app.engine
        rt = engine.apis[project.name]
        first = rt.runtime
        try:
            assert client.post("/", content=b"hold").status_code == 504
            assert main.entered.is_set()  # ...and the request still runs on first's thread
            client.portal.call(engine.replace_api, rt.api.name, rt.api)
            wait_until(lambda: not engine.retiring, "the old runtime retired (no client waits on it)")
            # The serving runtime's thread, and the replaced one's still in the handler (the same name).
            assert engine.join_threads(0.0) == [f"localserve-{project.name}-0"] * 2
        finally:
            main.release.set()
        assert first.pipeline.join(30) == []
        assert engine.join_threads(0.0) == [f"localserve-{project.name}-0"]  # the serving one's alone


SLOW_IMPORT = """
import os, pathlib, time

pathlib.Path(os.environ["LOADING_MARK"]).touch()
while not os.path.exists(os.environ["LOADING_GATE"]):  # held by the test, released by a file
    time.sleep(0.005)


def handler(request, context):
    return {'content': 'slow'}
"""


def test_a_reload_cancelled_while_it_loads_leaves_its_thread_to_shutdown(
    serve, make_project, tmp_path, monkeypatch
) -> None:
    """A stop while a reload loads cancels it: the new runtime's thread, still importing user code, is told to
    stop and is joined at shutdown like the APIs' own threads."""
    mark, gate = tmp_path / "loading", tmp_path / "gate"
    monkeypatch.setenv("LOADING_MARK", str(mark))
    monkeypatch.setenv("LOADING_GATE", str(gate))
    project = make_project({**HANDLERS, "slow.py": SLOW_IMPORT})
    with serve(project, handler="one:handler") as client:
        engine = client.app.engine
        rt = engine.apis[project.name]
        reload = client.portal.start_task_soon(
            engine.replace_api, rt.api.name, dataclasses.replace(rt.api, handler="slow:handler")
        )
        try:
            wait_until(mark.exists, "the new runtime importing slow.py")
            reload.cancel()
            wait_until(reload.done, "the reload cancelled")
            assert client.post("/").text == "one"  # the runtime serving is left as it was
            # The serving runtime's thread, and the abandoned one's still importing (the same name).
            assert engine.join_threads(0.0) == [f"localserve-{project.name}-0"] * 2
        finally:
            gate.touch()
        wait_until(lambda: engine.join_threads(0.0) == [f"localserve-{project.name}-0"], "the abandoned thread ended")
