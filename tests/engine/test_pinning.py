"""Pinning (``--pin-threads``, and the default for short requests; engine/pinning.py): the loop and an API's
threads on one core, handing requests over without preempting each other; the runtimes' pools elsewhere."""

from __future__ import annotations

import asyncio
import os
import threading

import pytest

from tests.models import onnx_identity

pytestmark = pytest.mark.skipif(
    not hasattr(os, "SCHED_BATCH") or len(os.sched_getaffinity(0)) < 2, reason="Linux's scheduling, two cores"
)

HANDLER = """
import os

def post_inference(prediction, metadata):
    return {"cpus": sorted(os.sched_getaffinity(0)), "policy": os.sched_getscheduler(0)}
"""


async def where_this_thread_runs() -> dict[str, object]:
    return {"cpus": sorted(os.sched_getaffinity(0)), "policy": os.sched_getscheduler(0)}


def test_pinned_threads_are_batch_scheduled_and_the_runtimes_pools_leave_their_core(serve, make_project) -> None:
    from localserve.server import ServeOptions

    config = "- kind: api\n  name: m\n  model: m.onnx\n  request_handler: h.py\n"
    project = make_project({"localserve.yaml": config, "h.py": HANDLER})
    onnx_identity(project / "m.onnx")
    allowed = sorted(os.sched_getaffinity(0))
    with serve(project, ServeOptions(pin_threads=True)) as client:
        engine = client.app.engine
        worker = client.post("/m", json={"x": [[1.0, 2.0, 3.0, 4.0]]}).json()
        assert engine.loop is not None
        loop = asyncio.run_coroutine_threadsafe(where_this_thread_runs(), engine.loop).result(30)
        # onnxruntime's intra-op pool: made by the session while the API loaded, a thread Python did not start
        pool = engine.pinner.loading_threads - {thread.native_id for thread in threading.enumerate()}
        pool_cpus = {tid: sorted(os.sched_getaffinity(tid)) for tid in pool}
    core = allowed[:1]  # replica 0 on port 0: the first allowed core
    assert loop == {"cpus": core, "policy": os.SCHED_BATCH}
    assert worker == {"cpus": core, "policy": os.SCHED_BATCH}
    assert pool_cpus  # intra_op_num_threads is the core count: one thread of the pool besides the caller at least
    assert all(cpus == allowed[1:] for cpus in pool_cpus.values()), pool_cpus


def test_a_thread_with_a_policy_of_its_own_keeps_it() -> None:
    from localserve.engine.pinning import pin_this_thread

    seen: dict[str, object] = {}

    def run() -> None:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))  # as `chrt --idle` would have it
        pin_this_thread({sorted(os.sched_getaffinity(0))[0]})
        seen["policy"] = os.sched_getscheduler(0)
        seen["cpus"] = sorted(os.sched_getaffinity(0))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    assert seen == {"policy": os.SCHED_IDLE, "cpus": sorted(os.sched_getaffinity(0))[:1]}
