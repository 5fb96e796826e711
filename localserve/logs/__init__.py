"""Logging: JSON or text lines on stderr, tagged with the API and the request id; prints captured as logs.

Example::

    configure_logging("json", "info")
    with capture_prints() as stdout:     # a handler's print() becomes an INFO line on stderr
        token = request_id_var.set("a1b2c3")
        logger.info("received payload", extra={"payload": {"x": 1}})
        stdout.write(body)               # the real stdout, for the response body only

gives ``{"asctime": "2026-11-21 10:00:00,123", "levelname": "INFO", "message": "received payload", "process": 235,
"request_id": "a1b2c3", "payload": {"x": 1}}``.

``extra`` is flattened by one level, as Cortex did; a key that would replace a line's own field (``asctime``,
``levelname``, ``message``, ``labels``, ``process``, ``exception``) is written as ``extra_<key>``. A line over 5 MB is
replaced by a warning giving its size (localserve's own are shortened first). The package: ``formatters``, ``user`` (the
user logger, print capture), ``access`` (the access log), ``context`` (the per-request context).
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from localserve.errors import ConfigError

__all__ = [
    "access_log",
    "api_var",
    "apply_log_config",
    "capture_prints",
    "configure_logging",
    "configured_logging",
    "flush_access_log",
    "installed",
    "logger",
    "request_id_var",
]

from localserve.logs.access import access_log, flush_access_log
from localserve.logs.context import api_var, installed, request_id_var
from localserve.logs.formatters import MAX_LINE_BYTES as MAX_LINE_BYTES
from localserve.logs.formatters import RESERVED_KEYS as RESERVED_KEYS
from localserve.logs.formatters import JsonFormatter, TextFormatter
from localserve.logs.formatters import _Formatter as _Formatter  # the tests' isinstance checks
from localserve.logs.user import capture_prints, logger

LEVELS = ("debug", "info", "warning", "error", "critical")


def configure_logging(
    log_format: str | None, level: str = "info", stream: TextIO | None = None, config_file: Path | None = None
) -> logging.Handler:
    """Send every log line to stderr as ``json`` or ``text`` (None: json unless stderr is a terminal);
    ``config_file`` (``--log-config``) is applied over that (``apply_log_config``)."""
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
    if installed.handler is not None:
        root.removeHandler(installed.handler)
    root.addHandler(handler)
    root.setLevel(level.upper())
    logging.getLogger("localserve").setLevel(level.upper())
    installed.handler = handler
    if config_file is not None:
        apply_log_config(config_file)
    return handler


def apply_log_config(path: Path) -> None:
    """``--log-config``: a logging config file applied as uvicorn applies its own ``--log-config``.

    ``.json`` and ``.yaml``/``.yml`` are ``logging.config.dictConfig`` dicts, anything else an INI file
    for ``logging.config.fileConfig``. Loggers the file does not name keep working
    (``disable_existing_loggers`` is False unless the file says otherwise, as in uvicorn's own config).
    """
    import logging.config

    suffix = path.suffix.lower()
    try:
        if suffix in (".json", ".yaml", ".yml"):
            text = path.read_text(encoding="utf-8")
            if suffix == ".json":
                import json

                config = json.loads(text)
            else:
                import yaml

                config = yaml.safe_load(text)
            if not isinstance(config, dict):
                raise ValueError("expected a mapping (logging.config.dictConfig's schema, with version: 1)")
            config.setdefault("disable_existing_loggers", False)
            logging.config.dictConfig(config)
        else:
            if not path.is_file():
                raise FileNotFoundError(f"no such file {str(path)!r}")
            logging.config.fileConfig(path, disable_existing_loggers=False)
    except Exception as exc:  # json, yaml, configparser and logging.config each raise their own
        raise ConfigError(f"--log-config {path}: cannot apply it: {exc}") from None
    if installed.handler is not None and installed.handler not in logging.getLogger().handlers:
        installed.handler = None  # the access log writes through the root's handlers now


@contextlib.contextmanager
def configured_logging(
    log_format: str | None, level: str = "info", config_file: Path | None = None
) -> Iterator[logging.Handler]:
    """``configure_logging`` for a while: the root's handlers and the levels it replaced are back afterwards."""
    root, ours = logging.getLogger(), logging.getLogger("localserve")
    handlers, root_level, our_level, previous = list(root.handlers), root.level, ours.level, installed.handler
    our_handlers, our_propagate = list(ours.handlers), ours.propagate  # a --log-config may change them
    try:
        yield configure_logging(log_format, level, config_file=config_file)
    finally:
        flush_access_log()
        root.handlers[:] = handlers
        root.setLevel(root_level)
        ours.handlers[:], ours.propagate = our_handlers, our_propagate
        ours.setLevel(our_level)
        installed.handler = previous


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
