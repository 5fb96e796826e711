"""``localserve run``'s engine: one request through the app in-process, with no socket."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from localserve.config import load_config
from localserve.server import ServeOptions
from localserve.server.inprocess import run_once
from localserve.server.runner import Runner

HANDLER = """
def handler(request, context):
    if request.read() == b"stream":
        return {"content": broken()}
    return {"content": {"content-length": request.header(b"content-length"), "x-team": request.header(b"x-team")}}


def broken():
    yield "first "
    raise RuntimeError("the stream broke")
"""


@pytest.fixture
def runner(make_project, monkeypatch: pytest.MonkeyPatch) -> Runner:
    root: Path = make_project({"main.py": HANDLER})
    monkeypatch.chdir(root)
    monkeypatch.syspath_prepend(str(root))
    return Runner(load_config(root, handler="main:handler"), ServeOptions())


def test_one_request_gets_a_content_length_unless_it_has_one(runner: Runner) -> None:
    status, headers, body = run_once(runner, api=None, method="post", headers=[("X-Team", "a")], body=b"hello")
    assert status == 200 and [name for name, _ in headers] == ["content-type", "content-length", "x-request-id"]
    assert json.loads(body) == {"content-length": "5", "x-team": "a"}


def test_a_stream_that_fails_is_a_500_saying_where_it_was_cut(runner: Runner) -> None:
    status, _, body = run_once(runner, api=None, method="POST", headers=[], body=b"stream")
    assert status == 500
    assert json.loads(body)["error"] == (
        "The response was cut short after 6 bytes of its body: the stream failed (see the log)."
    )
