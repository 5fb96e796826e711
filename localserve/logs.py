"""Logging: JSON or text lines on stderr, tagged with the API and the request id; prints captured as logs.

Example::

    configure_logging("json", "info")
    with capture_prints() as stdout:     # a handler's print() becomes an INFO line on stderr
        token = request_id_var.set("a1b2c3")
        logger.info("received payload", extra={"payload": {"x": 1}})
        stdout.write(body)               # the real stdout, for the response body only

gives ``{"asctime": "2026-11-21 10:00:00,123", "levelname": "INFO", "message": "received payload",
"process": 235, "request_id": "a1b2c3", "payload": {"x": 1}}``.

``extra`` is flattened by one level, as Cortex did. Its keys may not replace a line's own fields:
``asctime``, ``levelname``, ``message``, ``labels``, ``process`` and ``exception`` in ``extra`` are
written as ``extra_<key>`` (``logger`` below accepts them; a plain ``logging.Logger`` raises for some).
A line over 5 MB is dropped and replaced by a warning that gives its size.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from typing import Any, TextIO

from localserve.errors import ConfigError

__all__ = [
    "access_log",
    "api_var",
    "capture_prints",
    "configure_logging",
    "flush_access_log",
    "logger",
    "request_id_var",
]

api_var: ContextVar[str | None] = ContextVar("localserve_api", default=None)
request_id_var: ContextVar[str | None] = ContextVar("localserve_request_id", default=None)

MAX_LINE_BYTES = 5 * 1024 * 1024
RESERVED_KEYS = frozenset({"asctime", "levelname", "message", "labels", "process", "exception"})
LEVELS = ("debug", "info", "warning", "error", "critical")

# Every attribute a LogRecord has of its own; the others came from ``extra``.
_RECORD_ATTRS = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime", "taskName"}
# Extras that other libraries add for their own formatters (uvicorn's coloured copy of the message).
_IGNORED_EXTRAS = frozenset({"color_message", "api", "request_id"})
_NOT_EXTRA = _RECORD_ATTRS | _IGNORED_EXTRAS
_RENAMED = "extra_"


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

_access_logger = logging.getLogger("localserve.access")


def _json_default(value: Any) -> Any:
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return value.tolist()
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        return value.decode("utf-8", "replace")
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return repr(value)


_ENCODER = json.JSONEncoder(ensure_ascii=False, default=_json_default)


class _Formatter(logging.Formatter):
    """Shared by both formats: the time cached per second, the context fields, the 5 MB limit."""

    _cached_second = -1
    _cached_time = ""

    def _asctime(self, record: logging.LogRecord) -> str:
        second = int(record.created)
        if second != self._cached_second:
            self._cached_time = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(second))
            self._cached_second = second
        return f"{self._cached_time},{int(record.msecs):03d}"

    def format(self, record: logging.LogRecord) -> str:
        fields = record.__dict__
        api = fields["api"] if "api" in fields else api_var.get()
        request_id = fields["request_id"] if "request_id" in fields else request_id_var.get()
        extra_keys = fields.keys() - _NOT_EXTRA
        extra = {k: v for k, v in fields.items() if k in extra_keys} if extra_keys else {}
        exception = None
        if record.exc_info:
            if not record.exc_text:
                record.exc_text = self.formatException(record.exc_info)
            exception = record.exc_text
        if record.stack_info:
            exception = (exception + "\n" if exception else "") + self.formatStack(record.stack_info)
        line = self.render(record, self._asctime(record), api, request_id, extra, exception)
        size = len(line)
        if size > MAX_LINE_BYTES // 4 and (size > MAX_LINE_BYTES or len(line.encode("utf-8")) > MAX_LINE_BYTES):
            size = len(line.encode("utf-8"))
            notice = logging.makeLogRecord({"levelno": logging.WARNING, "levelname": "WARNING"})
            notice.created, notice.msecs, notice.process = record.created, record.msecs, record.process
            notice.msg = f"A {record.levelname} log line of {size:,} bytes was dropped; the limit is 5 MB."
            line = self.render(notice, self._asctime(record), api, request_id, {}, None)
        return line

    def render(
        self,
        record: logging.LogRecord,
        asctime: str,
        api: str | None,
        request_id: str | None,
        extra: dict[str, Any],
        exception: str | None,
    ) -> str:
        raise NotImplementedError


class JsonFormatter(_Formatter):
    """One JSON object per line, Cortex's fields first."""

    def render(
        self,
        record: logging.LogRecord,
        asctime: str,
        api: str | None,
        request_id: str | None,
        extra: dict[str, Any],
        exception: str | None,
    ) -> str:
        data: dict[str, Any] = {
            "asctime": asctime,
            "levelname": record.levelname,
            "message": record.getMessage(),
            "process": record.process,
        }
        if api is not None:
            data["api"] = api
        if request_id is not None:
            data["request_id"] = request_id
        for key, value in extra.items():
            data[_RENAMED + key if key in data or key in RESERVED_KEYS else key] = value
        if exception is not None:
            data["exception"] = exception
        try:
            return _ENCODER.encode(data)
        except (TypeError, ValueError):  # e.g. a circular structure in extra
            return json.dumps({k: v if k not in extra else repr(v) for k, v in data.items()}, ensure_ascii=False)


class TextFormatter(_Formatter):
    """``2026-11-21 10:00:00,123 INFO [iris a1b2c3] message key=value``."""

    def render(
        self,
        record: logging.LogRecord,
        asctime: str,
        api: str | None,
        request_id: str | None,
        extra: dict[str, Any],
        exception: str | None,
    ) -> str:
        parts = [asctime, record.levelname]
        tags = " ".join(t for t in (api, request_id) if t)
        if tags:
            parts.append(f"[{tags}]")
        parts.append(record.getMessage())
        for key, value in extra.items():
            text = value if isinstance(value, str) and value and " " not in value else None
            if text is None:
                try:
                    text = _ENCODER.encode(value)
                except (TypeError, ValueError):
                    text = repr(value)
            parts.append(f"{key}={text}")
        line = " ".join(parts)
        return line + "\n" + exception if exception else line


_handler: logging.Handler | None = None


def configure_logging(log_format: str | None, level: str = "info", stream: TextIO | None = None) -> logging.Handler:
    """Send every log line to stderr as ``json`` or ``text`` (None: json unless stderr is a terminal)."""
    global _handler
    if level.lower() not in LEVELS:
        raise ConfigError(f"Unknown log level {level!r}; expected one of {', '.join(LEVELS)}.")
    stream = stream if stream is not None else sys.stderr
    if log_format is None:
        log_format = "text" if _isatty(stream) else "json"
    if log_format not in ("json", "text"):
        raise ConfigError(f"Unknown log format {log_format!r}; expected 'json' or 'text'.")
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    root = logging.getLogger()
    if _handler is not None:
        root.removeHandler(_handler)
    root.addHandler(handler)
    root.setLevel(level.upper())
    logging.getLogger("localserve").setLevel(level.upper())
    _handler = handler
    return handler


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class _AccessRecord(logging.LogRecord):
    """A LogRecord made in a fraction of the usual time: what an access line never varies is copied in."""

    def __init__(self, args: tuple[Any, ...]) -> None:  # no super().__init__(): skipping it is the point
        now = time.time()
        fields = self.__dict__  # formatters read the record's __dict__, so everything must be there
        fields.update(_ACCESS_CONSTANTS)
        fields["args"] = args
        fields["created"] = now
        fields["msecs"] = int((now - int(now)) * 1000)
        fields["relativeCreated"] = (now - _START) * 1000
        fields["thread"] = threading.get_ident()
        fields["threadName"] = threading.current_thread().name
        fields["process"] = os.getpid()


_START: float = getattr(logging, "_startTime", time.time())
_ACCESS_CONSTANTS = {
    **logging.LogRecord("localserve.access", logging.INFO, __file__, 0, "%s %s %d %.2f ms", (), None).__dict__,
    "funcName": "access_log",
}


def access_log(method: str, path: str, api: str | None, status: int, seconds: float, request_id: str | None) -> None:
    """One INFO line per request on ``localserve.access``; nothing is built when that level is off.

    On the event loop, with the handler of ``configure_logging``, lines are formatted at once
    but written together at most ``_AccessBuffer.FLUSH_AFTER`` seconds later: one write per
    batch instead of one per request (a write per line cost a quarter of the throughput).
    """
    if not _access_logger.isEnabledFor(logging.INFO):
        return
    latency_ms = round(seconds * 1000, 3)
    record = _AccessRecord((method, path, status, latency_ms))
    record.method, record.path, record.api, record.status = method, path, api, status
    record.latency_ms, record.request_id = latency_ms, request_id
    handler = _handler
    if handler is None or _access_logger.handlers or not isinstance(handler, logging.StreamHandler):
        _access_logger.handle(record)
        return
    _access_buffer.add(handler, handler.format(record))


class _AccessBuffer:
    """Access lines of the event-loop thread, written in one go per FLUSH_AFTER seconds."""

    FLUSH_AFTER = 0.05

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.handler: logging.StreamHandler[TextIO] | None = None

    def add(self, handler: logging.StreamHandler[TextIO], line: str) -> None:
        if not self.lines:
            try:
                asyncio.get_running_loop().call_later(self.FLUSH_AFTER, self.flush)
            except RuntimeError:  # not on an event loop: write now
                self.handler = handler
                self.lines.append(line)
                self.flush()
                return
        self.handler = handler
        self.lines.append(line)

    def flush(self) -> None:
        handler, lines = self.handler, self.lines
        if handler is None or not lines:
            return
        self.lines = []
        text = handler.terminator.join(lines) + handler.terminator
        handler.acquire()
        try:
            handler.stream.write(text)
            handler.flush()
        except Exception:
            handler.handleError(logging.makeLogRecord({"msg": "access log lines could not be written"}))
        finally:
            handler.release()


_access_buffer = _AccessBuffer()


def flush_access_log() -> None:
    """Write the access lines still buffered (at shutdown)."""
    _access_buffer.flush()


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
