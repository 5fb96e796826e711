"""A download's progress without a terminal: a line at each further tenth of a known size, or every
``LOG_EVERY`` seconds for a size the server did not give; with rate and ETA. The clock is the test's (a
stand-in for ``time.monotonic``), so no time decides what is logged."""

from __future__ import annotations

import logging

import pytest

from localserve.runtimes import progress
from localserve.runtimes.progress import LOG_EVERY, download_progress, human_size

MiB = 1024 * 1024


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    made = Clock()
    monkeypatch.setattr(progress, "time", made)
    return made


def test_a_known_size_is_logged_at_each_further_tenth(clock: Clock, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="localserve"):
        lines = download_progress("https://h/m.onnx", 100 * MiB, bar=False)
        clock.now += 2
        lines.update(5 * MiB)  # not yet a tenth
        lines.update(10 * MiB)
        clock.now += 2
        lines.update(35 * MiB)  # three tenths at once: one line
        lines.update(36 * MiB)
        lines.update(100 * MiB)  # the end: the caller's "Downloaded" line
        lines.close()
    assert caplog.messages == [
        "Downloading https://h/m.onnx (100.0 MiB)",
        "Downloading https://h/m.onnx: 10% (10.0 MiB of 100.0 MiB), 5.0 MiB/s, ETA 18 s",
        "Downloading https://h/m.onnx: 35% (35.0 MiB of 100.0 MiB), 8.8 MiB/s, ETA 7 s",
    ]


def test_an_unknown_size_is_logged_every_log_every_seconds(clock: Clock, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="localserve"):
        lines = download_progress("s3://b/m", None, bar=False)
        clock.now += LOG_EVERY - 1
        lines.update(MiB)
        clock.now += 1
        lines.update(3 * MiB)
    assert caplog.messages == [
        "Downloading s3://b/m (size unknown)",
        f"Downloading s3://b/m: 3.0 MiB, {human_size(3 * MiB / LOG_EVERY)}/s",
    ]


@pytest.mark.parametrize(
    ("n", "text"), [(0, "0 B"), (1023, "1023 B"), (2048, "2.0 KiB"), (5 * MiB, "5.0 MiB"), (3 * 1024**4, "3072.0 GiB")]
)
def test_human_sizes(n: int, text: str) -> None:
    assert human_size(n) == text
