"""ABEJA Platform handlers: ``handler(request, context)`` checked at load, called with the request and the API's
context on each request, its returned dict the whole answer; never batched."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from localserve.config import ApiConfig
from localserve.config.options import ApiOptions
from localserve.errors import HandlerLoadError, RequestError
from localserve.handlers import Observers
from localserve.handlers.abeja import AbejaHandler, inspect_handler
from localserve.messages.request import Request

HANDLER = """
import json

def handler(request, context):
    return {"status_code": 201, "content_type": "application/json", "content": {"got": json.load(request), **context}}
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    (tmp_path / "lsabeja_main.py").write_text(HANDLER)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop("lsabeja_main", None)


def test_what_serve_can_call_as_handler_request_context() -> None:
    def two(request, context):  # type: ignore[no-untyped-def]
        return {}

    def star(*args):  # type: ignore[no-untyped-def]
        return {}

    assert inspect_handler(two, "main:handler") is two
    assert inspect_handler(star, "main:handler") is star
    with pytest.raises(HandlerLoadError) as caught:
        inspect_handler(lambda request: {}, "main:one")
    assert str(caught.value) == 'Handler "main:one" must accept 2 parameters (request, context); it accepts 1.'
    with pytest.raises(HandlerLoadError) as caught:
        inspect_handler(3, "main:NOT_A_FUNCTION")
    assert str(caught.value) == 'Handler "main:NOT_A_FUNCTION" is a int, not a function.'


def test_the_handler_gets_the_request_and_a_copy_of_the_context(project: Path) -> None:
    api = ApiConfig("echo", handler="lsabeja_main:handler", context={"who": "local"})
    endpoint = AbejaHandler(api, ApiOptions(project=project), Observers())
    endpoint.load()
    assert endpoint.describe() == {
        "name": "echo",
        "kind": "abeja",
        "handler": "lsabeja_main:handler",
        "model_format": None,
    }
    reply = endpoint.prepare(Request("POST", [(b"content-type", b"application/json")], b'{"a": 1}'))
    assert (reply.status, reply.body) == (201, b'{"got":{"a":1},"who":"local"}')
    assert dict(api.context) == {"who": "local"}
    with pytest.raises(NotImplementedError):
        endpoint.handle_batch([])


def test_a_malformed_multipart_body_is_a_400_before_user_code_runs(project: Path) -> None:
    endpoint = AbejaHandler(ApiConfig("echo", handler="lsabeja_main:handler"), ApiOptions(project=project), Observers())
    endpoint.load()
    with pytest.raises(RequestError, match=r"^Malformed multipart body: "):
        endpoint.prepare(Request("POST", [(b"content-type", b"multipart/form-data; boundary=b")], b"--b\r\nbroken"))
