"""The log lines ``configure_logging`` writes, captured in a string for the logs' tests (the ``captured`` fixture)."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator
from typing import Any

import pytest

from localserve import logs
from localserve.logs import configure_logging

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
