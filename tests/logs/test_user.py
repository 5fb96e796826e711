"""The logger of user code, and prints turned into its lines with the request id of the thread that printed."""

from __future__ import annotations

import logging
import re
import sys
import threading

import localserve
from localserve.logs import capture_prints, logger, request_id_var
from tests.logs.captured import Captured


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
