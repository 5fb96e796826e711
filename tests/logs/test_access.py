"""The access log: one line per request, the JSON formatter's line byte for byte, written in chunks from the loop."""

from __future__ import annotations

import io
import json
import logging

from localserve import logs
from localserve.logs import access_log
from tests.logs.captured import ASCTIME, Captured


def test_access_log(captured: Captured) -> None:
    access_log("POST", "/iris", "iris", 200, 0.0012345, "a1b2c3")
    [line] = captured.json()
    assert line["message"] == "POST /iris 200 1.23 ms"
    assert {k: line[k] for k in ("method", "path", "api", "status", "latency_ms", "request_id")} == {
        "method": "POST",
        "path": "/iris",
        "api": "iris",
        "status": 200,
        "latency_ms": 1.234,
        "request_id": "a1b2c3",
    }
    logging.getLogger("localserve.access").setLevel(logging.WARNING)
    try:
        access_log("POST", "/iris", "iris", 200, 0.001, "x")
    finally:
        logging.getLogger("localserve.access").setLevel(logging.NOTSET)
    assert len(captured.lines()) == 1


def test_access_lines_are_those_the_json_formatter_writes(captured: Captured) -> None:
    """The access log's fast path writes, byte for byte, the line of the formatter it bypasses."""
    access = logging.getLogger("localserve.access")
    slow = io.StringIO()
    handler = logging.StreamHandler(slow)
    handler.setFormatter(logs.JsonFormatter())
    for args in [
        ("POST", "/iris", "iris", 200, 0.0012345, "a1b2c3"),
        ("GET", "/caf\u00e9", None, 404, 12.5, 'q"uo\\te\n'),
        ("POST", "/x", "x", 500, 0.0, None),
        ("PUT", '/a"b\\c\u00e9', 'a"pi', 201, 3.25, "r"),  # escaped pieces, made once and kept
        ("PUT", '/a"b\\c\u00e9', 'a"pi', 503, 0.5, "s"),
        ("POST", "/100%25/%s%d", "%s", 200, 7e-07, "%r%%"),  # % in every piece: the templates' own conversions
    ]:
        access_log(*args)  # the fast path: the handler of configure_logging
        access.addHandler(handler)
        access.propagate = False
        try:
            access_log(*args)  # a handler of its own: a LogRecord through the formatter
        finally:
            access.removeHandler(handler)
            access.propagate = True
    fast, formatted = captured.lines(), slow.getvalue().splitlines()
    assert len(fast) == len(formatted) == 6
    for a, b in zip(fast, formatted, strict=True):
        assert ASCTIME.match(json.loads(a)["asctime"])
        assert a.split(", ", 1)[1] == b.split(", ", 1)[1]  # all but the time


def test_access_lines_on_the_event_loop_are_written_together(captured: Captured) -> None:
    import asyncio

    writes: list[str] = []
    real_write = captured.stream.write
    captured.stream.write = lambda text: (writes.append(text), real_write(text))[1]  # type: ignore[method-assign]

    async def traffic() -> int:
        for i in range(5):
            access_log("POST", "/iris", "iris", 200, 0.001, f"r{i}")
        seen_before_flush = len(captured.lines())
        while not writes:  # until the buffer's flush (FLUSH_AFTER later) has written them
            await asyncio.sleep(0.01)
        return seen_before_flush

    assert asyncio.run(traffic()) == 0
    assert [line["request_id"] for line in captured.json()] == ["r0", "r1", "r2", "r3", "r4"]
    assert len(writes) == 1
    access_log("GET", "/x", "x", 404, 0.001, "now")  # no event loop: written at once
    assert captured.json()[-1]["request_id"] == "now"


def test_a_full_chunk_of_access_lines_is_written_on_the_next_turn_not_with_the_next_50_ms(captured: Captured) -> None:
    """Lines never pile up for FLUSH_AFTER: a burst of them would hold the loop for several turns (the c=1 p99)."""
    import asyncio

    from localserve.logs.access import _access_buffer

    chunk = _access_buffer.CHUNK

    async def traffic() -> tuple[int, int, int]:
        for i in range(chunk - 1):
            access_log("POST", "/iris", "iris", 200, 0.001, f"r{i}")
        await asyncio.sleep(0)
        short = len(captured.lines())  # a chunk less one: they wait for the timer
        access_log("POST", "/iris", "iris", 200, 0.001, f"r{chunk - 1}")
        before = len(captured.lines())
        await asyncio.sleep(0)  # one turn: the full chunk is written, long before FLUSH_AFTER
        return short, before, len(captured.lines())

    assert asyncio.run(traffic()) == (0, 0, chunk)
    assert [line["request_id"] for line in captured.json()] == [f"r{i}" for i in range(chunk)]


def test_a_long_batch_of_access_lines_is_written_a_chunk_per_turn_of_the_loop(captured: Captured) -> None:
    """Lines are made and written ``CHUNK`` at a time, requests being served between two chunks; in order;
    at shutdown all at once."""
    import asyncio

    from localserve.logs.access import _access_buffer, flush_access_log

    chunk = _access_buffer.CHUNK
    writes: list[str] = []
    real_write = captured.stream.write
    captured.stream.write = lambda text: (writes.append(text), real_write(text))[1]  # type: ignore[method-assign]

    async def traffic() -> tuple[int, int]:
        for i in range(3 * chunk + 8):
            access_log("POST", "/iris", "iris", 200, 0.001, f"r{i}")
        _access_buffer.flush()  # as its timer does
        first = len(captured.lines())
        while _access_buffer.lines:
            await asyncio.sleep(0)  # a turn of the loop: the next chunk
        for i in range(2 * chunk):
            access_log("POST", "/iris", "iris", 200, 0.001, f"s{i}")
        flush_access_log()  # at shutdown: every line now
        return first, len(captured.lines())

    first, last = asyncio.run(traffic())
    assert first == chunk
    assert last == 5 * chunk + 8
    assert [line["request_id"] for line in captured.json()] == [f"r{i}" for i in range(3 * chunk + 8)] + [
        f"s{i}" for i in range(2 * chunk)
    ]
    assert [text.count("\n") for text in writes] == [chunk, chunk, chunk, 8, 2 * chunk]
