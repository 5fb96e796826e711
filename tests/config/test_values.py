"""The value checks every section parser shares: keys with the nearest valid one, strings, mappings, integers in
their range, durations; each refusal names the place, the key, the bad value and what was expected."""

from __future__ import annotations

import math
from typing import Any

import pytest

from localserve.config.values import (
    at_line,
    check_keys,
    describe,
    duration,
    integer,
    opt_mapping,
    opt_str,
    parse_duration,
    suggest,
)
from localserve.errors import ConfigError

WHERE = "cortex.yaml: api 'iris'"


class Lines(dict[str, Any]):
    """A mapping the YAML loader made: it knows the line of each key."""

    key_lines = {"batching": 7}


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (5, 5.0),
        (0.5, 0.5),
        ("5ms", 0.005),
        ("0.5s", 0.5),
        ("2m", 120.0),
        ("1h", 3600.0),
        ("250us", 0.00025),
        ("3", 3.0),
    ],
)
def test_durations_in_seconds(value: Any, seconds: float) -> None:
    assert parse_duration(value) == pytest.approx(seconds)


@pytest.mark.parametrize("value", [True, -1, "-1s", "5 fortnights", None, [5]])
def test_what_is_no_duration_is_a_value_error(value: Any) -> None:
    with pytest.raises(ValueError):
        parse_duration(value)


def test_duration_refusals_say_what_a_duration_looks_like() -> None:
    with pytest.raises(ConfigError) as caught:
        duration("soon", "timeout", WHERE)
    assert (
        str(caught.value)
        == f"{WHERE}: invalid value 'soon' for 'timeout'; expected a duration like 5ms, 0.5s or 60 (seconds)."
    )
    with pytest.raises(ConfigError) as caught:
        duration(math.inf, "timeout", WHERE)
    assert str(caught.value) == f"{WHERE}: invalid value inf for 'timeout'; expected a finite duration."
    with pytest.raises(ConfigError) as caught:
        duration(0, "batch_interval", WHERE, "batching", positive=True)
    assert str(caught.value) == (
        f"{WHERE}: invalid value 0 for 'batch_interval' in 'batching'; expected a duration above 0, like 0.5s or 60 "
        "(seconds)."
    )
    assert duration(0, "timeout", WHERE) == 0.0


def test_an_unknown_key_names_the_nearest_valid_one() -> None:
    check_keys({"max_batch_size": 1}, ("max_batch_size", "batch_interval"), WHERE, "batching")
    with pytest.raises(ConfigError) as caught:
        check_keys({"max_batchsize": 1}, ("max_batch_size", "batch_interval"), WHERE, "batching")
    assert str(caught.value) == f"{WHERE}: unknown key 'max_batchsize' in 'batching'. Did you mean 'max_batch_size'?"
    with pytest.raises(ConfigError) as caught:
        check_keys({"zzz": 1}, ("model", "handler"), WHERE, None)
    assert str(caught.value) == f"{WHERE}: unknown key 'zzz'."
    assert suggest("handlr", ["handler", "model"]) == " Did you mean 'handler'?"


def test_strings_and_mappings() -> None:
    assert opt_str({"a": "x"}, "a", WHERE) == "x"
    assert opt_str({}, "a", WHERE) is None
    with pytest.raises(ConfigError, match=r"invalid value '' for 'a'; expected a non-empty string\.$"):
        opt_str({"a": ""}, "a", WHERE)
    assert opt_mapping({}, "m", WHERE) == {}
    with pytest.raises(ConfigError, match=r"invalid value \[1\] for 'm'; expected a mapping\.$"):
        opt_mapping({"m": [1]}, "m", WHERE)


def test_integers_in_their_range_with_the_section_named() -> None:
    assert integer({}, "max_queue", WHERE, 100, minimum=1) == 100
    with pytest.raises(ConfigError) as caught:
        integer({"max_batch_size": 5000}, "max_batch_size", f"{WHERE}: batching", 1, minimum=1)
    assert str(caught.value) == (
        f"{WHERE}: invalid value 5000 for 'max_batch_size' in 'batching'; expected an integer from 1 to 4,096."
    )
    with pytest.raises(ConfigError) as caught:
        integer({"max_queue": True}, "max_queue", WHERE, 100, minimum=1)
    assert str(caught.value) == f"{WHERE}: invalid value True for 'max_queue'; expected an integer >= 1."


def test_the_line_of_a_key_is_named_when_the_loader_knew_it() -> None:
    assert at_line(Lines(), "batching", WHERE) == "cortex.yaml, line 7: api 'iris'"
    assert at_line(Lines(), "compute", WHERE) == WHERE
    assert at_line({}, "batching", WHERE) == WHERE


@pytest.mark.parametrize(
    ("value", "words"), [(None, "nothing"), (3, "int 3"), ("x", "str 'x'"), ([1], "list"), ({}, "dict")]
)
def test_values_are_described_by_type(value: Any, words: str) -> None:
    assert describe(value) == words
