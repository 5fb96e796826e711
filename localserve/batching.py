"""Dynamic batching of model calls: stack the inputs of concurrent requests, run once, split back.

The executor collects up to ``max_batch_size`` requests (waiting at most ``batch_interval``
for the batch to fill); the endpoint runs ``pre_inference`` per request, then ``run_batched``
here, then ``post_inference`` per request. Feeds that cannot be stacked together (other
shapes, other dtypes, no batch dimension) go in separate groups, so requests never fail
because of each other.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

import numpy as np

from localserve.errors import LocalServeError, RequestError
from localserve.runtimes import Feed

T = TypeVar("T")


def batch_key(feed: Feed) -> Hashable:
    """Feeds with equal keys can be concatenated on axis 0; None means 'run this one alone'."""
    sizes = {arr.shape[0] if arr.ndim else None for arr in feed.values()}
    if len(sizes) != 1 or None in sizes:
        return None
    return tuple((name, arr.dtype.str, arr.shape[1:]) for name, arr in sorted(feed.items()))


def group(items: list[tuple[T, Feed]]) -> list[list[tuple[T, Feed]]]:
    """Split (tag, feed) pairs into stackable groups, keeping arrival order inside each group."""
    groups: dict[Hashable, list[tuple[T, Feed]]] = {}
    alone: list[list[tuple[T, Feed]]] = []
    for item in items:
        key = batch_key(item[1])
        if key is None:
            alone.append([item])
        else:
            groups.setdefault(key, []).append(item)
    return [*groups.values(), *alone]


def run_batched(run: Callable[[Feed], Any], feeds: list[Feed]) -> list[Any]:
    """Run ``feeds`` (one stackable group) as one call; return each feed's share of the output."""
    if len(feeds) == 1:
        return [run(feeds[0])]
    sizes = [next(iter(feed.values())).shape[0] for feed in feeds]
    stacked = {name: np.concatenate([feed[name] for feed in feeds], axis=0) for name in feeds[0]}
    try:
        output = run(stacked)
    except RequestError:
        # The stacked input was refused (a model with a fixed batch size, say) though each part
        # was fine alone: a request never fails because of the others it was batched with.
        return [_alone(run, feed) for feed in feeds]
    total = sum(sizes)
    if not _splittable(output, total):
        # An output without the batch dimension cannot be shared out: run each feed alone.
        return [run(feed) for feed in feeds]
    return split(output, sizes)


def _alone(run: Callable[[Feed], Any], feed: Feed) -> Any:
    try:
        return run(feed)
    except LocalServeError as exc:
        return exc


def split(output: Any, sizes: list[int]) -> list[Any]:
    """The per-request slices of a batched output: a list of arrays (ONNX) or a dict of arrays (TF)."""
    offsets = np.cumsum([0, *sizes])
    bounds = list(itertools.pairwise(offsets))
    if isinstance(output, dict):
        return [{name: value[lo:hi] for name, value in output.items()} for lo, hi in bounds]
    return [[value[lo:hi] for value in output] for lo, hi in bounds]


def _splittable(output: Any, total: int) -> bool:
    values = output.values() if isinstance(output, dict) else output
    return all(isinstance(v, np.ndarray) and v.ndim > 0 and v.shape[0] == total for v in values)
