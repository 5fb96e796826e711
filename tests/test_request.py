from __future__ import annotations

import json

import pytest

from localserve.errors import RequestError
from localserve.request import Request

HEADERS = [
    (b"content-type", b"application/json"),
    (b"accept-encoding", b"gzip, deflate, br"),
    (b"x-multi", b"one"),
    (b"authorization", b"Bearer secret"),
    (b"proxy-authorization", b"Basic abc"),
    (b"x-multi", b"two"),
]


def test_abeja_keys_and_file_like_body() -> None:
    request = Request("POST", HEADERS, b'{"foo": "bar"}')
    assert request["http_method"] == "POST"
    assert request["content_type"] == "application/json"
    assert json.load(request) == {"foo": "bar"}
    request.seek(0)
    assert request.read(3) == b'{"f'
    assert request.read() == b'oo": "bar"}'
    assert "contents" not in request
    assert sorted(request) == ["content_type", "headers", "http_headers", "http_method"]


def test_headers_list_is_lower_cased_sorted_and_hides_authorization() -> None:
    request = Request("POST", HEADERS, b"")
    assert request["headers"] == [
        {"key": "accept-encoding", "values": ["gzip, deflate, br"]},
        {"key": "content-type", "values": ["application/json"]},
        {"key": "x-multi", "values": ["one", "two"]},
    ]


def test_http_headers_are_case_insensitive() -> None:
    headers = Request("POST", HEADERS, b"")["http_headers"]
    assert headers["Accept-Encoding"] == "gzip, deflate, br"
    assert headers["X-MULTI"] == "two"
    assert headers.get_all("x-multi") == ["one", "two"]
    assert headers["missing"] is None
    assert headers.get("missing", "default") == "default"
    assert "Content-Type" in headers
    assert "Authorization" not in headers
    assert "proxy-authorization" not in headers


def test_get_carries_its_query_string_as_body() -> None:
    request = Request("GET", [(b"content-type", b"application/json")], b"ignored", query_string=b"a=1&b=two")
    assert request["http_method"] == "GET"
    assert request["content_type"] == "application/x-www-form-urlencoded"
    assert request.read() == b"a=1&b=two"
    assert request.query_params == {"a": "1", "b": "two"}


MULTIPART = (
    b"--XyZ\r\n"
    b'Content-Disposition: form-data; name="file1"\r\n'
    b"Content-Type: application/json\r\n\r\n"
    b'{"foo": "bar"}\r\n'
    b"--XyZ\r\n"
    b'Content-Disposition: form-data; name="image"; filename="cat.jpg"\r\n'
    b"Content-Type: image/jpeg\r\n\r\n"
    b"\xff\xd8\xff\x00binary\r\n"
    b"--XyZ--\r\n"
)


def test_multipart_contents() -> None:
    request = Request("POST", [(b"content-type", b"multipart/form-data; boundary=XyZ")], MULTIPART)
    contents = request["contents"]
    assert [(c["content_type"], c["form_name"], c["file_name"]) for c in contents] == [
        ("application/json", "file1", None),
        ("image/jpeg", "image", "cat.jpg"),
    ]
    assert contents[0].read() == b'{"foo": "bar"}'
    assert contents[1].read() == b"\xff\xd8\xff\x00binary"


@pytest.mark.parametrize(
    ("content_type", "body", "message"),
    [
        (
            "multipart/form-data",
            MULTIPART,
            "Malformed multipart body: Content-Type 'multipart/form-data' has no boundary parameter; "
            "expected e.g. 'multipart/form-data; boundary=...'.",
        ),
        (
            "multipart/form-data; boundary=XyZ",
            MULTIPART[:-9],
            "Malformed multipart body: the closing boundary '--XyZ--' was not found (1 complete part(s) read).",
        ),
    ],
)
def test_malformed_multipart_is_a_400(content_type: str, body: bytes, message: str) -> None:
    request = Request("POST", [(b"content-type", content_type.encode())], body)
    with pytest.raises(RequestError) as info:
        request["contents"]
    assert str(info.value) == message
    assert info.value.status_code == 400


def test_debug_flag_from_query() -> None:
    assert Request("POST", [], b"", query_string=b"debug=true").debug
    assert not Request("POST", [], b"", query_string=b"debug=false").debug
    assert not Request("POST", [], b"").debug
