"""A model input as Cortex took it (a dict of input name -> value, or the value alone) -> the runtime's feed."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from localserve.errors import RequestError
from localserve.messages.lists import Feed, summarize_value


def coerce_feed(
    value: Any, inputs: Mapping[str, Callable[[Any], Any]], expected: str, signature: str | None = None
) -> Feed:
    """A model input as Cortex took it (a dict of input name -> value, or the value alone for a one-input
    model) -> the feed of the runtime: every input present, none unknown, each through its ``inputs`` function.

    ``expected`` lists the inputs for the messages ("'x' (float32 of shape [-1, 4])"); ``signature`` names
    the TensorFlow signature that has these inputs (None for an ONNX model).
    """
    if not isinstance(value, Mapping):
        if len(inputs) != 1:
            owner = "The model" if signature is None else f"Signature {signature!r}"
            raise RequestError(
                f"{owner} has {len(inputs)} inputs, so it needs a dict of input name -> value; "
                f"it expects {expected}; got {summarize_value(value)}."
            )
        ((name, coerce),) = inputs.items()
        return {name: coerce(value)}
    owner = "the model" if signature is None else f"signature {signature!r}"
    for name in inputs:
        if name not in value:
            keys = sorted(str(k) for k in value)
            raise RequestError(f"Input {name!r} is missing; {owner} expects {expected}; got keys {keys}.")
    if len(value) != len(inputs):
        unknown = next(str(k) for k in value if k not in inputs)
        raise RequestError(f"Unknown input {unknown!r}; {owner} expects {expected}.")
    return {name: coerce(value[name]) for name, coerce in inputs.items()}
