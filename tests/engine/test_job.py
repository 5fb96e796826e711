"""A Job's one right to answer (taken once, whichever side comes first), a Call run on an API's thread, and
finished jobs settled on the loop."""

from __future__ import annotations

import asyncio
import threading

import pytest

from localserve.engine.job import QUEUED, Call, Job, settle
from localserve.messages.request import Request


def request() -> Request:
    return Request("POST", [(b"content-type", b"application/json")], b"{}")


def test_the_right_to_answer_is_taken_once_among_many_threads() -> None:
    async def main() -> list[bool]:
        job = Job(request(), asyncio.get_running_loop())
        assert job.state == QUEUED and job.prepare is None and job.finish is None
        start = threading.Barrier(8)
        won: list[bool] = []

        def race() -> None:
            start.wait()
            won.append(job.claim())

        threads = [threading.Thread(target=race) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return won

    assert sorted(asyncio.run(main())) == [False] * 7 + [True]


def test_a_call_settles_its_future_with_the_result_or_the_error() -> None:
    ok = Call(lambda: 42)
    ok.run()
    assert ok.future.result() == 42
    failing = Call(lambda: 1 / 0)
    failing.run()
    with pytest.raises(ZeroDivisionError):
        failing.future.result()


def test_a_call_cancelled_before_it_runs_is_not_run() -> None:
    ran: list[bool] = []
    call = Call(lambda: ran.append(True))
    assert call.future.cancel()
    call.run()
    assert ran == [] and call.future.cancelled()


def test_settle_resolves_each_future_once_with_a_result_or_an_exception() -> None:
    async def main() -> tuple[object, BaseException | None, object]:
        loop = asyncio.get_running_loop()
        ok, failed, answered = Job(request(), loop), Job(request(), loop), Job(request(), loop)
        answered.future.set_result("first")
        settle([(ok, "reply"), (failed, ValueError("bad")), (answered, "second")])
        return ok.future.result(), failed.future.exception(), answered.future.result()

    result, error, kept = asyncio.run(main())
    assert result == "reply" and isinstance(error, ValueError) and kept == "first"
