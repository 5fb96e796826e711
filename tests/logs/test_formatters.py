"""The two line formats, JSON and text, and ``configure_logging``'s choices of them."""

from __future__ import annotations

import io
import logging
import os
import re

import numpy as np
import pytest

from localserve import logs
from localserve.errors import ConfigError
from localserve.logs import api_var, configure_logging, logger, request_id_var
from tests.logs.captured import ASCTIME, Captured


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
