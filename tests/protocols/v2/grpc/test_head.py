"""The model a serialized ModelInferRequest names, read from its first fields only (``peek_model``)."""

from __future__ import annotations

import pytest
from tritonclient.grpc import service_pb2

from localserve.errors import RequestError
from localserve.protocols.v2.grpc.head import peek_model


def test_the_model_is_read_from_the_first_fields_only() -> None:
    request = service_pb2.ModelInferRequest(model_name="mlp", model_version="1", id="x")
    request.inputs.add(name="x", datatype="FP32", shape=[1, 4])
    request.raw_input_contents.append(b"\0" * 16)
    assert peek_model(request.SerializeToString()) == ("mlp", "1")
    assert peek_model(service_pb2.ModelInferRequest(model_name="iris").SerializeToString()) == ("iris", "")
    assert peek_model(b"") == ("", "")
    late = service_pb2.ModelInferRequest(id="x").SerializeToString() + b"\x0a\x03mlp"  # model_name after id
    assert peek_model(late) == ("", "")
    with pytest.raises(RequestError, match=r"field 1 says 200 bytes, past the end of the message\.$"):
        peek_model(b"\x0a\xc8\x01mlp")
    with pytest.raises(RequestError, match=r"it ends inside a field's number or length\.$"):
        peek_model(b"\x0a")
    with pytest.raises(RequestError, match=r"a varint is longer than 10 bytes\.$"):
        peek_model(b"\xff" * 11)
    with pytest.raises(RequestError, match=r"model_name or model_version is not valid UTF-8\.$"):
        peek_model(b"\x0a\x01\xff")


def test_the_usual_message_is_read_as_every_field_would_be() -> None:
    """The shortcut for a short name and version given first agrees with reading field by field, or leaves it."""
    import random

    from localserve.protocols.v2.grpc.head import _fields, _usual

    messages = []
    for name in ("", "m", "x" * 127, "x" * 128, "é" * 70):
        for version in ("", "1", "v" * 200):
            request = service_pb2.ModelInferRequest(model_name=name, model_version=version, id="r")
            request.raw_input_contents.append(b"\0" * 16)
            messages.append(request.SerializeToString())
    messages += [b"\x0a\x01a\x0a\x01b", b"\x0a\x01a\x12\x01b\x12\x01c", b"\x0a\x01a\x8a\x00", b"\x0a\x05ab"]
    rng = random.Random(7)
    messages += [bytes([0x0A, rng.randrange(6)]) + rng.randbytes(rng.randrange(12)) for _ in range(3000)]
    usual_ones = 0
    for data in messages:
        quick = _usual(data)
        try:
            whole = _fields(data)
        except RequestError:
            assert quick is None, data
            continue
        assert quick in (None, whole), data
        usual_ones += quick is not None
    assert usual_ones > 1000  # the shortcut is taken, not only left
