"""The batcher of one model: stack concurrent feeds, pad to a bucket size, run once, split.

A GPU model must never meet a new input shape under load: onnxruntime's CUDA provider re-plans every convolution when
the batch dimension changes, slowly. So the model only ever sees batch sizes from a fixed set (``buckets``, powers of
two up to ``max_batch_size`` by default); a batch of 5 rows runs as 8, the padding's outputs dropped before the split.
Feeds that cannot be stacked together run in separate groups, so a request never fails because of another.

The batcher runs the model on its own thread, so the API's threads prepare batch k+1 while the model runs batch k. It
takes whole batches: past the largest bucket, the rest waits for companions (or its interval). When the model is idle
and nothing else is on its way, or what is submitted already fills the largest bucket, the submitting thread runs the
model itself: a lone request pays no thread hop and never waits for ``batch_interval``, and a full batch, which
waiting could not make larger, pays no hop to the batcher's thread and back.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from localserve.engine.feeds import batch_key, chunks, lone_rows, split, splittable, stack, whole_batch
from localserve.errors import InternalError, LocalServeError, RequestError
from localserve.runtimes import Feed, Model

log = logging.getLogger("localserve")

Outcome = Any  # the model's share of the output for one feed (list or dict of arrays), or a LocalServeError
Entry = tuple[Any, Feed]  # (tag, feed): the tag travels back with the outcome


class Batcher:
    """Runs one model for every request of an API (and of every protocol that reaches it).

    ``submit`` hands over (tag, feed) entries; their outcomes come back either at once (the
    caller ran the model itself) or later through ``deliver(list of (tag, outcome))``, called on
    the batcher's thread. ``upstream()`` tells how many requests are still on their way to the
    model (queued or being prepared): only then is it worth waiting ``interval`` for a fuller batch.
    """

    def __init__(
        self,
        name: str,
        model: Model,
        *,
        buckets: tuple[int, ...],
        interval: float,
        deliver: Callable[[list[tuple[Any, Outcome]]], None],
        upstream: Callable[[], int] = lambda: 0,
        observe: Callable[[int], None] | None = None,
        observe_run: Callable[[float], None] | None = None,
        traced: Callable[[list[Any], float, float], None] | None = None,
    ) -> None:
        self.name = name
        self.model = model
        self.buckets = buckets
        self.max_rows = buckets[-1]
        self._bucket_set = frozenset(buckets)
        self.interval = interval
        self.deliver = deliver
        self.upstream = upstream
        self.observe = observe  # told the batch size the model saw, as each call ends
        self.observe_run = observe_run  # told the seconds each model call took
        self.traced = traced  # told the tags, start and end of each run of several entries (tracing: one span)
        self._mutex = threading.Lock()  # taken bare on the callers' path: Condition's own enter/exit are Python calls
        self._cond = threading.Condition(self._mutex)
        self._pending: list[Entry] = []
        self._busy = False  # the model is running (on the batcher's thread or a caller's)
        self._gathering = False  # the batcher's thread waits for companions of what is pending (up to ``interval``)
        self._closed = False
        self.thread: threading.Thread | None = None
        self._cold: set[int] = set()  # bucket sizes not warmed at load: the first run of each is logged

    # -- set-up -------------------------------------------------------------------------------------
    def warm(self) -> None:
        """Run every bucket size once (before the API is ready) when the input shapes are known.

        Needed on a GPU, where a new shape re-plans; on the CPU a first call costs only its session's first wake-up
        and every size together a few milliseconds of the start, so it is kept there too: one rule, and no first
        request pays it (docs/explanation/batching.md)."""
        specs = self.model.batch_inputs()
        if specs is None:
            self._cold = set(self.buckets)
            log.info(
                "api %r: the model's input shapes are not known apart from the batch dimension, so batch sizes %s "
                "are warmed by the first request of each size",
                self.name,
                list(self.buckets),
            )
            return
        start = time.perf_counter()
        for size in self.buckets:
            feed = {name: np.zeros((size, *shape), dtype=dtype) for name, (dtype, shape) in specs.items()}
            self.model.run(feed, size)
        log.info("api %r: batch sizes %s warmed in %.3f s", self.name, list(self.buckets), time.perf_counter() - start)

    def start(self) -> None:
        """Start the batcher's thread."""
        self.thread = threading.Thread(target=self._loop, name=f"localserve-{self.name}-batcher", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        """Wake the batcher's thread and let it end (the engine stops it at shutdown)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    # -- the caller's side --------------------------------------------------------------------------
    def submit(self, entries: list[Entry]) -> list[tuple[Any, Outcome]] | None:
        """Queue ``entries`` for the model; returns their outcomes when this thread ran the model itself."""
        with self._mutex:
            if self._closed:  # retired (its model version left memory): whoever still holds it runs inline
                return self.run(entries)
            if (
                self._busy
                or self._pending
                or (self.thread is not None and self.upstream() and whole_batch(entries, self.max_rows) is None)
            ):
                self._pending.extend(entries)
                # The thread gathering a batch is woken only when it would end it: full, or nothing more on its way.
                if not self._gathering or whole_batch(self._pending, self.max_rows) is not None or self.upstream() <= 0:
                    self._cond.notify()
                return None
            self._busy = True
        try:
            return self.run(entries)
        except BaseException as exc:  # a bug of ours: answer every entry
            log.error("api %r: the model call failed", self.name, exc_info=exc)
            return [(tag, InternalError(exc)) for tag, _ in entries]
        finally:
            # Released without the lock: whoever queues entries does it under the lock and then
            # notifies, and the batcher's thread reads ``_busy`` under the lock when woken, so an
            # entry queued while this run ends is taken either by the thread (notified by its
            # submitter, or below) or, ``_busy`` being false, run inline by its own submitter.
            self._busy = False
            if self._pending:
                with self._mutex:
                    self._cond.notify()

    # -- the batcher's thread -----------------------------------------------------------------------
    def _loop(self) -> None:
        cond = self._cond
        while True:
            with cond:
                while not self._closed and (self._busy or not self._pending):
                    cond.wait()
                if self._closed and not self._pending:  # what was queued before the stop is still run
                    return
                deadline = time.monotonic() + self.interval
                self._gathering = True
                while (full := whole_batch(self._pending, self.max_rows)) is None:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or self.upstream() <= 0 or self._closed:
                        break
                    cond.wait(remaining)
                self._gathering = False
                if full is None or full == len(self._pending):
                    taken, self._pending = self._pending, []
                else:  # one full batch; the rest waits for companions (or its own interval)
                    taken, self._pending = self._pending[:full], self._pending[full:]
                self._busy = True
            try:
                outcomes = self.run(taken)
            except BaseException as exc:  # a bug of ours: answer every entry, keep the thread alive
                log.error("api %r: the batcher failed", self.name, exc_info=exc)
                outcomes = [(tag, InternalError(exc)) for tag, _ in taken]
            finally:
                with cond:
                    self._busy = False
            del taken
            self.deliver(outcomes)
            del outcomes

    # -- running --------------------------------------------------------------------------------
    def run(self, entries: list[Entry]) -> list[tuple[Any, Outcome]]:
        """Run ``entries`` in as few model calls as the buckets allow; one outcome per entry, in order."""
        if len(entries) == 1:  # a lone request (concurrency 1 runs only these): no stacking, no split, no span
            tag, feed = entries[0]
            rows = lone_rows(feed)
            if rows in self._bucket_set:  # exactly a bucket's size: no padding either
                try:
                    return [(tag, self._run(feed, rows, rows))]
                except LocalServeError as exc:
                    return [(tag, exc)]
            return self._run_entries(entries)
        traced = self.traced
        if traced is None:
            return self._run_entries(entries)
        start = time.perf_counter()
        outcomes = self._run_entries(entries)
        traced([tag for tag, _ in entries], start, time.perf_counter())
        return outcomes

    def _run_entries(self, entries: list[Entry]) -> list[tuple[Any, Outcome]]:
        groups: dict[Hashable, list[int]] = {}
        alone: list[int] = []
        sizes = [0] * len(entries)  # each stackable feed's batch dimension
        for index, (_, feed) in enumerate(entries):
            key, sizes[index] = batch_key(feed)
            if key is None:
                alone.append(index)
            else:
                groups.setdefault(key, []).append(index)
        outcomes: list[Outcome] = [None] * len(entries)
        for indexes in groups.values():
            for chunk in chunks(indexes, sizes, self.max_rows):
                stacked = self._run_stacked([entries[i][1] for i in chunk], [sizes[i] for i in chunk])
                for index, outcome in zip(chunk, stacked, strict=True):
                    outcomes[index] = outcome
        for index in alone:
            outcomes[index] = self._call(entries[index][1], None)
        return [(tag, outcome) for (tag, _), outcome in zip(entries, outcomes, strict=True)]

    def _run_stacked(self, feeds: list[Feed], sizes: list[int]) -> list[Outcome]:
        """``feeds`` (of ``sizes`` rows) stacked and run as one call, padded to a bucket; one outcome per feed."""
        total = sum(sizes)
        bucket = next((b for b in self.buckets if b >= total), None)
        if len(feeds) == 1 and bucket is None:  # one request larger than the largest bucket: its own size
            return [self._call(feeds[0], None)]
        rows = total if bucket is None else bucket
        stacked = feeds[0] if len(feeds) == 1 and rows == total else stack(feeds, total, rows)
        try:
            output = self._run(stacked, bucket, total)
        except RequestError as exc:
            if len(feeds) == 1 and bucket in (None, total):
                return [exc]
            # The stacked input was refused (a model with a fixed batch size, say) though each part
            # may be fine alone: a request never fails because of the others it was batched with.
            return [self._call(feed, None) for feed in feeds]
        except LocalServeError as exc:
            return [exc] * len(feeds)
        if not splittable(output, bucket or total):
            # An output without the batch dimension cannot be shared out: run each feed alone.
            return [self._call(feed, None) for feed in feeds]
        parts = split(output, [*sizes, (bucket or total) - total])
        return parts[: len(feeds)]

    def _call(self, feed: Feed, bucket: int | None) -> Outcome:
        try:
            return self._run(feed, bucket)
        except LocalServeError as exc:
            return exc

    def _run(self, feed: Feed, bucket: int | None, rows: int | None = None) -> Any:
        """One model call, reported as it ends; ``rows`` (for the metrics) are the requests' rows, padding excluded.

        Reported at once rather than after the answers are written: the thread's work after the write delays the event
        loop all the same (they share a core at concurrency 1), and a deferred report costs a call of its own.
        """
        if rows is None:
            key, rows = batch_key(feed)
            rows = rows if key is not None else 1
        if bucket in self._cold:
            self._cold.discard(bucket)
            log.info("api %r: first batch of size %d; the model warms up for it now", self.name, bucket)
        start = time.perf_counter()
        try:
            return self.model.run(feed, bucket)
        finally:
            seconds = time.perf_counter() - start
            if self.observe is not None:
                self.observe(rows)
            if self.observe_run is not None:
                self.observe_run(seconds)
