from __future__ import annotations

import datetime
import http
import io
import json
import os
from typing import Any

import numpy as np
import pytest

from localserve.errors import HandlerError
from localserve.messages.encoding import wants_msgpack
from localserve.messages.error_text import error_body, error_message, short_repr
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


def test_an_error_message_with_a_lone_surrogate_is_still_a_json_body() -> None:
    message = "cannot read " + os.fsdecode(b"/data/\xff.bin")  # a file name that is not UTF-8
    body = error_body(message, "r1")
    assert json.loads(body) == {"error": message, "request_id": "r1"}
    assert b"\\udcff" in body  # JSON's escape: UTF-8 cannot carry the surrogate itself


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


def test_a_value_in_a_message_is_cut_to_its_length_and_a_few_levels() -> None:
    deep: Any = 1
    for _ in range(2000):  # deeper than repr() can go
        deep = [deep]
    assert short_repr(deep) == "[[[[...]]]]"
    assert short_repr(10**50) == "1" + "0" * 50  # whole up to the limit (reprlib cuts 40 digits by default)
    assert short_repr("x" * 100) == "'" + "x" * 56 + "..."
    assert short_repr({"a": {"b": {"c": {"d": 1}}}}, 80) == "{'a': {'b': {'c': {...}}}}"


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


def _stdlib_json(value: object) -> bytes:
    import json

    from localserve.messages.encoding import json_default

    text = json.dumps(value, default=json_default, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.encode()


def test_json_bodies_are_the_standard_librarys_bytes_though_orjson_writes_most() -> None:
    import random
    import struct

    from localserve.messages.encoding import dump_json

    rng = random.Random(7)
    floats = [m * 10.0**e for e in range(-320, 308) for m in (1.0, 1.5, 3.141592653589793, 9.999999)]
    floats += [struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0] for _ in range(3000)]
    floats += [float(np.float32(rng.uniform(-1, 1) * 10.0 ** rng.randint(-9, 20))) for _ in range(3000)]
    floats = [f for f in floats if np.isfinite(f)]
    values: list[object] = [{"output": floats[i : i + 7]} for i in range(0, len(floats), 7)]
    values += [
        {"output": np.array([2.5e-05, 0.25, 0.75], dtype=np.float32)},  # a softmax row with a small value
        {"label": "setosa", "scores": np.float32(0.5), "none": None, "ok": True, "n": 10**20, 1: "int key"},
        {"text": "".join(chr(c) for c in range(0x250)) + "\u2028 \U0001f600", "nested": [[[1, 2.0]], ()]},
        {"when": datetime.datetime(2026, 11, 23, 8, 30, 1, 5), "day": datetime.date(2026, 11, 23)},
        {"text": "null, 9e9 and 1.00001 in words", "e": ["e", "1e", "e1"], "x": 1.00001},
        [],
        0.0001,
        -0.0,
    ]
    for value in values:
        assert dump_json(value) == _stdlib_json(value), value


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        (None, False),
        ("application/json", False),
        ("application/msgpack", True),
        ("application/x-msgpack", True),
        ("application/msgpack, application/json", True),
        ("application/msgpack;q=0, application/json", False),
        ("application/msgpack;q=0.5, application/json", False),
        ("application/json;q=0.5, application/msgpack", True),
        ("application/msgpack;q=0.5, */*;q=0.1", True),
        ("application/msgpack;q=zero", False),
    ],
)
def test_msgpack_is_sent_when_the_accept_header_prefers_it(accept: str | None, expected: bool) -> None:
    assert wants_msgpack(accept) is expected


def test_keys_that_are_not_read_are_warned_of_once(caplog: pytest.LogCaptureFixture) -> None:
    for _ in range(2):
        assert abeja_reply({"status": 201, "body": "x"}).body == b""
    assert [r.getMessage() for r in caplog.records] == [
        "The handler returned keys that are not read: 'body', 'status' (did you mean 'status_code'?); an ABEJA "
        "handler's return is read for 'status_code', 'content_type', 'content' and 'metadata' (this warning is "
        "given once for these keys)."
    ]


def test_a_huge_error_message_is_cut_for_the_client() -> None:
    message = error_message(HandlerError("y" * 10_000_000), hide_errors=False)
    assert message == "y" * 10_000 + "... (9,990,000 more characters cut)"
    assert error_message(HandlerError("short"), hide_errors=False) == "short"
