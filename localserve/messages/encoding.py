"""Values to JSON, msgpack and CSV bytes, as the platforms wrote them: JSON byte for byte the standard library's
(orjson writes it where the bytes agree), numpy values and datetimes included, NaN sent as null with a
warning; and whether a client's Accept header asks for msgpack."""

from __future__ import annotations

import datetime
import enum
import io
import json
import logging
import math
import re
import sys
from collections.abc import Mapping
from typing import Any

import numpy as np
import orjson

from localserve.errors import HandlerError

log = logging.getLogger("localserve")


def json_default(value: Any) -> Any:
    """json.dumps hook: numpy arrays and scalars, datetimes, decimals, sets, bytes, enums."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "SO":
            return [json_default(v) if isinstance(v, bytes | np.ndarray) else v for v in value.tolist()]
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    decimal = sys.modules.get("decimal")  # not imported: no value can be a Decimal (and a start spares its import)
    if decimal is not None and isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    if isinstance(value, bytes | bytearray):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            pass
    if isinstance(value, enum.Enum):
        return value.value
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def dump_json(value: Any) -> bytes:
    """Compact UTF-8 JSON, byte for byte as the standard library writes it (as the platforms did).

    (orjson writes most of it, see ``_dumps``.)
    NaN and ±Infinity are not JSON: they are written as ``null`` and a warning names where
    they were, so a client's JSON parser never fails on what we send.
    """
    try:
        return _dumps(value)
    except UnicodeEncodeError:  # a lone surrogate (JSON input may carry one): written as a \\u escape
        return json.dumps(value, default=json_default, separators=(",", ":"), allow_nan=False).encode()
    except ValueError as exc:
        if "Out of range float values" not in str(exc):
            raise HandlerError(f"The response cannot be serialised as JSON: {exc}.") from None
    except TypeError as exc:
        raise HandlerError(f"The response cannot be serialised as JSON: {exc}.") from None
    except RecursionError:
        raise HandlerError("The response cannot be serialised as JSON: it is nested too deeply.") from None
    found: list[str] = []
    plain = _without_non_finite(json.loads(json.dumps(value, default=json_default)), "$", found)
    shown = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
    log.warning("the response holds NaN or Infinity, which JSON cannot carry; sent as null: %s", shown)
    return _dumps(plain)


def _dumps(value: Any) -> bytes:
    """orjson's bytes when they are the standard library's, else the standard library's.

    orjson writes some floats differently (``0.00001`` for ``1e-05``), NaN as null where the standard library refuses
    it, and refuses big integers and non-string keys. Output where one of these could hide is written again by the
    standard library, so the bytes are always its own (tests/messages/test_response.py compares them).
    """
    try:
        out: bytes = orjson.dumps(value, default=json_default, option=_ORJSON_OPTIONS)
    except TypeError:  # orjson.JSONEncodeError: the standard library decides (and words any error)
        pass
    else:
        if _as_the_standard_library(out):
            return out
    return _ENCODER.encode(value).encode("utf-8")


def _as_the_standard_library(out: bytes) -> bool:
    """Whether orjson's ``out`` holds none of the places where its bytes may differ from the standard library's: a digit
    before an ``e``, ``.0000``, ``null``.

    Three searches, each led by a byte that memchr finds, many times faster than one regular expression with the three
    alternatives tried at every byte.
    """
    return (
        b".0000" not in out
        and (b"n" not in out or b"null" not in out)
        and (b"e" not in out or _DIGIT_E.search(out) is None)
    )


_ORJSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS  # both to json_default
_DIGIT_E = re.compile(rb"e(?<=[0-9]e)")  # led by its literal e, which the search skips to; then the digit before


# Made once: json.dumps with any option builds a new JSONEncoder on every call (a third of its time here).
_ENCODER = json.JSONEncoder(default=json_default, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _without_non_finite(value: Any, path: str, found: list[str]) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        found.append(f"{path} ({value})")
        return None
    if isinstance(value, dict):
        return {k: _without_non_finite(v, f"{path}.{k}", found) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_non_finite(v, f"{path}[{i}]", found) for i, v in enumerate(value)]
    return value


def dump_msgpack(value: Any) -> bytes:
    """``value`` as msgpack (numpy arrays as lists); a HandlerError when it cannot be."""
    import msgpack

    try:
        return msgpack.packb(value, default=_msgpack_default, use_bin_type=True)  # type: ignore[no-any-return]
    except (TypeError, ValueError) as exc:
        raise HandlerError(f"The response cannot be serialised as msgpack: {exc}.") from None


def _msgpack_default(value: Any) -> Any:
    """``json_default``'s conversions, worded for msgpack: msgpack calls it also for an integer past 64 bits."""
    if isinstance(value, bytes | bytearray):
        return bytes(value)
    if isinstance(value, int):  # its digits may pass what str() writes (sys.get_int_max_str_digits)
        raise ValueError(f"an integer of {value.bit_length()} bits is beyond msgpack's 64 (send it as a string)")
    try:
        converted = json_default(value)
    except TypeError:
        converted = 0j  # refused below, as a numpy complex64 made a complex is
    if isinstance(converted, complex):
        raise TypeError(f"an object of type {type(value).__name__} has no msgpack form")
    return converted


def dump_csv(rows: list[Any]) -> bytes:
    """Rows as CSV (UTF-8): dicts under a header row of their keys in order of appearance, else one row each."""
    import csv  # lazy: CSV answers only; a few milliseconds of every start otherwise

    out = io.StringIO()
    if rows and all(isinstance(r, Mapping) for r in rows):
        fieldnames: list[str] = []
        for row in rows:
            fieldnames.extend(k for k in row if k not in fieldnames)
        writer = csv.DictWriter(out, fieldnames=fieldnames, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    else:
        plain = csv.writer(out, lineterminator="\n")
        for row in rows:
            plain.writerow(row if isinstance(row, list | tuple) else [row])
    return out.getvalue().encode("utf-8")


_QVALUE = re.compile(r"0(\.[0-9]{0,3})?|1(\.0{0,3})?")  # RFC 9110's qvalue


def _weight(value: str) -> float:
    """A media range's ``q``; one that is no qvalue (``2``, ``-1``, ``x``) counts as 0: the range is not taken."""
    value = value.strip()
    return float(value) if _QVALUE.fullmatch(value) else 0.0


def wants_msgpack(accept: str | None) -> bool:
    """Whether an Accept header asks for msgpack: named with a q above 0, and no lower than JSON's.

    ``application/msgpack;q=0, application/json`` refuses msgpack; ``application/msgpack,
    application/json`` (equal weights) gets it, as it always did.
    """
    if accept is None or "msgpack" not in accept.lower():
        return False
    weights: dict[str, float] = {}
    for item in accept.split(","):
        media, *params = (part.strip() for part in item.split(";"))
        q = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                q = _weight(value)
        weights[media.lower()] = max(q, weights.get(media.lower(), 0.0))
    msgpack_q = max(weights.get("application/msgpack", 0.0), weights.get("application/x-msgpack", 0.0))
    json_q = weights.get("application/json", weights.get("application/*", weights.get("*/*", 0.0)))
    return msgpack_q > 0 and msgpack_q >= json_q
