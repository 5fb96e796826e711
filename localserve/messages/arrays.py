"""Turn what a handler returns (lists, numbers, strings, arrays) into arrays a model accepts.

Shared by the ONNX and TensorFlow runtimes so both explain a bad input in the same words:
``Input 'x' expects float32 of shape [-1, 4]; got a list of 3 numbers.``
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import numpy as np

from localserve.errors import RequestError
from localserve.messages.error_text import short_repr
from localserve.messages.lists import NARROW_LIMITS, float_list, holds_bool, summarize_value

STRING = np.dtype(object)
"""The numpy dtype of string tensors (elements are ``str`` or ``bytes``)."""

MAX_RANK = 32
"""The most dimensions an input may have: numpy walks no array of more element by element (``.flat``)."""

_NUMPY_RANK = 64  # the most dimensions numpy makes (its 2.x)
_EXACT = 2.0**53  # every integer below it is a float64 exactly (2**53 + 1 becomes 2**53)


def dtype_name(dtype: np.dtype[Any] | None) -> str:
    """'float32', 'int64', 'string' (object), or 'unsupported' when numpy has no such dtype."""
    if dtype is None:
        return "unsupported"
    return "string" if dtype == STRING else dtype.name


def shape_text(shape: Sequence[int | None]) -> str:
    """[-1, 4]: unknown dimensions are written -1, as numpy's reshape takes them."""
    return "[" + ", ".join("-1" if d is None or d < 0 else str(d) for d in shape) + "]"


def expectation(dtype: np.dtype[Any] | None, shape: Sequence[int | None] | None) -> str:
    """ "float32 of shape [-1, 4]" ("of any shape" when the rank is unknown)."""
    where = "of any shape" if shape is None else f"of shape {shape_text(shape)}"
    return f"{dtype_name(dtype)} {where}"


@functools.lru_cache(maxsize=1024)
def _prefix(name: str, dtype: np.dtype[Any], shape: tuple[int | None, ...] | None) -> str:
    # Built once per input: dtype.name is slow enough to show on the hot path.
    return f"Input {name!r} expects {expectation(dtype, shape)}"


def to_array(
    name: str,
    value: Any,
    dtype: np.dtype[Any],
    shape: Sequence[int | None] | None,
    *,
    keep_bytes: bool = False,
    check_shape: bool = True,
    described: Callable[[], str] | None = None,
) -> np.ndarray[Any, Any]:
    """Cast ``value`` to ``dtype`` and fit it to ``shape`` (None = free dimension).

    Reshaped to ``shape`` when at most one dimension is free (4 features fit ``[-1, 4]``); else the shape must match, or
    with ``check_shape=False`` is the runtime's to judge. A failure is a RequestError naming the input, the expected
    dtype and shape, and what came; ``described`` words the first part (V2's "Input 'x' is FP32 of shape [1, 4]").
    """
    array = float_list(value, dtype) if dtype.kind == "f" and type(value) is list else None
    if array is None:  # anything but a list of numbers for a float input: checked, and its error worded, here
        prefix = described() if described is not None else _prefix(name, dtype, None if shape is None else tuple(shape))
        array = _cast(value, dtype, prefix, keep_bytes=keep_bytes)
    if shape is None or _matches(array.shape, shape):
        return array
    free = sum(1 for d in shape if d is None or d < 0)
    if free <= 1:
        try:
            return array.reshape([-1 if d is None or d < 0 else d for d in shape])
        except ValueError:
            pass
    elif not check_shape:
        return array
    raise RequestError(f"{_prefix(name, dtype, tuple(shape))}; got {summarize_value(value)}.")


def _matches(actual: tuple[int, ...], shape: Sequence[int | None]) -> bool:
    if len(actual) != len(shape):
        return False
    for size, wanted in zip(actual, shape, strict=True):  # a loop: cheaper than all() on a generator for a few dims
        if wanted is not None and wanted >= 0 and wanted != size:
            return False
    return True


def _cast(value: Any, dtype: np.dtype[Any], prefix: str, *, keep_bytes: bool) -> np.ndarray[Any, Any]:
    if dtype == STRING:
        return _cast_strings(value, prefix, keep_bytes=keep_bytes)
    raw = _as_array(value, prefix)
    kind = _number_kind(value, raw, dtype, prefix)
    if dtype.kind in "iu":
        if kind == "f" and isinstance(value, list | tuple) and raw.size and not np.abs(raw).max() < _EXACT:
            raw = _as_array(value, prefix, STRING)  # numpy made float64s of the ints too, and 2**53 + 1 is lost:
            kind = "o"  # the numbers as sent (NaN too, refused there)
        return _cast_integers(raw, dtype, prefix, kind)
    if dtype.kind == "b" and kind != "b":
        bad = np.flatnonzero((raw != 0) & (raw != 1))
        if bad.size:
            _fail(prefix, raw, int(bad[0]), "is not a boolean (true/false or 0/1)")
    if dtype.kind == "f":
        return _to_float(raw, dtype, prefix)
    try:
        array = raw.astype(dtype, copy=False)
    except (TypeError, ValueError, OverflowError) as exc:
        raise RequestError(f"{prefix}; the value could not be converted to {dtype.name} ({exc}).") from None
    return array


def _as_array(value: Any, prefix: str, dtype: np.dtype[Any] | None = None) -> np.ndarray[Any, Any]:
    """``value`` as an array (of ``dtype``, else what numpy makes of it) of at most ``MAX_RANK`` dimensions."""
    if isinstance(value, np.ndarray):
        raw = value
    else:
        try:
            raw = np.asarray(value, dtype=dtype)
        except ValueError as exc:
            if "maximum number of dimension" in str(exc):  # past numpy's own limit (64)
                raise RequestError(f"{prefix}; got a list nested more than {MAX_RANK} levels deep.") from None
            raise RequestError(f"{prefix}; got {_ragged(value)}.") from None
    if raw.ndim > MAX_RANK:
        if raw is value:
            raise RequestError(
                f"{prefix}; got an array of {raw.ndim} dimensions, past the {MAX_RANK} an input may have."
            )
        if raw.ndim >= _NUMPY_RANK:  # an object array stops there, its elements the lists nested deeper
            raise RequestError(f"{prefix}; got a list nested more than {MAX_RANK} levels deep.")
        raise RequestError(
            f"{prefix}; got a list nested {raw.ndim} levels deep, past the {MAX_RANK} an input may have."
        )
    return raw


def _number_kind(value: Any, raw: np.ndarray[Any, Any], dtype: np.dtype[Any], prefix: str) -> str:
    """The kind of numbers ``raw`` holds ('b', 'i', 'u' or 'f'); a string, a boolean where numbers are
    expected, or anything else is refused, naming the element."""
    kind: str = raw.dtype.kind
    if kind in "US":
        # numpy made every element a string ([1.0, "2"] -> ["1.0", "2"]): name the first that was one
        items = raw if not isinstance(value, list | tuple) else np.asarray(value, dtype=object)
        first = next((i for i, item in enumerate(items.flat) if isinstance(item, str | bytes | np.str_ | np.bytes_)), 0)
        _fail(prefix, items, first, "is a string, not a number")
    if kind in "iuf" and dtype.kind != "b" and isinstance(value, list | tuple) and holds_bool(value):
        # numpy turned [true, 2.5] into [1.0, 2.5]: name the boolean instead
        items = np.asarray(value, dtype=object)
        first = next(i for i, item in enumerate(items.flat) if isinstance(item, bool | np.bool_))
        _fail(prefix, items, first, "is a boolean, not a number")
    if kind == "b" and dtype.kind != "b":
        _fail(prefix, raw, 0, "is a boolean, not a number")
    if kind == "O":
        return _object_kind(value, raw, dtype, prefix)
    if kind not in "biuf":
        raise RequestError(f"{prefix}; got {summarize_value(value)}.")
    return kind


def _object_kind(value: Any, raw: np.ndarray[Any, Any], dtype: np.dtype[Any], prefix: str) -> str:
    """An object array's elements checked one by one: 'f' when any is a float, else 'i'."""
    for index, item in enumerate(raw.flat):
        if isinstance(item, list | tuple):
            raise RequestError(f"{prefix}; got {_ragged(value)}.")
        if isinstance(item, str | bytes):
            _fail(prefix, raw, index, "is a string, not a number")
        if isinstance(item, bool | np.bool_) and dtype.kind != "b":
            _fail(prefix, raw, index, "is a boolean, not a number")
        if not isinstance(item, bool | int | float | np.number):
            _fail(prefix, raw, index, f"could not be converted to {dtype.name}")
    return "f" if any(isinstance(item, float | np.floating) for item in raw.flat) else "i"


def _to_float(raw: np.ndarray[Any, Any], dtype: np.dtype[Any], prefix: str) -> np.ndarray[Any, Any]:
    """``raw`` (numbers) as the float ``dtype``; a finite value that becomes infinite is refused."""
    if raw.dtype == dtype:
        return raw
    limit = NARROW_LIMITS.get(dtype)
    if limit is not None and raw.dtype.kind == "f" and raw.size and np.abs(raw).max() <= limit:
        # The common case in one reduction: every value finite and in range, so the cast cannot overflow.
        return raw.astype(dtype)
    try:
        with np.errstate(over="ignore"):  # overflow is reported below, naming the value
            array = raw.astype(dtype, copy=False)
    except (TypeError, ValueError, OverflowError) as exc:
        raise RequestError(f"{prefix}; the value could not be converted to {dtype.name} ({exc}).") from None
    if dtype.itemsize < 8 and array.size and not np.isfinite(array).all():
        # 1e39 becomes inf in float32: refuse it rather than change it (an infinity sent as such is kept)
        source = raw.astype(np.float64)
        bad = np.flatnonzero(np.isinf(array) & np.isfinite(source))
        if bad.size:
            _fail(prefix, raw, int(bad[0]), f"is out of range for {dtype.name}")
    return array


def _cast_integers(raw: np.ndarray[Any, Any], dtype: np.dtype[Any], prefix: str, kind: str) -> np.ndarray[Any, Any]:
    """``raw`` as the integer ``dtype``: whole numbers within its range. Kind ``o``: the numbers as sent (an object
    array of ints and floats), each made an int exactly, as numpy's float64 would not past 2**53."""
    info = np.iinfo(dtype)
    if kind == "o":  # each checked and named as sent (orjson reads an integer past 64 bits as a float)
        whole = []
        for index, item in enumerate(raw.flat):
            if isinstance(item, float | np.floating) and not (np.isfinite(item) and float(item).is_integer()):
                _fail(prefix, raw, index, "is not a whole number")
            number = int(item)
            if not info.min <= number <= info.max:
                _fail(prefix, raw, index, f"is out of range for {dtype.name}")
            whole.append(number)
        return np.array(whole, dtype=dtype).reshape(raw.shape)
    if kind == "f":
        numbers = raw.astype(np.float64)
        bad = np.flatnonzero(~np.isfinite(numbers) | (numbers != np.trunc(numbers)))
        if bad.size:
            _fail(prefix, raw, int(bad[0]), "is not a whole number")
    if raw.size and kind != "b":
        for index, item in enumerate(raw.flat):
            if not info.min <= int(item) <= info.max:
                _fail(prefix, raw, index, f"is out of range for {dtype.name}")
    return raw.astype(dtype, copy=False)


def _cast_strings(value: Any, prefix: str, *, keep_bytes: bool) -> np.ndarray[Any, Any]:
    raw = _as_array(value, prefix, STRING)
    if raw.dtype.kind == "S":
        return raw.astype(object)
    if raw.dtype.kind == "U":  # its str may hold a lone surrogate too: checked below
        raw = raw.astype(object)
    elif raw.dtype.kind != "O":
        _fail(prefix, raw, 0, "is not a string")
    out = np.empty(raw.shape, dtype=object)
    for index, item in enumerate(raw.flat):
        if isinstance(item, list | tuple):
            raise RequestError(f"{prefix}; got {_ragged(value)}.")
        out.flat[index] = _string(prefix, raw, index, item, keep_bytes)
    return out


def _string(prefix: str, raw: np.ndarray[Any, Any], index: int, item: Any, keep_bytes: bool) -> str | bytes:
    """One element of a string input: a str UTF-8 can carry (not JSON's lone "\\ud800"), or bytes."""
    if isinstance(item, str):
        if not item.isascii():
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as exc:
                _fail(prefix, raw, index, f"holds {item[exc.start]!r} at {exc.start}, {_SURROGATE}")
        return item
    if not isinstance(item, bytes):
        _fail(prefix, raw, index, "is not a string")
    if keep_bytes:
        return item
    try:
        return item.decode("utf-8")
    except UnicodeDecodeError:
        _fail(prefix, raw, index, "is not valid UTF-8")


_SURROGATE = "a lone surrogate (half a UTF-16 pair), which UTF-8 cannot carry"


def _ragged(value: Any) -> str:
    return f"a nested list whose rows have different lengths ({summarize_value(value)})"


def _fail(prefix: str, raw: np.ndarray[Any, Any], flat_index: int, reason: str) -> NoReturn:
    item = raw.flat[flat_index]
    if isinstance(item, np.generic):
        item = item.item()
    text = short_repr(item)
    where = ""
    if raw.ndim:
        position = ", ".join(str(int(i)) for i in np.unravel_index(flat_index, raw.shape))
        where = f" at [{position}]"
    raise RequestError(f"{prefix}; the value {text}{where} {reason}.")
