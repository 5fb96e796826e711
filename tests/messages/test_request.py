from __future__ import annotations

import json
import logging

import pytest

from localserve.errors import RequestError
from localserve.messages.request import Request

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
        (
            "multipart/form-data; boundary=XyZ",
            b'{"a": 1}',
            "Malformed multipart body at byte 0: expected the boundary line '--XyZ' (the boundary the Content-Type "
            "header names); found b'{\"a\": 1}'. Expected parts like '--XyZ\\r\\nContent-Disposition: form-data; "
            "name=\"field\"\\r\\n\\r\\n<data>\\r\\n', closed by '--XyZ--'.",
        ),
        (
            "multipart/form-data; boundary=XyZ",
            b"--XyZ\r\nContent-Disposition form-data\r\n\r\nhi\r\n--XyZ--\r\n",
            "Malformed multipart body at byte 26: a part's header line is not 'Name: value' (invalid character in "
            "the name); found b'Content-Disposition form-data\\r\\n\\r\\nhi\\r\\n--X'. Expected parts like "
            "'--XyZ\\r\\nContent-Disposition: form-data; name=\"field\"\\r\\n\\r\\n<data>\\r\\n', closed by '--XyZ--'.",
        ),
        (
            "multipart/form-data; boundary=XyZ",
            b"--XyZ\r\n" + b"".join(b"X-%d: a\r\n" % i for i in range(65)) + b"\r\nhi\r\n--XyZ--\r\n",
            "Malformed multipart body at byte 573: a part has more than 64 header lines; found b'X-64: a\\r\\n\\r\\nhi"
            "\\r\\n--XyZ--\\r\\n'. Expected parts like '--XyZ\\r\\nContent-Disposition: form-data; "
            "name=\"field\"\\r\\n\\r\\n<data>\\r\\n', closed by '--XyZ--'.",
        ),
        (
            "multipart/form-data; boundary=" + "B" * 257,
            MULTIPART,
            "Malformed multipart body: its boundary is 257 bytes long; RFC 2046 allows at most 70.",
        ),
    ],
)
def test_malformed_multipart_is_a_400(
    content_type: str, body: bytes, message: str, caplog: pytest.LogCaptureFixture
) -> None:
    request = Request("POST", [(b"content-type", content_type.encode())], body)
    with caplog.at_level(logging.DEBUG, logger="localserve"), pytest.raises(RequestError) as info:
        request["contents"]
    assert str(info.value) == message
    assert info.value.status_code == 400
    # The parser's own warning (its wording, bytes by their codes) stays out of the server's log.
    assert [r for r in caplog.records if r.name.startswith("python_multipart")] == []


def test_debug_flag_from_query() -> None:
    assert Request("POST", [], b"", query_string=b"debug=true").debug
    assert not Request("POST", [], b"", query_string=b"debug=false").debug
    assert not Request("POST", [], b"").debug
