"""JSON, msgpack and CSV bodies: the standard library's JSON bytes, NaN sent as null with a warning, what msgpack
cannot carry, CSV rows under a header, and the Accept header's choice of msgpack."""

from __future__ import annotations

import datetime
import decimal
import enum
import logging
from typing import Any

import msgpack
import numpy as np
import pytest

from localserve.errors import HandlerError
from localserve.messages.encoding import dump_csv, dump_json, dump_msgpack, json_default, wants_msgpack


class Colour(enum.Enum):
    RED = "red"


@pytest.mark.parametrize(
    ("value", "plain"),
    [
        (np.array([[1, 2]], dtype=np.int32), [[1, 2]]),
        (np.array([b"ab", "c"], dtype=object), ["ab", "c"]),
        (np.float16(0.5), 0.5),
        (datetime.date(2026, 12, 2), "2026-12-02"),
        (decimal.Decimal("1.25"), 1.25),
        (frozenset({3}), [3]),
        ((1, 2), [1, 2]),
        (b"text", "text"),
        (Colour.RED, "red"),
    ],
)
def test_json_default_makes_plain_values(value: Any, plain: Any) -> None:
    assert json_default(value) == plain


def test_json_default_refuses_bytes_that_are_not_utf8_and_other_objects() -> None:
    with pytest.raises(TypeError, match=r"^Object of type bytes is not JSON serializable$"):
        json_default(b"\xff")
    with pytest.raises(TypeError, match=r"^Object of type object is not JSON serializable$"):
        json_default(object())


def test_nan_and_infinity_are_sent_as_null_and_their_places_named(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="localserve"):
        body = dump_json({"scores": [1.0, float("nan")], "top": float("inf"), "ok": 2})
    assert body == b'{"scores":[1.0,null],"top":null,"ok":2}'
    assert caplog.messages == [
        "the response holds NaN or Infinity, which JSON cannot carry; sent as null: $.scores[1] (nan), $.top (inf)"
    ]


def test_more_than_five_places_are_counted_not_listed(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="localserve"):
        assert dump_json([float("nan")] * 7) == b"[null,null,null,null,null,null,null]"
    assert caplog.messages[0].endswith("$[3] (nan), $[4] (nan) and 2 more")


def test_what_json_cannot_carry_is_the_handlers_500() -> None:
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(HandlerError, match=r"^The response cannot be serialised as JSON: it is nested too deeply\.$"):
        dump_json(deep)
    with pytest.raises(HandlerError, match=r"^The response cannot be serialised as JSON: Object of type object"):
        dump_json({"a": object()})


def test_a_lone_surrogate_is_written_as_an_escape() -> None:
    assert dump_json({"name": "a\udcffb"}) == b'{"name":"a\\udcffb"}'


def test_msgpack_carries_arrays_as_lists_and_bytes_as_bytes() -> None:
    body = dump_msgpack({"a": np.arange(3), "b": b"\x00\xff", "t": (1, 2)})
    assert msgpack.unpackb(body) == {"a": [0, 1, 2], "b": b"\x00\xff", "t": [1, 2]}


def test_csv_rows_of_dicts_share_one_header_in_order_of_appearance() -> None:
    assert dump_csv([{"a": 1}, {"b": "x,y", "a": 2}]) == b'a,b\n1,\n2,"x,y"\n'
    assert dump_csv([[1, 2], (3, 4), 5]) == b"1,2\n3,4\n5\n"
    assert dump_csv(["caf\u00e9"]) == "caf\u00e9\n".encode()
    assert dump_csv([]) == b""


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
