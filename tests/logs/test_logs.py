from __future__ import annotations

import io
import json
import logging
import os
import re
import sys
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import localserve
from localserve import logs
from localserve.errors import ConfigError
from localserve.logs import access_log, api_var, capture_prints, configure_logging, logger, request_id_var

ASCTIME = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}$")


class Captured:
    def __init__(self) -> None:
        self.stream = io.StringIO()

    def lines(self) -> list[str]:
        return self.stream.getvalue().splitlines()

    def json(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.lines()]


@pytest.fixture
def captured() -> Iterator[Captured]:
    root = logging.getLogger()
    levels = root.level, logging.getLogger("localserve").level
    out = Captured()
    handler = configure_logging("json", "info", stream=out.stream)
    try:
        yield out
    finally:
        root.removeHandler(handler)
        logs.installed.handler = None
        root.setLevel(levels[0])
        logging.getLogger("localserve").setLevel(levels[1])


def test_json_line_fields_like_cortex(captured: Captured) -> None:
    logger.info("received payload", extra={"payload": "this movie is awesome"})
    [line] = captured.json()
    assert list(line) == ["asctime", "levelname", "message", "process", "payload"]
    assert ASCTIME.match(line["asctime"])
    assert line["levelname"] == "INFO"
    assert line["message"] == "received payload"
    assert line["process"] == os.getpid()
    assert line["payload"] == "this movie is awesome"


def test_api_and_request_id_come_from_the_context(captured: Captured) -> None:
    api_token, id_token = api_var.set("iris"), request_id_var.set("a1b2c3")
    try:
        logger.warning("inside")
    finally:
        api_var.reset(api_token)
        request_id_var.reset(id_token)
    logger.info("outside")
    inside, outside = captured.json()
    assert (inside["api"], inside["request_id"], inside["levelname"]) == ("iris", "a1b2c3", "WARNING")
    assert "api" not in outside and "request_id" not in outside


def test_extra_is_flattened_by_one_level(captured: Captured) -> None:
    logger.info("m", extra={"payload": {"x": [1, 2], "y": {"z": 1}}, "scores": np.array([0.5, 0.25]), "n": np.int64(3)})
    [line] = captured.json()
    assert line["payload"] == {"x": [1, 2], "y": {"z": 1}}
    assert line["scores"] == [0.5, 0.25]
    assert line["n"] == 3


def test_reserved_keys_in_extra_are_renamed(captured: Captured) -> None:
    reserved = {"asctime": "a", "levelname": "b", "message": "c", "labels": {"d": 1}, "process": "e", "exception": "f"}
    logger.info("mine", extra={**reserved, "name": "g"})
    logging.getLogger("someone.else").info("theirs", extra={"labels": "h", "exception": "i"})
    mine, theirs = captured.json()
    assert (mine["message"], mine["levelname"], mine["process"]) == ("mine", "INFO", os.getpid())
    assert ASCTIME.match(mine["asctime"])
    assert "labels" not in mine and "exception" not in mine
    assert {k: mine[f"extra_{k}"] for k in reserved} == reserved
    assert mine["extra_name"] == "g"  # a LogRecord attribute: a plain Logger would raise KeyError
    assert (theirs["extra_labels"], theirs["extra_exception"]) == ("h", "i")
    assert "labels" not in theirs


def test_exception_goes_in_its_own_field(captured: Captured) -> None:
    try:
        1 / 0  # noqa: B018
    except ZeroDivisionError:
        logger.exception("predict failed")
    [line] = captured.json()
    assert line["message"] == "predict failed"
    assert line["levelname"] == "ERROR"
    assert line["exception"].startswith("Traceback (most recent call last):\n")
    assert line["exception"].endswith("ZeroDivisionError: division by zero")


def test_a_line_over_5_mb_is_dropped_with_a_warning(captured: Captured) -> None:
    token = request_id_var.set("r1")
    try:
        logger.info("x" * (5 * 1024 * 1024))
        logger.info("é" * (3 * 1024 * 1024))  # 3 M characters, 6 MB of UTF-8
        logger.info("x" * (5 * 1024 * 1024 - 200))  # just under: kept
    finally:
        request_id_var.reset(token)
    first, second, kept = captured.json()
    assert first["levelname"] == "WARNING"
    assert first["request_id"] == "r1"
    dropped = re.fullmatch(r"A INFO log line of ([\d,]+) bytes was dropped; the limit is 5 MB\.", first["message"])
    assert dropped is not None
    size = int(dropped[1].replace(",", ""))
    assert 5 * 1024 * 1024 < size < 5 * 1024 * 1024 + 200
    assert second["message"].startswith("A INFO log line of 6,291,")
    assert kept["message"] == "x" * (5 * 1024 * 1024 - 200)


def test_an_oversized_line_of_localserve_s_own_is_shortened_with_its_traceback(captured: Captured) -> None:
    """A handler raising with a 10 MB message: localserve's error line keeps the traceback, each line cut."""
    message = "m" * (10 * 1024 * 1024)
    try:
        raise ValueError(message)
    except ValueError as exc:
        logging.getLogger("localserve").error("request r1 failed: %s", exc, exc_info=True)
    [line] = captured.json()
    head = "request r1 failed: "
    kept = 10_000 - len(head)
    assert line["message"] == f"{head}{'m' * kept}... ({len(message) - kept:,} more characters cut)"
    assert line["exception"].startswith("Traceback (most recent call last):\n")
    assert "raise ValueError(message)" in line["exception"]
    kept = 10_000 - len("ValueError: ")
    assert line["exception"].endswith(f"ValueError: {'m' * kept}... ({len(message) - kept:,} more characters cut)")


def test_text_format(captured: Captured) -> None:
    configure_logging("text", "info", stream=captured.stream)
    api_token, id_token = api_var.set("iris"), request_id_var.set("a1b2c3")
    logger.info("hello %s", "world", extra={"key": "value", "n": 3, "words": "two words"})
    api_var.reset(api_token)
    request_id_var.reset(id_token)
    logger.info("no context")
    first, second = captured.lines()
    assert first[:23] and ASCTIME.match(first[:23])
    assert first[23:] == ' INFO [iris a1b2c3] hello world key=value n=3 words="two words"'
    assert second[23:] == " INFO no context"
    assert len(logging.getLogger().handlers) == len({*logging.getLogger().handlers})
    assert sum(isinstance(h.formatter, logs._Formatter) for h in logging.getLogger().handlers) == 1


def test_format_and_level_choices() -> None:
    root = logging.getLogger()
    before = root.level
    try:
        handler = configure_logging(None, "debug", stream=io.StringIO())  # not a terminal: JSON
        assert isinstance(handler.formatter, logs.JsonFormatter)
        assert root.level == logging.DEBUG
        root.removeHandler(handler)
        logs.installed.handler = None
    finally:
        root.setLevel(before)
    with pytest.raises(ConfigError, match=r"^Unknown log format 'xml'; expected 'json' or 'text'\.$"):
        configure_logging("xml")
    with pytest.raises(ConfigError, match=r"^Unknown log level 'loud'; expected one of debug, info, warning"):
        configure_logging("json", "loud")


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


def test_prints_become_log_lines_with_the_request_id(captured: Captured) -> None:
    before = sys.stdout
    with capture_prints() as stdout:
        assert stdout is before
        token = request_id_var.set("a1b2c3")
        print("hello")
        print("part", end="")
        print(" two")
        print()
        print("unfinished", end="")
        request_id_var.reset(token)
    assert sys.stdout is before
    lines = captured.json()
    assert [(line["message"], line.get("request_id")) for line in lines] == [
        ("hello", "a1b2c3"),
        ("part two", "a1b2c3"),
        ("unfinished", None),  # flushed when the capture ends
    ]
    assert all(line["levelname"] == "INFO" for line in lines)


def test_print_capture_keeps_each_threads_partial_line(captured: Captured) -> None:
    start = threading.Barrier(4)

    def worker(name: str) -> None:
        request_id_var.set(name)
        start.wait()
        for i in range(50):
            print(f"{name}-", end="")
            print(i)

    with capture_prints():
        threads = [threading.Thread(target=worker, args=(f"t{n}",)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    lines = captured.json()
    assert len(lines) == 200
    for line in lines:
        assert re.fullmatch(rf"{line['request_id']}-\d+", line["message"])


def test_a_log_handler_on_stdout_does_not_loop(captured: Captured) -> None:
    with capture_prints() as stdout:
        echo = logging.StreamHandler()  # made inside: its stream is the capture
        echo.stream = sys.stdout
        logger.addHandler(echo)
        try:
            print("once")
        finally:
            logger.removeHandler(echo)
        assert stdout is not sys.stdout
    assert [line["message"] for line in captured.json()] == ["once"]


def test_logger_is_public() -> None:
    assert localserve.logger is logger
    assert "logger" in localserve.__all__
    assert logger.name == "localserve.user"
