"""``--log-config``: a JSON, YAML or INI logging config applied over localserve's, as uvicorn applies its own."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from localserve.errors import ConfigError
from localserve.logs import configured_logging

YAML = """
version: 1
formatters: {plain: {format: "%(levelname)s:%(name)s:%(message)s"}}
handlers: {file: {class: logging.FileHandler, filename: FILE, formatter: plain}}
loggers: {localserve: {handlers: [file], level: WARNING, propagate: false}}
"""

INI = """
[loggers]
keys=root,localserve

[handlers]
keys=file

[formatters]
keys=plain

[logger_root]
handlers=

[logger_localserve]
handlers=file
level=INFO
qualname=localserve
propagate=0

[handler_file]
class=FileHandler
args=(FILE,)
formatter=plain

[formatter_plain]
format=%(levelname)s:%(name)s:%(message)s
"""


@pytest.mark.parametrize(
    ("suffix", "text", "expected"),
    [(".yaml", YAML, ["WARNING:localserve:kept"]), (".ini", INI, ["INFO:localserve:info", "WARNING:localserve:kept"])],
)
def test_a_yaml_or_ini_config_is_applied(tmp_path: Path, suffix: str, text: str, expected: list[str]) -> None:
    out = tmp_path / "out.log"
    config = tmp_path / f"logging{suffix}"
    config.write_text(text.replace("FILE", repr(str(out)) if suffix == ".ini" else str(out)))
    with configured_logging("text", "info", config_file=config):
        logging.getLogger("localserve").info("info")
        logging.getLogger("localserve").warning("kept")
        logging.getLogger("localserve.access").info("an existing child logger is not disabled")
        for handler in logging.getLogger("localserve").handlers:
            handler.close()
        lines = out.read_text().splitlines()
    assert lines[: len(expected)] == expected
    assert logging.getLogger("localserve").handlers == [] and logging.getLogger("localserve").propagate


def test_a_broken_config_is_a_clear_error(tmp_path: Path) -> None:
    config = tmp_path / "logging.json"
    config.write_text('{"version": 1, "handlers": {"h": {"class": "no.such.Handler"}}}')
    with pytest.raises(ConfigError) as info, configured_logging("text", "info", config_file=config):
        pass
    assert str(info.value).startswith(f"--log-config {config}: cannot apply it: Unable to configure handler 'h'")
    config.write_text("[1, 2]")
    with pytest.raises(ConfigError) as info, configured_logging("text", "info", config_file=config):
        pass
    assert str(info.value) == (
        f"--log-config {config}: cannot apply it: expected a mapping (logging.config.dictConfig's schema, with version: 1)"
    )
