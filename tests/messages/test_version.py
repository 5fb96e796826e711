"""A model version as requests name it: ASCII digits only, at most 18 of them; the 400 for anything else."""

from __future__ import annotations

import pytest

from localserve.errors import RequestError
from localserve.messages.version import MAX_VERSION_DIGITS, not_a_version, whole_number


@pytest.mark.parametrize(("text", "number"), [("1", 1), ("007", 7), ("9" * MAX_VERSION_DIGITS, int("9" * 18))])
def test_ascii_digits_are_a_version(text: str, number: int) -> None:
    assert whole_number(text) == number


@pytest.mark.parametrize("text", ["", "-1", "1.0", " 1", "\u00b2", "\u0661", "1" * (MAX_VERSION_DIGITS + 1), "latest"])
def test_anything_else_is_none(text: str) -> None:
    assert whole_number(text) is None


def test_the_error_names_the_rule_and_what_came() -> None:
    error = not_a_version("v" * 100)
    assert isinstance(error, RequestError) and error.status_code == 400
    assert str(error) == (
        f"model_version must be a whole number (at most 18 digits) or 'latest' (or 'highest'); got '{'v' * 56}...."
    )
