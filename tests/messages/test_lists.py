"""Nested JSON lists: the fast float path and where it steps aside, booleans found at any depth, what came in words."""

from __future__ import annotations

import numpy as np
import pytest

from localserve.messages.lists import float_list, holds_bool, summarize_value

F32 = np.dtype(np.float32)


def test_numbers_become_one_array_of_the_dtype() -> None:
    array = float_list([[1, 2.5], [3, 4]], F32)
    assert array is not None and array.dtype == F32
    assert array.tolist() == [[1.0, 2.5], [3.0, 4.0]]
    single = float_list([[0.5, 1.5, 2.5]], F32)  # a batch of one, checked without a copy
    assert single is not None and single.shape == (1, 3)


@pytest.mark.parametrize(
    "value",
    [
        [[1, 2], [3]],  # ragged rows
        [1, "2"],  # a string among numbers
        [True, 1.0],  # a bool is not a number here
        [[1.0, None]],
        [1e39],  # finite in float64, infinite in float32
        [float("nan")],  # the general path keeps NaN and words it
        [2**1100],  # an integer past float64
    ],
)
def test_anything_else_is_left_to_the_general_path(value: list[object]) -> None:
    assert float_list(value, F32) is None


def test_a_long_list_past_the_range_is_left_to_the_general_path() -> None:
    assert float_list([1.0] * 100 + [1e39], F32) is None  # checked by one numpy reduction
    wide = float_list([1.0] * 100 + [2.0], F32)
    assert wide is not None and wide.dtype == F32 and wide[-1] == 2.0
    assert float_list([1e39] * 5, np.dtype(np.float64)) is not None  # no narrowing: no limit


def test_holds_bool_looks_at_every_depth() -> None:
    assert holds_bool([[1, 2], [3, [4, True]]])
    assert holds_bool([1, [np.bool_(False)]])
    assert not holds_bool([[1, 2], [3, [4, 5.0]]])
    assert not holds_bool([])


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (np.zeros((2, 3)), "a float64 array of shape [2, 3]"),
        ([1, 2.5, 3], "a list of 3 items"),  # int and float: two kinds
        ([1, 2, 3], "a list of 3 numbers"),
        ([True, False], "a list of 2 items"),
        ([[1, 2], [3, 4], [5, 6]], "a nested list of shape [3, 2]"),
        ({"b": 1, "a": 2}, "a mapping with keys ['a', 'b']"),
        ("hello", "a string of 5 characters"),
        (None, "nothing (None)"),
        (3.5, "a float"),
    ],
)
def test_what_came_in_a_few_words(value: object, words: str) -> None:
    assert summarize_value(value) == words
