"""The two line formats, JSON and text: Cortex's fields, ``extra`` flattened by one level, the 5 MB limit."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from localserve.logs.context import api_var, request_id_var
from localserve.logs.trace_ids import trace_var

MAX_LINE_BYTES = 5 * 1024 * 1024
LINE_CHARS = 10_000  # of one line of an oversized message or traceback of localserve's own
RESERVED_KEYS = frozenset({"asctime", "levelname", "message", "labels", "process", "exception"})

# Every attribute a LogRecord has of its own; the others came from ``extra``.
_RECORD_ATTRS = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime", "taskName"}
# Extras that other libraries add for their own formatters (uvicorn's coloured copy of the message).
_IGNORED_EXTRAS = frozenset({"color_message", "api", "request_id", "trace_id", "span_id"})
_NOT_EXTRA = _RECORD_ATTRS | _IGNORED_EXTRAS
_RENAMED = "extra_"


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
        trace = (fields["trace_id"], fields.get("span_id")) if "trace_id" in fields else trace_var.get()
        if trace is not None:  # a line written while serving a traced request: its trace and server span
            extra = {"trace_id": trace[0], "span_id": trace[1], **extra}
        exception = None
        if record.exc_info:
            if not record.exc_text:
                record.exc_text = self.formatException(record.exc_info)
            exception = record.exc_text
        if record.stack_info:
            exception = (exception + "\n" if exception else "") + self.formatStack(record.stack_info)
        line = self.render(record, self._asctime(record), api, request_id, extra, exception)
        if _oversized(line) and _ours(record.name):
            # A handler raising with a 10 MB message: the traceback is worth more than the rule.
            short = logging.makeLogRecord(record.__dict__)
            short.msg, short.args = shorten(record.getMessage()), None
            exception = None if exception is None else shorten(exception)
            line = self.render(short, self._asctime(record), api, request_id, extra, exception)
        if _oversized(line):
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


def _oversized(line: str) -> bool:
    size = len(line)
    return size > MAX_LINE_BYTES // 4 and (size > MAX_LINE_BYTES or len(line.encode("utf-8")) > MAX_LINE_BYTES)


def _ours(name: str) -> bool:
    """Whether a logger is localserve's own (its lines are shortened; user code's are dropped, as Cortex did)."""
    return name == "localserve" or (name.startswith("localserve.") and name != "localserve.user")


def shorten(text: str, limit: int = MAX_LINE_BYTES // 16) -> str:
    """``text`` with each line cut at ``LINE_CHARS`` characters, then, if still over ``limit``, its middle."""
    if len(text) <= LINE_CHARS:
        return text
    lines = [
        line if len(line) <= LINE_CHARS else f"{line[:LINE_CHARS]}... ({len(line) - LINE_CHARS:,} more characters cut)"
        for line in text.split("\n")
    ]
    text = "\n".join(lines)
    if len(text) > limit:
        half = limit // 2
        text = f"{text[:half]}\n... ({len(text) - 2 * half:,} characters cut) ...\n{text[-half:]}"
    return text


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
        """One JSON line: time, level, message, process, api, request id, ``extra`` and the exception."""
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
        """One human line: time, level, [api request-id], message, ``key=value`` extras, the exception."""
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
