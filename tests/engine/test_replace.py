"""Engine.replace_api (serve --reload's engine surface): a new runtime loads beside the one serving, then serves;
a failure changes nothing; the replaced one drains and its threads end."""

from __future__ import annotations

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
