"""Feeds as the batcher handles them: the bucket sizes, which feeds stack, stacking with padding, splitting.

Pure functions over numpy arrays, apart from the threads and queues of ``batcher.py``.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from localserve.runtimes import Feed


def bucket_sizes(max_batch_size: int, configured: Sequence[int] | None = None) -> tuple[int, ...]:
    """The batch sizes a model may see: ``configured``, or the powers of two up to ``max_batch_size`` (and it)."""
    if configured:
        return tuple(sorted(set(configured)))
    sizes = {1 << i for i in range(max_batch_size.bit_length()) if 1 << i <= max_batch_size}
    sizes.add(max_batch_size)
    return tuple(sorted(sizes))


def batch_key(feed: Feed) -> tuple[Hashable, int]:
    """(key, rows): feeds with equal keys can be concatenated on axis 0, and this one has ``rows`` rows in it; a key of
    None means 'run this one alone' (rows 0). One call for both: the batcher needs both of every feed it stacks."""
    if len(feed) == 1:  # the common feed, keyed in a third of the time (one input: a key of one triple)
        ((name, arr),) = feed.items()
        return ((name, arr.dtype.str, arr.shape[1:]), arr.shape[0]) if arr.ndim else (None, 0)
    sizes = {arr.shape[0] if arr.ndim else None for arr in feed.values()}
    if len(sizes) != 1 or None in sizes:
        return None, 0
    return tuple((name, arr.dtype.str, arr.shape[1:]) for name, arr in sorted(feed.items())), sizes.pop() or 0


def lone_rows(feed: Feed) -> int:
    """The batch dimension of a feed that runs alone, or 0 when it has none (the rows ``batch_key`` tells, in a
    quarter of the time: a lone feed is not grouped, so its key is not needed)."""
    rows = -1
    for arr in feed.values():
        if not arr.ndim or (rows >= 0 and arr.shape[0] != rows):
            return 0
        rows = arr.shape[0]
    return max(rows, 0)


def stack(feeds: Sequence[Feed], total: int, rows: int) -> Feed:
    """``feeds`` (``total`` rows in all) concatenated on axis 0 into arrays of ``rows`` rows; the rows past theirs are
    zeros (empty strings for string inputs).

    Each input's array is made at the bucket's size and the feeds copied into it: one copy of each row, where
    concatenating and then padding copied and allocated every row twice.
    """
    stacked = {}
    for name, first in feeds[0].items():
        parts = [feed[name] for feed in feeds]
        out = np.empty((rows, *first.shape[1:]), dtype=first.dtype)
        np.concatenate(parts, axis=0, out=out[:total])
        if rows > total:
            out[total:] = "" if first.dtype == object else 0
        stacked[name] = out
    return stacked


def split(output: Any, sizes: list[int]) -> list[Any]:
    """The per-feed slices of a batched output (a list of arrays for ONNX, a dict for TensorFlow)."""
    bounds = list(itertools.pairwise(itertools.accumulate(sizes, initial=0)))
    if isinstance(output, dict):
        return [{name: value[lo:hi] for name, value in output.items()} for lo, hi in bounds]
    if len(output) == 1:  # one output (the common model): no inner comprehension, a call, per feed
        (value,) = output
        return [[value[lo:hi]] for lo, hi in bounds]
    return [[value[lo:hi] for value in output] for lo, hi in bounds]


def splittable(output: Any, total: int) -> bool:
    """Whether every output has the batch dimension ``total`` (else it cannot be shared out)."""
    values = output.values() if isinstance(output, dict) else output
    return all(isinstance(v, np.ndarray) and v.ndim > 0 and v.shape[0] == total for v in values)


def whole_batch(entries: Sequence[tuple[Any, Feed]], max_rows: int) -> int | None:
    """How many of the (tag, feed) ``entries`` make up ``max_rows`` rows (at least one), or None if they fall short."""
    rows = 0
    for count, (_, feed) in enumerate(entries, start=1):
        rows += lone_rows(feed) or 1
        if rows >= max_rows:
            return count if rows == max_rows or count == 1 else count - 1
    return None


def chunks(indexes: list[int], rows: list[int], max_rows: int) -> list[list[int]]:
    """Consecutive runs of feeds (their ``rows`` by index) whose rows add up to at most ``max_rows``."""
    found: list[list[int]] = []
    current: list[int] = []
    total = 0
    for index in indexes:
        n = rows[index]
        if current and total + n > max_rows:
            found.append(current)
            current, total = [], 0
        current.append(index)
        total += n
    if current:
        found.append(current)
    return found
