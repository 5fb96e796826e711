from __future__ import annotations

import datetime
import http
import io
from typing import Any

import numpy as np
import pytest

from localserve.errors import HandlerError
from localserve.messages.response import abeja_reply, answer_headers, cortex_reply


def body_of(result: dict) -> tuple[int, dict[str, str], bytes]:
    reply = abeja_reply(result)
    headers = {k.decode(): v.decode() for k, v in reply.headers}
    body = b"".join(reply.stream) if reply.stream is not None else reply.body
    return reply.status, headers, body


@pytest.mark.parametrize(
    ("content", "content_type", "expected"),
    [
        (None, "text/plain", b""),
        ({"total": 108.0}, "application/json", b'{"total":108.0}'),
        ("héllo", "text/plain", "héllo".encode()),
        (b"\x00\x01\x02", "application/octet-stream", b"\x00\x01\x02"),
        (bytearray(b"ab"), "application/octet-stream", b"ab"),
        (io.BytesIO(b"jpeg bytes"), "image/jpeg", b"jpeg bytes"),
        ([b"a", b"b", b"c"], "application/octet-stream", b"abc"),
        ([{"a": 1}, {"a": 2}], "application/json", b'[{"a":1},{"a":2}]'),
        ([{"a": 1}, {"a": 2}], "application/x-ndjson", b'{"a":1}\n{"a":2}\n'),
        ([{"a": 1, "b": "x"}, {"a": 2, "b": "y,z"}], "text/csv", b'a,b\n1,x\n2,"y,z"\n'),
        ({"v": np.array([[1, 2], [3, 4]], dtype=np.int64)}, "application/json", b'{"v":[[1,2],[3,4]]}'),
        ({"f": np.float32(0.5), "i": np.int64(3)}, "application/json", b'{"f":0.5,"i":3}'),
        ({"t": datetime.datetime(2019, 5, 23, 9, 29, 6)}, "application/json", b'{"t":"2019-05-23T09:29:06"}'),
        ((c for c in [b"chunk1", "chunk2"]), "text/plain", b"chunk1chunk2"),
    ],
)
def test_abeja_content_forms(content: object, content_type: str, expected: bytes) -> None:
    status, headers, body = body_of({"content_type": content_type, "content": content})
    assert status == 200
    assert headers["content-type"] == content_type
    assert body == expected


def test_generators_are_streamed_not_buffered() -> None:
    reply = abeja_reply({"content": (str(i) for i in range(3))})
    assert reply.stream is not None and reply.body == b""


def test_defaults_status_and_metadata_headers() -> None:
    status, headers, body = body_of({"content": "x", "metadata": {"X-Model-Version": 3}})
    assert (status, headers["content-type"], headers["x-model-version"], body) == (200, "text/plain", "3", b"x")
    status, _, _ = body_of({"status_code": http.HTTPStatus.CREATED})
    assert status == 201


class FileLike:
    """A 'content' with a read() that returns ``what``, or raises it."""

    def __init__(self, what: object) -> None:
        self.what = what

    def read(self) -> object:
        if isinstance(self.what, BaseException):
            raise self.what
        return self.what


@pytest.mark.parametrize(
    ("result", "message"),
    [
        (
            ["not", "a", "dict"],
            "The handler returned a list; expected a dict with 'status_code', 'content_type', 'content' and 'metadata'.",
        ),
        (
            None,
            "The handler returned None; expected a dict with 'status_code', 'content_type', 'content' and 'metadata'.",
        ),
        (
            {"status_code": "200"},
            "The handler's 'status_code' is '200'; expected an int or http.HTTPStatus from 200 to 599 (a 1xx status "
            "is informational: it cannot end a response).",
        ),
        (
            {"status_code": 700},
            "The handler's 'status_code' is 700; expected an int or http.HTTPStatus from 200 to 599 (a 1xx status "
            "is informational: it cannot end a response).",
        ),
        (
            {"status_code": 101},
            "The handler's 'status_code' is 101; expected an int or http.HTTPStatus from 200 to 599 (a 1xx status "
            "is informational: it cannot end a response).",
        ),
        ({"metadata": ["x"]}, "The handler's 'metadata' is a list; expected a dict of response headers."),
        ({"metadata": {"bad name": "x"}}, "The handler's 'metadata' key 'bad name' is not a valid HTTP header name."),
        (
            {"metadata": {"x-a": "a\x00b"}},
            "The handler's 'metadata' value for 'x-a' contains a line break or control character.",
        ),
        (
            {"metadata": {"Content-Length": "2"}},
            "The handler's 'metadata' key 'Content-Length' is a header localserve sets itself; it is the length of "
            "'content'.",
        ),
        (
            {"metadata": {"transfer-encoding": "chunked"}},
            "The handler's 'metadata' key 'transfer-encoding' is a header localserve sets itself; a generator "
            "'content' is sent chunked.",
        ),
        (
            {"metadata": {"Content-Type": "text/csv"}},
            "The handler's 'metadata' key 'Content-Type' is a header localserve sets itself; use 'content_type' for it.",
        ),
        (
            {"content_type": "text/plain; name=日本"},
            "The handler's 'content_type' holds '日', which a header cannot carry (HTTP header values are Latin-1); "
            "percent-encode it first, e.g. urllib.parse.quote(value).",
        ),
        (
            {"content": "a\ud800b"},
            "The handler's 'content' is a str that UTF-8 cannot carry: '\\ud800' at 1 is a lone surrogate (from bytes "
            "decoded with errors='surrogateescape'?); return bytes, or text without it.",
        ),
        (
            {"content": FileLike(5)},
            "The handler's 'content'.read() returned an int; expected bytes or a str.",
        ),
        (
            {"content": FileLike(OSError("disk gone"))},
            "Reading the handler's 'content' (a FileLike) failed: OSError: disk gone",
        ),
        (
            {"metadata": {"x-a": "ok ✓"}},
            "The handler's 'metadata' value for 'x-a' holds '✓', which a header cannot carry (HTTP header values are "
            "Latin-1); percent-encode it first, e.g. urllib.parse.quote(value).",
        ),
        (
            {"metadata": {"x-a": None}},
            "The handler's 'metadata' value for 'x-a' is None; expected a string (or a number).",
        ),
        (
            {"metadata": {"x-a": ["a", "b"]}},
            "The handler's 'metadata' value for 'x-a' is a list; expected a string (or a number).",
        ),
        (
            {"content_type": "text/plain\r\nset-cookie: a=b"},
            "The handler's 'content_type' 'text/plain\\r\\nset-cookie: a=b' contains control characters.",
        ),
        (
            {"content_type": "application/json", "content": {"x": object()}},
            "The response cannot be serialised as JSON: Object of type object is not JSON serializable.",
        ),
    ],
)
def test_bad_returns_are_500s_that_say_why(result: object, message: str) -> None:
    with pytest.raises(HandlerError) as info:
        abeja_reply(result)
    assert str(info.value) == message
    assert info.value.status_code == 500


def test_metadata_of_bytes_and_latin_1_is_sent_as_given() -> None:
    reply = abeja_reply({"metadata": {b"X-Raw": b"v1", "x-name": "Zoë", "x-n": 2.5}})
    assert reply.headers[1:] == [(b"x-raw", b"v1"), (b"x-name", "Zoë".encode("latin-1")), (b"x-n", b"2.5")]


@pytest.mark.parametrize("status", [204, 304])
def test_a_status_without_a_body_drops_the_content_and_says_so(status: int, caplog: pytest.LogCaptureFixture) -> None:
    reply = abeja_reply({"status_code": status, "content_type": "application/json", "content": {}})
    assert (reply.status, reply.body, reply.stream) == (status, b"", None)
    assert answer_headers(reply, "r1") == [(b"content-type", b"application/json"), (b"x-request-id", b"r1")]
    assert [r.getMessage() for r in caplog.records] == [
        f"The handler answered {status} with content (2 bytes); a {status} has no body, so it was dropped."
    ]
    streamed = abeja_reply({"status_code": status, "content": iter([b"x"])})
    assert (streamed.body, streamed.stream) == (b"", None)


def test_cortex_returns() -> None:
    reply = cortex_reply({"a": np.arange(3)})
    assert (reply.headers, reply.body) == ([(b"content-type", b"application/json")], b'{"a":[0,1,2]}')
    reply = cortex_reply("label")
    assert (reply.headers[0][1], reply.body) == (b"text/plain; charset=utf-8", b"label")
    reply = cortex_reply(b"\x01")
    assert (reply.headers[0][1], reply.body) == (b"application/octet-stream", b"\x01")
    assert cortex_reply(3.5).body == b"3.5"
    assert cortex_reply([np.array([[0.5, 0.25]], dtype=np.float32)]).body == b"[[[0.5,0.25]]]"
    with pytest.raises(HandlerError) as info:
        cortex_reply({"x": {1, object()}})
    assert (
        str(info.value) == "The response cannot be serialised as JSON: Object of type object is not JSON serializable."
    )


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ({"a": 2**100}, "an integer of 101 bits is beyond msgpack's 64 (send it as a string)"),
        ({"a": -(2**64)}, "an integer of 65 bits is beyond msgpack's 64 (send it as a string)"),
        ({"a": complex(1, 2)}, "an object of type complex has no msgpack form"),
        ({"a": np.complex64(1)}, "an object of type complex64 has no msgpack form"),
    ],
)
def test_a_value_msgpack_cannot_carry_is_named_in_its_terms(value: Any, why: str) -> None:
    """msgpack calls the conversion hook for an integer past 64 bits too: it was told "not JSON serializable"."""
    with pytest.raises(HandlerError) as info:
        cortex_reply(value, "application/msgpack")
    assert str(info.value) == f"The response cannot be serialised as msgpack: {why}."
    assert cortex_reply({"a": 2**100}, "application/json").body == b'{"a":1267650600228229401496703205376}'


def test_a_returned_str_utf_8_cannot_carry_is_the_handler_s_500_not_an_internal_error() -> None:
    with pytest.raises(HandlerError) as info:
        cortex_reply("ok \udcff")
    assert str(info.value).startswith("The returned text is a str that UTF-8 cannot carry: '\\udcff' at 3 is a lone")


def test_cortex_msgpack_when_accepted() -> None:
    import msgpack

    reply = cortex_reply({"a": [1, 2]}, "application/msgpack")
    assert reply.headers == [(b"content-type", b"application/msgpack")]
    assert msgpack.unpackb(reply.body) == {"a": [1, 2]}


def test_cortex_starlette_response_is_sent_as_is() -> None:
    from starlette.responses import PlainTextResponse

    response = PlainTextResponse("teapot", status_code=418)
    reply = cortex_reply(response)
    assert reply.asgi is response and reply.status == 418


def test_keys_that_are_not_read_are_warned_of_once(caplog: pytest.LogCaptureFixture) -> None:
    for _ in range(2):
        assert abeja_reply({"status": 201, "body": "x"}).body == b""
    assert [r.getMessage() for r in caplog.records] == [
        "The handler returned keys that are not read: 'body', 'status' (did you mean 'status_code'?); an ABEJA "
        "handler's return is read for 'status_code', 'content_type', 'content' and 'metadata' (this warning is "
        "given once for these keys)."
    ]
