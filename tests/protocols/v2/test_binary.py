"""The binary tensor data extension: ``Inference-Header-Content-Length`` read as a byte count within the body.

Binary tensors decoded with the JSON ones are checked in tests/protocols/v2/test_codec.py."""

from __future__ import annotations

import pytest

from localserve.errors import RequestError
from localserve.protocols.v2.binary import parse_header_length


@pytest.mark.parametrize("value", [b"-5", b"abc", b"1e3", b"99999999999999999999999999", b" "])
def test_a_header_length_that_is_no_byte_count_is_refused(value: bytes) -> None:
    with pytest.raises(RequestError) as caught:
        parse_header_length(value, 100)
    assert str(caught.value) == (
        f"Inference-Header-Content-Length {value.decode().strip()!r} is not a byte count; expected a whole number "
        "from 0 to the body's 100 bytes."
    )


def test_a_header_length_past_the_body_is_refused() -> None:
    with pytest.raises(RequestError) as caught:
        parse_header_length(b"101", 100)
    assert str(caught.value) == (
        "Inference-Header-Content-Length 101 is past the end of the body (100 bytes); it must count the bytes of the "
        "JSON header that starts the body."
    )
    assert parse_header_length(b"100", 100) == 100
    assert parse_header_length(None, 100) is None
