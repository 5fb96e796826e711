"""Nested JSON lists checked a level at a time with the type checks in C (map, set, chain): the common case,
numbers for a float input, made an array in one numpy call; whether a nested list holds a boolean; and what
came, described in a few words for error messages."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import numpy as np


def float_list(value: list[Any], dtype: np.dtype[Any]) -> np.ndarray[Any, Any] | None:
    """The common case, a JSON list (of lists) of numbers for a float input, in one numpy call; else None.

    Every level is checked in C (map, set, chain) before numpy sees it: ints and floats at the leaves, lists and tuples
    above, and (for a short list to a narrower float) no finite value that would become infinite. Anything else, ragged
    rows included, is None: the general path decides it and words the error.
    """
    leaves: Any = value
    while True:
        types = set(map(type, leaves))
        if types <= _NUMBERS:
            break
        if not types <= _SEQUENCES:
            return None
        # One row (a batch of one, the common request) is checked where it is, without a copy.
        leaves = leaves[0] if len(leaves) == 1 else list(itertools.chain.from_iterable(leaves))
    limit = NARROW_LIMITS.get(dtype)
    if limit is not None and len(leaves) > _SHORT:
        return None  # the general path checks a long list in numpy
    # Past a few dozen leaves one numpy reduction checks the range faster than Python's min and max.
    wide = limit is not None and len(leaves) > _FEW
    if limit is not None and leaves and not wide and not (max(leaves) <= limit and min(leaves) >= -limit):
        return None  # NaN fails too: the general path keeps it
    try:
        array = np.array(value, dtype=np.float64 if wide else dtype)
    except (ValueError, OverflowError):  # ragged rows; an integer past float64
        return None
    if not wide:
        return array
    if not np.abs(array).max() <= limit:  # NaN fails too: the general path keeps it
        return None
    return array.astype(dtype)


_NUMBERS = frozenset({float, int})
_FEW = 32  # up to this many leaves, Python's min and max check the range; past it, numpy does
_SHORT = 4096  # leaves checked by float_list; longer lists are checked by the general path

# The largest finite value of each narrow float dtype: a float64 array within it casts without overflow.
NARROW_LIMITS = {np.dtype(t): float(np.finfo(t).max) for t in (np.float16, np.float32)}


def holds_bool(value: list[Any] | tuple[Any, ...]) -> bool:
    """Whether nested lists hold a bool; type checks run in C (map, set, chain), a level at a time."""
    items: Any = value
    while True:
        types = set(map(type, items))
        if bool in types or np.bool_ in types:
            return True
        if list not in types and tuple not in types:
            return False
        if not types <= _SEQUENCES:  # rows mixed with numbers: visit the rows alone
            items = [item for item in items if type(item) in _SEQUENCES]
        items = list(itertools.chain.from_iterable(items))


_SEQUENCES = frozenset({list, tuple})


Feed = dict[str, np.ndarray[Any, Any]]
"""Model inputs after coercion: input name -> array of the input's dtype."""


def summarize_value(value: Any) -> str:
    """A short description of what came, for error messages: 'a list of 3 numbers', 'float64 array of shape [2, 3]'."""
    if isinstance(value, np.ndarray):
        return f"a {value.dtype} array of shape {list(value.shape)}"
    if isinstance(value, list | tuple):
        kinds = {type(v).__name__ for v in value}
        if len(kinds) == 1 and isinstance(value[0] if value else None, int | float) and not isinstance(value[0], bool):
            return f"a list of {len(value)} numbers"
        if len(kinds) == 1 and value and isinstance(value[0], list | tuple):
            try:
                shape = list(np.asarray(value, dtype=object).shape)
            except ValueError:
                shape = None
            if shape is not None:
                return f"a nested list of shape {shape}"
        return f"a list of {len(value)} items"
    if isinstance(value, Mapping):
        return f"a mapping with keys {sorted(map(str, value))}"
    if isinstance(value, str):
        return f"a string of {len(value)} characters"
    if value is None:
        return "nothing (None)"
    return f"a {type(value).__name__}"
