from __future__ import annotations

import gzip

import msgpack
import pytest

from localserve.errors import RequestError
from localserve.messages.payload import decode_payload


def test_json_text_bytes_msgpack_forms() -> None:
    assert decode_payload("application/json", b'{"key": "value"}') == {"key": "value"}
    assert decode_payload("Application/JSON; charset=utf-8", b"[1, 2]") == [1, 2]
    assert decode_payload("text/plain", "héllo".encode()) == "héllo"
    assert decode_payload("text/plain; charset=latin-1", "héllo".encode("latin-1")) == "héllo"
    assert decode_payload("application/octet-stream", b"\x00\x01") == b"\x00\x01"
    assert decode_payload(None, b"raw") == b"raw"
    assert decode_payload("image/jpeg", b"\xff\xd8") == b"\xff\xd8"
    assert decode_payload("application/msgpack", msgpack.packb({"a": [1, 2]})) == {"a": [1, 2]}
    assert decode_payload("application/x-msgpack", msgpack.packb("x")) == "x"
    form = decode_payload("application/x-www-form-urlencoded", b"a=1&b=two&b=three")
    assert form["a"] == "1"
    assert form.getlist("b") == ["two", "three"]
    multipart = b'--b\r\nContent-Disposition: form-data; name="f"; filename="x.txt"\r\n\r\nhi\r\n--b--\r\n'
    form = decode_payload("multipart/form-data; boundary=b", multipart)
    assert form["f"].filename == "x.txt"


@pytest.mark.parametrize(
    ("content_type", "body", "status", "message"),
    [
        (
            "application/json",
            b'{"a": ',
            400,
            "The body is not valid JSON: Expecting value at line 1 column 7 (char 6).",
        ),
        ("text/plain", b"\xff\xfe", 400, "The text body is not valid utf-8: byte 0xff at position 0."),
        (
            "text/plain; charset=klingon",
            b"x",
            415,
            "Unknown charset 'klingon' in Content-Type 'text/plain; charset=klingon'.",
        ),
        (
            "application/msgpack",
            b"\xc1",
            400,
            "The body is not valid msgpack: it holds a byte that begins no msgpack value (0xc1 is never used).",
        ),
        ("application/msgpack", b"\x92\x01", 400, "The body is not valid msgpack: it ends inside a value (2 bytes)."),
        (
            "application/msgpack",
            b"\x01\x02",
            400,
            "The body is not valid msgpack: it holds more than one value (the first ends at byte 1 of 2).",
        ),
        (
            "application/msgpack",
            b"\xdd\xff\xff\xff\xff",
            400,
            "The body is not valid msgpack: it announces more items or bytes (4294967295) than its 5 bytes can hold.",
        ),
        (
            "application/msgpack",
            b"\x81\x80\x01",
            400,
            "The body is not valid msgpack: a map key is a dict; map keys must be strings or binary (msgpack str or bin).",
        ),
        (
            "application/json",
            gzip.compress(b"{}", mtime=0),  # mtime=0: the same test id in every xdist worker
            400,
            "The body is not valid JSON: it is gzip-compressed. A Cortex API gets its body as sent (Content-Encoding "
            "is not decoded, as on Cortex); send the JSON uncompressed.",
        ),
    ],
)
def test_bad_bodies_name_what_was_wrong(content_type: str, body: bytes, status: int, message: str) -> None:
    with pytest.raises(RequestError) as info:
        decode_payload(content_type, body)
    assert (info.value.status_code, str(info.value)) == (status, message)


def test_json_that_only_the_standard_library_accepts_still_parses() -> None:
    import math

    value = decode_payload("application/json", b'{"x": NaN, "y": Infinity}')
    assert math.isnan(value["x"]) and value["y"] == math.inf
