"""The access log: one INFO line per request, made cheaply and written in batches from the event loop."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from json.encoder import encode_basestring  # the JSON formatter's own escaping
from typing import Any, TextIO

from localserve.logs.context import installed
from localserve.logs.formatters import JsonFormatter

_access_logger = logging.getLogger("localserve.access")


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


def access_log(
    method: str,
    path: str,
    api: str | None,
    status: int,
    seconds: float,
    request_id: str | None,
    trace: tuple[str, str] | None = None,
) -> None:
    """One INFO line per request on ``localserve.access``; nothing is built when that level is off. ``trace``: the
    (trace_id, span_id) of a traced request.

    On the event loop, with ``configure_logging``'s handler, the lines are written together at most
    ``_AccessBuffer.FLUSH_AFTER`` seconds later: one write per batch, since a write per line cost much throughput.
    """
    if not _access_logger.isEnabledFor(logging.INFO):
        return
    handler = installed.handler  # read at each call: configure_logging may replace it
    if (
        handler is not None
        and type(handler.formatter) is JsonFormatter
        and not _access_logger.handlers
        and isinstance(handler, logging.StreamHandler)
    ):
        # Formatted when the batch is written: one warm loop over the batch costs less than a line
        # made between two requests, on the busiest thread.
        _access_buffer.add(handler, (time.time(), method, path, api, status, seconds, request_id, trace))
        return
    latency_ms = round(seconds * 1000, 3)
    record = _AccessRecord((method, path, status, latency_ms))
    record.method, record.path, record.api, record.status = method, path, api, status
    record.latency_ms, record.request_id = latency_ms, request_id
    if trace is not None:
        record.trace_id, record.span_id = trace
    if handler is None or _access_logger.handlers or not isinstance(handler, logging.StreamHandler):
        _access_logger.handle(record)
        return
    _access_buffer.add(handler, handler.format(record))


_second = -1
_second_text = ""
_pid = os.getpid()
_MILLIS = [f"{n:03d}" for n in range(1000)]  # the milliseconds of asctime, as logging's "%03d" writes them
# (method, path, api, status, with a request id) -> the fixed pieces of its line: what such a line never varies.
_line_pieces: dict[tuple[str, str, str | None, int, bool], tuple[str, str, str]] = {}


def _new_pid() -> None:
    global _pid
    _pid = os.getpid()
    _line_pieces.clear()  # they hold the pid


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_pid)


def _json_line(
    now: float,
    method: str,
    path: str,
    api: str | None,
    status: int,
    seconds: float,
    request_id: str | None,
    trace: tuple[str, str] | None = None,
) -> str:
    """The very line ``JsonFormatter`` writes for an access record made at ``now``, without a LogRecord.

    The pieces a line never varies are made once per (method, path, api, status), of which a served API has few, and
    joined with the varying ones in one f-string: a %-operation on a whole template cost twice as much (parsing it).
    """
    global _second, _second_text
    latency_ms = round(seconds * 1000, 3)
    second = int(now)
    if second != _second:
        _second_text = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(second))
        _second = second
    key = (method, path, api, status, request_id is not None)
    pieces = _line_pieces.get(key)
    if pieces is None:
        if len(_line_pieces) >= 256:  # paths a client makes up must not grow it without end
            _line_pieces.clear()
        pieces = _line_pieces[key] = _pieces(*key)
    message, fields, latency = pieces
    quoted_id = "" if request_id is None else encode_basestring(request_id)
    line = (
        f'{{"asctime": "{_second_text},{_MILLIS[int((now - second) * 1000)]}{message}{latency_ms:.2f}{fields}'
        f"{quoted_id}{latency}{latency_ms!r}}}"
    )
    if trace is None:
        return line
    return f'{line[:-1]}, "trace_id": "{trace[0]}", "span_id": "{trace[1]}"}}'  # hex digits: nothing to escape


def _pieces(method: str, path: str, api: str | None, status: int, with_id: bool) -> tuple[str, str, str]:
    """The fixed pieces of ``_json_line``'s line, between its varying fields: after the time, up to the latency in the
    message; after it, up to the request id (quoted, when there is one); after that, up to the latency again."""
    message = encode_basestring(f"{method} {path} {status} ")[:-1]  # '"POST /iris 200 ': the message, still open
    api_field = f', "api": {encode_basestring(api)}' if api is not None else ""
    id_field = ', "request_id": ' if with_id else ""
    return (
        f'", "levelname": "INFO", "message": {message}',
        f' ms", "process": {_pid}{api_field}{id_field}',
        f', "method": {encode_basestring(method)}, "path": {encode_basestring(path)}, "status": {status}, '
        '"latency_ms": ',
    )


# An access line: its text, or the fields of a JSON line still to be made (``_json_line``'s arguments).
Line = str | tuple[float, str, str, str | None, int, float, str | None, tuple[str, str] | None]


class _AccessBuffer:
    """Access lines of the event-loop thread, written in one go: every ``CHUNK`` lines, or ``FLUSH_AFTER`` seconds after
    the first one waiting.

    A full chunk is made and written on the loop's next turn, not with the lines that came after it: a whole interval's
    lines made at once held the loop for turns a request waited on, which made the p99 (benchmarks/README.md).
    """

    FLUSH_AFTER = 0.05
    CHUNK = 32  # lines made and written per turn of the event loop

    def __init__(self) -> None:
        self.lines: list[Line] = []
        self.handler: logging.StreamHandler[TextIO] | None = None

    def add(self, handler: logging.StreamHandler[TextIO], line: Line) -> None:
        lines = self.lines
        if not lines:
            try:
                asyncio.get_running_loop().call_later(self.FLUSH_AFTER, self.flush)
            except RuntimeError:  # not on an event loop: write now
                self.handler = handler
                lines.append(line)
                self.flush()
                return
        self.handler = handler
        lines.append(line)
        if len(lines) == self.CHUNK:  # a chunk's worth: written on the next turn, not with the interval's others
            try:
                asyncio.get_running_loop().call_soon(self.flush)
            except RuntimeError:  # a line from off the loop: write now
                self.flush()

    def flush(self, whole: bool = False) -> None:
        """Write the buffered lines: at most ``CHUNK`` on this turn of the event loop, the rest on the next ones.

        ``whole`` writes every line now (at shutdown, or off the loop).
        """
        handler, lines = self.handler, self.lines
        if handler is None or not lines:
            return
        if whole or len(lines) <= self.CHUNK:
            self.lines = []
        else:
            try:
                asyncio.get_running_loop().call_soon(self.flush)  # requests come in between
            except RuntimeError:  # not on the event loop: all of them now
                self.lines = []
            else:
                lines, self.lines = lines[: self.CHUNK], lines[self.CHUNK :]
        terminator = handler.terminator
        text = terminator.join(line if type(line) is str else _json_line(*line) for line in lines) + terminator
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
    _access_buffer.flush(whole=True)
