"""A gRPC connection's turns to read a message (``guard._Connection``): ``READS_AT_ONCE`` at once, the rest first come,
first served, and a turn never lost to a call cancelled while it waited."""

from __future__ import annotations

import asyncio

from localserve.protocols.v2.grpc.guard import READS_AT_ONCE, _Connection


async def _reading_all(connection: _Connection) -> asyncio.AbstractEventLoop:
    loop = asyncio.get_running_loop()
    for _ in range(READS_AT_ONCE):
        assert connection.take(loop) is None  # free turns: taken without waiting
    assert connection.free == 0
    return loop


async def _waiting(connection: _Connection, loop: asyncio.AbstractEventLoop) -> None:
    turn = connection.take(loop)
    assert turn is not None
    await connection.wait(turn)


def test_waiting_calls_read_in_the_order_they_came() -> None:
    async def scenario() -> list[str]:
        connection = _Connection()
        loop = await _reading_all(connection)
        order: list[str] = []

        async def call(name: str) -> None:
            turn = connection.take(loop)
            assert turn is not None
            await connection.wait(turn)
            order.append(name)

        first, second = loop.create_task(call("first")), loop.create_task(call("second"))
        await asyncio.sleep(0)  # both tasks run up to their wait
        assert len(connection.waiting) == 2 and not order
        connection.done()
        await first
        assert order == ["first"] and not second.done()
        connection.done()
        await second
        connection.done()
        connection.done()  # nobody waits: the turns go back
        assert connection.free == 2 and not connection.waiting
        return order

    assert asyncio.run(scenario()) == ["first", "second"]


def test_a_turn_handed_to_a_call_cancelled_meanwhile_goes_to_the_next() -> None:
    async def scenario() -> None:
        connection = _Connection()
        loop = await _reading_all(connection)
        cancelled = loop.create_task(_waiting(connection, loop))
        await asyncio.sleep(0)  # the task runs up to its wait
        following = connection.take(loop)
        assert following is not None
        connection.done()  # the turn goes to the first waiting call...
        cancelled.cancel()  # ...which is cancelled before it runs: it passes the turn on
        await asyncio.gather(cancelled, return_exceptions=True)
        assert following.done() and not connection.waiting and connection.free == 0

    asyncio.run(scenario())


def test_a_call_cancelled_while_it_waits_leaves_its_place() -> None:
    async def scenario() -> None:
        connection = _Connection()
        loop = await _reading_all(connection)
        cancelled = loop.create_task(_waiting(connection, loop))
        await asyncio.sleep(0)
        cancelled.cancel()
        await asyncio.gather(cancelled, return_exceptions=True)
        assert not connection.waiting
        connection.done()  # nobody waits now: the turn is free again
        assert connection.free == 1

    asyncio.run(scenario())
