"""The value checks every section parser shares: known keys, strings, mappings, integers and durations,
each refused with a ConfigError that names the place, the key, the bad value and what was expected."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from localserve.config.schema import _DURATION_UNITS, DURATION_RE
from localserve.errors import ConfigError


def at_line(raw: Any, key: str, where: str) -> str:
    """``where`` with the line of ``key`` in the YAML file, when the loader recorded it."""
    lines = getattr(raw, "key_lines", None)
    if lines and key in lines:
        source, _, rest = where.partition(": ")
        return f"{source}, line {lines[key]}: {rest}"
    return where


def parse_duration(value: Any) -> float:
    """Seconds from a number or a string like ``5ms``, ``0.5s``, ``2m``; ValueError otherwise."""
    if isinstance(value, bool):
        raise ValueError(value)
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError(value)
        return float(value)
    if isinstance(value, str):
        match = DURATION_RE.match(value.strip())
        if match:
            return float(match.group(1)) * _DURATION_UNITS[match.group(2)]
    raise ValueError(value)


def check_keys(raw: Mapping[str, Any], valid: tuple[str, ...], where: str, section: str | None) -> None:
    """Refuse a key of ``raw`` that is not in ``valid``, naming the nearest valid key."""
    for key in raw:
        if key not in valid:
            place = f" in {section!r}" if section else ""
            raise ConfigError(f"{where}: unknown key {key!r}{place}." + suggest(str(key), valid))


def suggest(word: str, options: list[str] | tuple[str, ...]) -> str:
    """The hint " Did you mean 'option'?" for the option closest to ``word``; nothing when none is close."""
    import difflib  # lazy: only for an error's suggestion; a few milliseconds of every start otherwise

    close = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    return f" Did you mean {close[0]!r}?" if close else ""


def opt_str(raw: Mapping[str, Any], key: str, where: str) -> str | None:
    """``raw[key]`` as a non-empty string, or None when it is not set."""
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: invalid value {value!r} for {key!r}; expected a non-empty string.")
    return value


def opt_mapping(raw: Mapping[str, Any], key: str, where: str) -> dict[str, Any]:
    """``raw[key]`` as a mapping, or an empty dict when it is not set."""
    value = raw.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: invalid value {value!r} for {key!r}; expected a mapping.")
    return value


def integer(raw: Mapping[str, Any], key: str, where: str, default: Any, *, minimum: int) -> Any:
    """``raw[key]`` (or ``default``) as an integer from ``minimum`` to its maximum in MAXIMUMS."""
    value = raw.get(key, default)
    if value is None:
        return None
    maximum = MAXIMUMS.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum or (maximum and value > maximum):
        section = ""
        if ": " in where and where.rsplit(": ", 1)[1] in ("compute", "batching"):
            where, section = where.rsplit(": ", 1)
            section = f" in {section!r}"
        expected = f"an integer from {minimum} to {maximum:,}" if maximum else f"an integer >= {minimum}"
        raise ConfigError(f"{where}: invalid value {value!r} for {key!r}{section}; expected {expected}.")
    return value


MAXIMUMS = {
    # Threads and processes are made at start: 10^20 of them would exhaust the machine before a word.
    "threads_per_process": 1024,
    "model_threads": 1024,
    "min_replicas": 1000,
    "max_replicas": 1000,
    "init_replicas": 1000,
    # Every bucket size up to it is warmed with a batch of zeros at load.
    "max_batch_size": 4096,
}
"""The largest value each integer key takes."""


def duration(value: Any, key: str, where: str, section: str | None = None, *, positive: bool = False) -> float:
    """``value`` as a finite number of seconds (above 0 with ``positive``)."""
    place = f" in {section!r}" if section else ""
    try:
        seconds = parse_duration(value)
    except ValueError:
        raise ConfigError(
            f"{where}: invalid value {value!r} for {key!r}{place}; expected a duration like 5ms, 0.5s or 60 (seconds)."
        ) from None
    if not math.isfinite(seconds):  # .nan would mean "no deadline" silently, .inf never ends
        raise ConfigError(f"{where}: invalid value {value!r} for {key!r}{place}; expected a finite duration.")
    if positive and seconds <= 0:
        raise ConfigError(
            f"{where}: invalid value {value!r} for {key!r}{place}; expected a duration above 0, like 0.5s or 60 "
            "(seconds)."
        )
    return seconds


def describe(value: Any) -> str:
    """A value as an error message names it: its type and repr ("nothing" for None)."""
    if value is None:
        return "nothing"
    return f"{type(value).__name__} {value!r}" if not isinstance(value, list | dict) else type(value).__name__
