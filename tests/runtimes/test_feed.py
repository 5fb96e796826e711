"""A model input as Cortex took it (a dict of input name -> value, or the value alone for a one-input model) made
the runtime's feed; a missing, unknown or unnamed input refused with what the model expects."""

from __future__ import annotations

from typing import Any

import pytest

from localserve.errors import RequestError
from localserve.runtimes.feed import coerce_feed

ONE = {"x": lambda value: ("x", value)}
TWO = {"a": lambda value: ("a", value), "b": lambda value: ("b", value)}
EXPECTED = "'a' (float32 of shape [-1]), 'b' (int64 of shape [-1])"


def test_a_value_alone_feeds_a_one_input_model_and_a_dict_any_model() -> None:
    assert coerce_feed([1, 2], ONE, "'x'") == {"x": ("x", [1, 2])}
    assert coerce_feed({"b": 2, "a": 1}, TWO, EXPECTED) == {"a": ("a", 1), "b": ("b", 2)}


@pytest.mark.parametrize(
    ("value", "signature", "message"),
    [
        (
            [1, 2],
            None,
            f"The model has 2 inputs, so it needs a dict of input name -> value; it expects {EXPECTED}; got a list of "
            "2 numbers.",
        ),
        (
            [1, 2],
            "serving_default",
            f"Signature 'serving_default' has 2 inputs, so it needs a dict of input name -> value; it expects "
            f"{EXPECTED}; got a list of 2 numbers.",
        ),
        ({"a": 1}, None, f"Input 'b' is missing; the model expects {EXPECTED}; got keys ['a']."),
        ({"a": 1, "b": 2, "c": 3}, "predict", f"Unknown input 'c'; signature 'predict' expects {EXPECTED}."),
    ],
)
def test_refusals_say_what_the_model_expects(value: Any, signature: str | None, message: str) -> None:
    with pytest.raises(RequestError) as caught:
        coerce_feed(value, TWO, EXPECTED, signature)
    assert str(caught.value) == message
