"""Feeds as the batcher handles them: bucket sizes, which feeds stack, stacking with padding, splitting back."""

from __future__ import annotations

import numpy as np
import pytest

from localserve.engine.feeds import (
    batch_key,
    bucket_sizes,
    chunks,
    lone_rows,
    split,
    splittable,
    stack,
    whole_batch,
)


@pytest.mark.parametrize(
    ("max_batch_size", "configured", "expected"),
    [(1, None, (1,)), (8, None, (1, 2, 4, 8)), (12, None, (1, 2, 4, 8, 12)), (32, [32, 1, 8], (1, 8, 32))],
)
def test_bucket_sizes(max_batch_size: int, configured: list[int] | None, expected: tuple[int, ...]) -> None:
    assert bucket_sizes(max_batch_size, configured) == expected


def test_stack_copies_each_feed_once_into_the_bucket_and_pads_with_zeros_or_empty_strings() -> None:
    a = {"x": np.full((2, 3), 1.5, np.float32), "s": np.array([["a"], ["b"]], dtype=object)}
    b = {"x": np.full((1, 3), 2.5, np.float32), "s": np.array([["c"]], dtype=object)}
    stacked = stack([a, b], 3, 5)
    assert stacked["x"].dtype == np.float32 and stacked["x"].shape == (5, 3)
    assert stacked["x"].tolist() == [[1.5] * 3, [1.5] * 3, [2.5] * 3, [0.0] * 3, [0.0] * 3]
    assert stacked["s"].tolist() == [["a"], ["b"], ["c"], [""], [""]]
    alone = stack([b], 1, 4)  # one feed, padded
    assert alone["x"].tolist() == [[2.5] * 3, [0.0] * 3, [0.0] * 3, [0.0] * 3]
    assert not np.shares_memory(alone["x"], b["x"]) and b["x"].shape == (1, 3)  # the request's array is untouched
    exact = stack([a, b], 3, 3)  # no padding
    assert exact["x"].tolist() == [[1.5] * 3, [1.5] * 3, [2.5] * 3]


def test_feeds_share_a_key_when_they_stack_whatever_their_rows() -> None:
    def feed(**arrays: tuple[tuple[int, ...], str]) -> dict[str, np.ndarray]:
        return {name: np.zeros(shape, dtype) for name, (shape, dtype) in arrays.items()}

    def key(feed: dict[str, np.ndarray]) -> object:
        return batch_key(feed)[0]

    one = key(feed(x=((1, 4), "float32")))
    assert one == key(feed(x=((5, 4), "float32")))  # rows differ: they stack
    assert one != key(feed(x=((1, 3), "float32")))  # another row shape
    assert one != key(feed(x=((1, 4), "float64")))  # another dtype
    assert one != key(feed(y=((1, 4), "float32")))  # another input
    assert batch_key(feed(x=((), "float32"))) == (None, 0)  # no batch dimension: runs alone
    two = key(feed(a=((2, 4), "float32"), b=((2,), "int64")))
    assert two == key(feed(b=((3,), "int64"), a=((3, 4), "float32")))  # the inputs' order does not count
    assert two != one
    assert batch_key(feed(a=((2, 4), "float32"), b=((3,), "int64"))) == (None, 0)  # their batch dimensions disagree
    assert [part[0].tolist() for part in split([np.arange(6)], [1, 3, 2])] == [[0], [1, 2, 3], [4, 5]]


def test_rows_of_a_feed_and_of_one_that_runs_alone() -> None:
    assert batch_key({"x": np.zeros((3, 4))})[1] == 3
    assert batch_key({"a": np.zeros((2, 4)), "b": np.zeros(2, np.int64)})[1] == 2
    assert lone_rows({"a": np.zeros((2, 4)), "b": np.zeros(2)}) == 2
    assert lone_rows({"a": np.zeros((2, 4)), "b": np.zeros(3)}) == 0  # their batch dimensions disagree
    assert lone_rows({"a": np.zeros(())}) == 0  # no batch dimension


def test_outputs_are_split_per_feed_as_lists_or_dicts() -> None:
    onnx = split([np.arange(5), np.arange(10).reshape(5, 2)], [2, 3])
    assert [[part.tolist() for part in parts] for parts in onnx] == [
        [[0, 1], [[0, 1], [2, 3]]],
        [[2, 3, 4], [[4, 5], [6, 7], [8, 9]]],
    ]
    tensorflow = split({"y": np.arange(4)}, [3, 1])
    assert [{k: v.tolist() for k, v in parts.items()} for parts in tensorflow] == [{"y": [0, 1, 2]}, {"y": [3]}]


def test_only_outputs_with_the_batch_dimension_can_be_shared_out() -> None:
    assert splittable([np.zeros((4, 2)), np.zeros(4)], 4)
    assert not splittable([np.zeros((4, 2)), np.zeros(3)], 4)  # one output of another length
    assert not splittable({"y": np.float32(1.0)}, 1)  # a scalar
    assert not splittable([[1, 2, 3, 4]], 4)  # not an array


def test_whole_batch_counts_the_entries_that_make_up_the_largest_bucket() -> None:
    def rows(n: int) -> tuple[str, dict[str, np.ndarray]]:
        return ("tag", {"x": np.zeros((n, 4), np.float32)})

    assert whole_batch([rows(1), rows(1)], 4) is None  # 2 rows of 4: more may come
    assert whole_batch([rows(1), rows(3), rows(1)], 4) == 2  # exactly 4 rows
    assert whole_batch([rows(3), rows(2)], 4) == 1  # 5 rows: the second waits for its own batch
    assert whole_batch([rows(6)], 4) == 1  # one larger than the bucket runs alone


def test_chunks_are_consecutive_runs_within_the_largest_bucket() -> None:
    assert chunks([0, 1, 2, 3], [2, 2, 3, 1], 4) == [[0, 1], [2, 3]]
    assert chunks([0, 2], [5, 9, 1], 4) == [[0], [2]]  # an index's rows, not its place, count
