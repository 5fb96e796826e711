"""The error a finished job is answered with: its traceback and chain dropped (they would keep the request
alive), and anything that is no error of ours a logged 500."""

from __future__ import annotations

import logging

import pytest

from localserve.engine.answers import answer, as_error
from localserve.errors import InternalError, RequestError


def raised(exc: BaseException, cause: BaseException | None = None) -> BaseException:
    try:
        try:
            raise ValueError("inside")
        except ValueError:
            raise exc from cause
    except BaseException as caught:
        return caught


def test_our_errors_are_answered_without_their_traceback_or_chain() -> None:
    error = raised(RequestError("bad input"), KeyError("k"))
    assert error.__traceback__ is not None and error.__cause__ is not None and error.__context__ is not None
    answered = as_error(error, "iris")
    assert answered is error and str(answered) == "bad input"
    assert (answered.__traceback__, answered.__cause__, answered.__context__) == (None, None, None)


def test_anything_else_is_a_logged_internal_error(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, "localserve"):
        answered = as_error(raised(SystemExit(3)), "iris")
    assert isinstance(answered, InternalError)
    assert str(answered) == "Internal error: SystemExit: 3"
    assert caplog.messages == ["internal error while serving api 'iris'"]


def test_nothing_finished_is_nothing_to_answer() -> None:
    phases: list[list[float]] = []
    answer([], phases.append)  # no job: no loop to wake up
    assert phases == []
