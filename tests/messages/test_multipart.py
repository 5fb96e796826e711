"""multipart/form-data bodies split into parts (python-multipart), each a dict that reads like a file; a malformed
body a 400 that says why; the parts as Starlette's FormData, what Cortex's server handed over."""

from __future__ import annotations

import pytest
from starlette.datastructures import UploadFile

from localserve.errors import RequestError
from localserve.messages.multipart import Content, form_from_parts, parse_multipart

BODY = (
    b"--XyZ\r\n"
    b'Content-Disposition: form-data; name="image"; filename="cat.jpg"\r\n'
    b"Content-Type: image/jpeg\r\n\r\n"
    b"\xff\xd8jpeg\r\n"
    b"--XyZ\r\n"
    b'Content-Disposition: form-data; name="note"\r\n\r\n'
    b"hello\r\n"
    b"--XyZ--\r\n"
)


def test_parts_carry_their_names_types_and_bodies() -> None:
    image, note = parse_multipart("multipart/form-data; boundary=XyZ", BODY)
    assert dict(image) == {"content_type": "image/jpeg", "form_name": "image", "file_name": "cat.jpg"}
    assert dict(note) == {"content_type": None, "form_name": "note", "file_name": None}
    assert image.read(2) == b"\xff\xd8"
    assert image.read() == b"jpeg"
    image.seek(0)
    assert image.read(None) == b"\xff\xd8jpeg"
    assert repr(note) == "Content({'content_type': None, 'form_name': 'note', 'file_name': None}, 5 bytes)"


def test_parts_with_the_same_headers_are_not_equal() -> None:
    first, second = Content(None, "a", None, b"1"), Content(None, "a", None, b"2")
    assert first != second and first == first
    assert len({first, second}) == 2


@pytest.mark.parametrize(
    ("content_type", "body", "message"),
    [
        (
            "multipart/form-data",
            BODY,
            "Malformed multipart body: Content-Type 'multipart/form-data' has no boundary parameter; "
            "expected e.g. 'multipart/form-data; boundary=...'.",
        ),
        (
            "multipart/form-data; boundary=" + "b" * 300,
            BODY,
            "Malformed multipart body: its boundary is 300 bytes long; RFC 2046 allows at most 70.",
        ),
        (
            "multipart/form-data; boundary=XyZ",
            BODY[: BODY.index(b"--XyZ--")],
            "Malformed multipart body: the closing boundary '--XyZ--' was not found (1 complete part(s) read).",
        ),
    ],
)
def test_a_malformed_body_is_a_400_that_says_why(content_type: str, body: bytes, message: str) -> None:
    with pytest.raises(RequestError) as caught:
        parse_multipart(content_type, body)
    assert caught.value.status_code == 400
    assert str(caught.value) == message


def test_the_form_has_files_as_uploads_and_fields_as_text() -> None:
    form = form_from_parts(parse_multipart("multipart/form-data; boundary=XyZ", BODY))
    upload = form["image"]
    assert isinstance(upload, UploadFile)
    assert (upload.filename, upload.content_type, upload.size) == ("cat.jpg", "image/jpeg", 6)
    assert upload.file.read() == b"\xff\xd8jpeg"
    assert form["note"] == "hello"
    assert form_from_parts([Content(None, None, None, b"\xff")]).multi_items() == [("", "\ufffd")]
