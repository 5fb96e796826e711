"""The batcher on real ONNX models: buckets, padding, splitting, groups, and the fall-backs."""

from __future__ import annotations

import collections
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import localserve.engine
from localserve.config.options import ApiOptions
from localserve.engine.batcher import Batcher
from localserve.errors import RequestError
from localserve.runtimes.onnx import OnnxModel
from tests.models import linear_reference, onnx_batch_echo, onnx_linear


def batcher_for(path: Path, buckets: tuple[int, ...]) -> tuple[Batcher, list[int]]:
    seen: list[int] = []
    model = OnnxModel(path, ApiOptions(threads=1))
    batcher = Batcher("t", model, buckets=buckets, interval=0.0, deliver=lambda _: None, observe=seen.append)
    return batcher, seen


def test_the_thread_gathering_a_batch_is_woken_only_to_end_it(tmp_path: Path) -> None:
    # Each wake-up of the batcher's thread takes the GIL from the event loop: while requests are still on their
    # way and the batch is not full, a submit leaves it waiting; the last one on its way ends the batch.
    upstream = [1]
    seen: list[int] = []
    outcomes: list[tuple[Any, Any]] = []
    delivered = threading.Event()

    def deliver(answers: list[tuple[Any, Any]]) -> None:
        outcomes.extend(answers)
        delivered.set()

    model = OnnxModel(onnx_batch_echo(tmp_path / "echo.onnx"), ApiOptions(threads=1))
    batcher = Batcher(
        "t",
        model,
        buckets=(1, 2, 4, 8),
        interval=60.0,
        deliver=deliver,
        upstream=lambda: upstream[0],
        observe=seen.append,
    )
    woken: list[int] = []

    class Counted(threading.Condition):
        def notify(self, n: int = 1) -> None:
            woken.append(n)
            super().notify(n)

    batcher._cond = Counted(batcher._mutex)
    batcher.start()
    try:
        rows = {tag: {"x": np.full((1, 4), value, np.float32)} for tag, value in (("a", 1.0), ("b", 2.0), ("c", 3.0))}
        assert batcher.submit([("a", rows["a"])]) is None  # another request is on its way: queued, not run
        deadline = time.monotonic() + 10
        while not batcher._gathering:  # the thread took it and waits for companions
            assert time.monotonic() < deadline, "the batcher's thread never gathered"
            time.sleep(0.001)
        assert batcher.submit([("b", rows["b"])]) is None
        upstream[0] = 0
        assert batcher.submit([("c", rows["c"])]) is None  # nothing more on its way: the batch ends
        assert delivered.wait(30)
        wakes = list(woken)
    finally:
        batcher.stop()
    assert [(tag, out[0].tolist()) for tag, out in outcomes] == [
        (tag, (rows[tag]["x"] + 4).tolist())
        for tag in "abc"  # 3 rows, one call padded to 4
    ]
    assert seen == [3]
    assert wakes == [1, 1]  # a's submit woke the idle thread, c's ended the batch; b's left it waiting


def test_a_submit_that_fills_the_largest_bucket_runs_at_once_on_its_own_thread(tmp_path: Path) -> None:
    # More requests on their way, the model idle: a submit that already fills the largest bucket could not
    # gain a row by waiting, so the submitting thread runs it (no hop to the batcher's thread and back).
    delivered: list[tuple[Any, Any]] = []
    model = OnnxModel(onnx_batch_echo(tmp_path / "echo.onnx"), ApiOptions(threads=1))
    batcher = Batcher(
        "t", model, buckets=(1, 2, 4), interval=60.0, deliver=delivered.extend, upstream=lambda: 5, observe=None
    )
    batcher.start()
    try:
        four = [(i, {"x": np.full((1, 4), float(i), np.float32)}) for i in range(4)]
        outcomes = batcher.submit(four)
        assert outcomes is not None, "a full batch waited for companions it could not take"
        assert [(tag, out[0].tolist()) for tag, out in outcomes] == [(i, [[i + 4.0] * 4]) for i in range(4)]
        three = [(i, {"x": np.full((1, 4), float(i), np.float32)}) for i in range(3)]
        assert batcher.submit(three) is None  # not full, more on its way: the batcher's thread gathers it
    finally:
        batcher.stop()


def engine_calls(call: Callable[[], Any]) -> tuple[Any, list[str]]:
    """What ``call`` returned, and the functions of ``localserve.engine`` it called, in order."""
    engine = str(Path(localserve.engine.__file__).parent)
    calls: list[str] = []

    def profile(frame: Any, event: str, _: Any) -> None:
        if event == "call" and frame.f_code.co_filename.startswith(engine):
            calls.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        return call(), calls
    finally:
        sys.setprofile(None)


def test_a_lone_request_goes_to_the_model_through_the_fewest_calls(tmp_path: Path) -> None:
    # At concurrency 1 every request is lone, and each Python call on its way to the model shows in its throughput
    # against an API without batching: no stacking, no grouping, no hop through the batch's own steps.
    model = OnnxModel(onnx_batch_echo(tmp_path / "echo.onnx"), ApiOptions(threads=1))
    batcher = Batcher("t", model, buckets=(1, 2, 4), interval=60.0, deliver=lambda _: None, upstream=lambda: 0)
    batcher.start()
    try:
        outcomes, calls = engine_calls(lambda: batcher.submit([("a", {"x": np.ones((1, 4), np.float32)})]))
    finally:
        batcher.stop()
    assert outcomes is not None and outcomes[0][1][0].tolist() == [[2.0] * 4]
    assert calls == ["submit", "run", "lone_rows", "_run"]


def test_each_feed_of_a_stacked_run_costs_one_call_of_the_engine(tmp_path: Path) -> None:
    # Under load the batcher handles every request's feed: its key and rows are read in one call, and stacking and
    # splitting make no call per feed.
    batcher, _ = batcher_for(onnx_batch_echo(tmp_path / "echo.onnx"), (1, 2, 4, 8))
    runs = {
        n: engine_calls(lambda n=n: batcher.run([(i, {"x": np.ones((1, 4), np.float32)}) for i in range(n)]))
        for n in (4, 8)
    }
    assert [out[0].tolist() for _, out in runs[8][0]] == [[[9.0] * 4]] * 8
    four, eight = (collections.Counter(calls) for _, calls in (runs[4], runs[8]))
    assert eight - four == collections.Counter({"batch_key": 4})


def test_feeds_are_stacked_padded_to_a_bucket_and_split_back(tmp_path: Path) -> None:
    batcher, seen = batcher_for(onnx_batch_echo(tmp_path / "echo.onnx"), (1, 2, 4, 8))
    feeds = [{"x": np.full((n, 4), float(i), np.float32)} for i, n in enumerate((1, 2, 2), start=1)]
    outcomes = batcher.run([(f"r{i}", feed) for i, feed in enumerate(feeds)])
    assert [tag for tag, _ in outcomes] == ["r0", "r1", "r2"]
    for (_, out), feed in zip(outcomes, feeds, strict=True):
        assert out[0].shape == feed["x"].shape  # the padding rows were dropped
        assert np.array_equal(out[0], feed["x"] + 8)  # 5 rows ran as one batch of 8
    assert seen == [5]  # reported as the call ended


def test_feeds_of_other_shapes_run_in_their_own_groups(tmp_path: Path) -> None:
    batcher, _ = batcher_for(onnx_linear(tmp_path / "lin.onnx"), (1, 2, 4))
    a = {"x": np.ones((1, 4), np.float32)}
    b = {"x": np.ones((1, 3), np.float32)}  # cannot be stacked with a, and the model refuses it
    outcomes = dict(batcher.run([("a", a), ("b", b), ("c", a)]))
    assert np.allclose(outcomes["a"][0], linear_reference(a["x"])[0], atol=1e-6)
    assert np.allclose(outcomes["c"][0], linear_reference(a["x"])[0], atol=1e-6)
    assert isinstance(outcomes["b"], RequestError)
    assert str(outcomes["b"]).startswith("The model expects 'x' (float32 of shape [-1, 4]); got 'x' as")


def test_a_refused_stacked_run_falls_back_to_each_feed_alone(tmp_path: Path) -> None:
    batcher, seen = batcher_for(onnx_linear(tmp_path / "fixed.onnx", symbolic_batch=False, fixed_batch=1), (1, 2, 4))
    feeds = [{"x": np.full((1, 4), float(i), np.float32)} for i in range(3)]
    outcomes = batcher.run([(i, feed) for i, feed in enumerate(feeds)])
    assert seen == [3, 1, 1, 1]  # the stacked run was tried (padded to 4) and refused
    for (_, out), feed in zip(outcomes, feeds, strict=True):
        assert np.allclose(out[0], linear_reference(feed["x"])[0], atol=1e-6)


def test_warm_runs_every_bucket_before_traffic(tmp_path: Path) -> None:
    batcher, _ = batcher_for(onnx_batch_echo(tmp_path / "echo.onnx"), (1, 2, 4))
    calls: list[int] = []
    real_run = batcher.model.run
    batcher.model.run = lambda feed, bucket=None: (calls.append(len(feed["x"])), real_run(feed, bucket))[1]  # type: ignore[method-assign]
    batcher.warm()
    assert calls == [1, 2, 4]


def test_on_a_gpu_each_bucket_gets_its_own_session_made_at_warm_up(tmp_path: Path) -> None:
    """The CUDA provider re-plans on a shape change, so on a GPU every batch size has a session of its own.

    Which sessions exist and which one each run uses is the same on any device: forced here on the
    CPU so that the path runs without a GPU (the GPU tests run it on CUDA).
    """
    batcher, _ = batcher_for(onnx_batch_echo(tmp_path / "echo.onnx"), (1, 2, 4))
    model = batcher.model
    assert isinstance(model, OnnxModel)
    model._per_bucket = True  # what a session on CUDAExecutionProvider sets
    used: list[tuple[int, object]] = []
    real_session_for = model._session_for

    def session_for(bucket: int) -> object:
        session = real_session_for(bucket)
        used.append((bucket, session))
        return session

    model._session_for = session_for  # type: ignore[method-assign]
    batcher.warm()
    sessions = dict(model._buckets)
    assert sorted(sessions) == [1, 2, 4]
    # The session loaded first is none of them: it takes the calls of other shapes (predict, odd feeds).
    assert len({id(session) for session in [model.session, *sessions.values()]}) == 4
    used.clear()
    feeds = [{"x": np.full((n, 4), float(n), np.float32)} for n in (1, 2)]  # 3 rows: run as 4
    outcomes = batcher.run([(n, feed) for n, feed in enumerate(feeds)])
    assert used == [(4, sessions[4])]
    for (_, out), feed in zip(outcomes, feeds, strict=True):
        assert np.array_equal(out[0], feed["x"] + 4)
    assert batcher.run([("one", feeds[0])])[0][1][0].tolist() == (feeds[0]["x"] + 1).tolist()
    assert used == [(4, sessions[4]), (1, sessions[1])]
    np.testing.assert_array_equal(model.predict(np.ones((3, 4), np.float32))[0], np.full((3, 4), 4.0))
    assert used == [(4, sessions[4]), (1, sessions[1])]  # a size of no bucket ran on the first session
    assert model._buckets == sessions  # no session was made after the warm-up
