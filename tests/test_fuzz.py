"""Property tests: no bytes make the payload decoders or the request parser fail with anything but a RequestError."""

from __future__ import annotations

import msgpack
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from localserve.errors import RequestError
from localserve.messages.payload import decode_payload
from localserve.messages.request import Request

FUZZ = settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
CONTENT_TYPES = [
    "application/json",
    "application/msgpack",
    "text/plain; charset=utf-8",
    "text/plain; charset=latin-1",
    "multipart/form-data; boundary=xyz",
    "multipart/form-data",
    "application/x-www-form-urlencoded",
    "image/png",
]
json_like = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20,
)


@FUZZ
@given(st.sampled_from(CONTENT_TYPES), st.binary(max_size=512))
def test_any_bytes_decode_or_are_a_400(content_type: str, body: bytes) -> None:
    try:
        decode_payload(content_type, body)
    except RequestError as exc:
        assert exc.status_code in (400, 415) and str(exc).startswith(("The body", "The text body", "Malformed"))


@FUZZ
@given(json_like)
def test_msgpack_round_trips(value: object) -> None:
    assert decode_payload("application/msgpack", msgpack.packb(value)) == value


@FUZZ
@given(
    st.sampled_from(["GET", "POST", "PUT", "DELETE"]),
    st.lists(st.tuples(st.binary(min_size=1, max_size=20), st.binary(max_size=40)), max_size=8),
    st.binary(max_size=256),
    st.binary(max_size=64),
)
def test_the_request_parser_takes_any_headers_body_and_query(
    method: str, headers: list[tuple[bytes, bytes]], body: bytes, query: bytes
) -> None:
    lowered = [(name.lower(), value) for name, value in headers]
    try:
        request = Request(method, lowered, body, query_string=query, request_id="fuzz", path="/")
        request["headers"], request["http_headers"], request["content_type"]
        assert request.read() == body or method == "GET"
    except RequestError as exc:
        assert exc.status_code == 400
