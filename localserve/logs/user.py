"""The logger for handler and predictor code, and the capture that turns their prints into its lines."""

from __future__ import annotations

import codecs
import contextlib
import io
import logging
import os
import sys
import threading
from collections.abc import Iterator, Mapping
from typing import Any, TextIO

from localserve.logs.formatters import _RECORD_ATTRS, _RENAMED, RESERVED_KEYS


class _UserLogger(logging.Logger):
    """A Logger whose ``extra`` may hold any key: the keys a LogRecord owns are renamed, not refused."""

    def makeRecord(
        self,
        name: str,
        level: int,
        fn: str,
        lno: int,
        msg: object,
        args: Any,
        exc_info: Any,
        func: str | None = None,
        extra: Mapping[str, object] | None = None,
        sinfo: str | None = None,
    ) -> logging.LogRecord:
        if extra:
            extra = {(_RENAMED + k if k in _RECORD_ATTRS or k in RESERVED_KEYS else k): v for k, v in extra.items()}
        return super().makeRecord(name, level, fn, lno, msg, args, exc_info, func, extra, sinfo)


def _make_user_logger() -> logging.Logger:
    manager = logging.Logger.manager
    existing = manager.loggerDict.get("localserve.user")
    if isinstance(existing, logging.Logger):
        return existing
    previous = manager.loggerClass
    manager.setLoggerClass(_UserLogger)
    try:
        return logging.getLogger("localserve.user")
    finally:
        manager.loggerClass = previous


logger = _make_user_logger()
"""The logger for handler and predictor code: ``from localserve import logger``."""


class _PrintCapture(io.TextIOBase):
    """A stdout that turns each complete line into an INFO record of ``logger``; per-thread partial lines."""

    def __init__(self, original: TextIO) -> None:
        self.original = original
        self._partial: dict[int, str] = {}
        self._local = threading.local()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.original, "encoding", None) or "utf-8"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        """The real stdout's descriptor, for code that hands it to a subprocess or writes to it (``run``
        points it at stderr while user code runs: ``stdout_to_stderr``)."""
        return self.original.fileno()

    @property
    def buffer(self) -> _BytesCapture:
        """A binary view: bytes written here are decoded (UTF-8, undecodable bytes replaced) and logged too."""
        view = self.__dict__.get("_buffer")
        if view is None:
            view = self.__dict__["_buffer"] = _BytesCapture(self)
        return view

    def write(self, text: str) -> int:
        if getattr(self._local, "emitting", False):
            # A log handler writing to stdout: pass it on rather than loop.
            return self.original.write(text)
        thread = threading.get_ident()
        pending = self._partial.pop(thread, "") + text
        *lines, rest = pending.split("\n")
        if rest:
            self._partial[thread] = rest
        for line in lines:
            self._emit(line)
        return len(text)

    def flush(self) -> None:
        rest = self._partial.pop(threading.get_ident(), "")
        if rest:
            self._emit(rest)

    def flush_all(self) -> None:
        for thread in list(self._partial):
            rest = self._partial.pop(thread, "")
            if rest:
                self._emit(rest)

    def _emit(self, line: str) -> None:
        line = line.rstrip("\r")
        if not line.strip():
            return
        self._local.emitting = True
        try:
            logger.info(line)
        finally:
            self._local.emitting = False


class _BytesCapture(io.BufferedIOBase):
    """``sys.stdout.buffer`` of the capture: bytes become text lines of the capture."""

    def __init__(self, capture: _PrintCapture) -> None:
        self.capture = capture
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        payload = bytes(data)
        self.capture.write(self._decoder.decode(payload))
        return len(payload)

    def flush(self) -> None:
        self.capture.flush()


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Within it, file descriptor 1 is stderr's: what user code or a library writes there (``os.write(1, ...)``,
    a C library's printf, a subprocess) cannot reach ``run``'s stdout, which carries the response body alone."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


@contextlib.contextmanager
def capture_prints() -> Iterator[TextIO]:
    """Within it, what anyone ``print``s becomes an INFO log line; yields the real stdout."""
    current = sys.stdout
    if isinstance(current, _PrintCapture):
        yield current.original
        return
    capture = _PrintCapture(current)
    sys.stdout = capture
    try:
        yield current
    finally:
        capture.flush_all()
        if sys.stdout is capture:
            sys.stdout = current
