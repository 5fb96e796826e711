"""The model a serialized ModelInferRequest names, read on the event loop from its first few fields.

Which API a request is for must be known on the event loop (its admission, its queue), but the
whole message is parsed on the API's threads (``servicer._Infer.prepare``). Serializers write
fields in field-number order, so ``model_name`` (1) and ``model_version`` (2) come first: this
reads at most ``MAX_FIELDS`` fields, whatever the message's size, and stops at the first other
field. A message that names its model later (or twice) is still parsed whole on the API's thread,
which checks that it names the model it was routed by.
"""

from __future__ import annotations

from localserve.errors import RequestError

MAX_FIELDS = 8
MODEL_NAME, MODEL_VERSION = 1, 2
LENGTH_DELIMITED = 2
NAME_KEY, VERSION_KEY = 0x0A, 0x12  # the one-byte keys of fields 1 and 2, length-delimited


def peek_model(data: bytes) -> tuple[str, str]:
    """``(model_name, model_version)`` of a serialized ModelInferRequest (empty strings when not given first)."""
    name, version = _usual(data) or _fields(data)
    try:
        return name.decode("utf-8"), version.decode("utf-8")
    except UnicodeDecodeError:
        raise RequestError(_malformed("model_name or model_version is not valid UTF-8")) from None


def _usual(data: bytes) -> tuple[bytes, bytes] | None:
    """The name and version of the usual message: each given once, first, shorter than 128 bytes (a length of one
    byte); None for any other, which ``_fields`` reads."""
    size = len(data)
    if size < 2 or data[0] != NAME_KEY or data[1] & 0x80:
        return None
    end = 2 + data[1]
    name, version = data[2:end], b""
    if end + 1 < size and data[end] == VERSION_KEY and not data[end + 1] & 0x80:
        start = end + 2
        end = start + data[start - 1]
        version = data[start:end]
    if end > size or (end < size and (data[end] in (NAME_KEY, VERSION_KEY) or data[end] & 0x80)):
        return None
    return name, version


def _fields(data: bytes) -> tuple[bytes, bytes]:
    name = version = b""
    position = 0
    for _ in range(MAX_FIELDS):
        if position >= len(data):
            break
        key, position = _varint(data, position)
        field, wire = key >> 3, key & 7
        if field not in (MODEL_NAME, MODEL_VERSION) or wire != LENGTH_DELIMITED:
            break
        length, position = _varint(data, position)
        if length > len(data) - position:
            raise RequestError(_malformed(f"field {field} says {length} bytes, past the end of the message"))
        value = data[position : position + length]
        position += length
        if field == MODEL_NAME:
            name = value
        else:
            version = value
    return name, version


def _varint(data: bytes, position: int) -> tuple[int, int]:
    value = shift = 0
    while shift < 64:
        if position >= len(data):
            raise RequestError(_malformed("it ends inside a field's number or length"))
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, position
        shift += 7
    raise RequestError(_malformed("a varint is longer than 10 bytes"))


def _malformed(why: str) -> str:
    return f"The ModelInferRequest is not a valid protobuf message: {why}."
