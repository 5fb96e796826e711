"""Real `localserve serve` processes: a kill -9 during a job, and two replicas sharing one store."""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.protocols.asyncapi.conftest import needs_redis
from tests.test_e2e import output_of, server, wait_loaded

pytestmark = pytest.mark.slow


def poll(url: str, job_id: str, *statuses: str) -> dict[str, Any]:
    deadline = time.monotonic() + 90  # only catches a hang
    while True:
        body: dict[str, Any] = httpx.get(f"{url}/jobs/{job_id}", timeout=10).json()
        if body["status"] in statuses:
            return body
        assert time.monotonic() < deadline, body
        time.sleep(0.02)


def submit(url: str, payload: Any) -> str:
    reply = httpx.post(f"{url}/jobs", json=payload, timeout=10)
    assert reply.status_code == 200, reply.text
    return str(reply.json()["id"])


def runs(tmp_path: Path) -> list[tuple[str, int]]:
    """(job id, pid) of every run of ``predict``, from the side file the predictor appends to."""
    lines = (tmp_path / "runs.txt").read_text().splitlines() if (tmp_path / "runs.txt").exists() else []
    return [(job, int(pid)) for job, pid in (line.split() for line in lines)]


def started(tmp_path: Path, count: int) -> list[tuple[str, int]]:
    """``runs`` once ``count`` runs have begun: a job is ``in_progress`` from its claim, a moment before
    ``predict`` writes its line."""
    deadline = time.monotonic() + 90  # only catches a hang
    while len(found := runs(tmp_path)) < count:
        assert time.monotonic() < deadline, found
        time.sleep(0.02)
    return found


def test_a_job_in_progress_when_the_server_is_killed_runs_again_after_restart(
    async_project: Callable[..., Path], tmp_path: Path
) -> None:
    project = async_project()
    with server(cwd=project) as (url, proc):
        first = submit(url, {"wait": True})
        poll(url, first, "in_progress")
        started(tmp_path, 1)
        queued = submit(url, {"n": 1})
        assert poll(url, queued, "in_queue")["status"] == "in_queue"
        proc.kill()  # SIGKILL: no shutdown, no cleanup, the job's row still says in_progress
        proc.wait(20)
        killed = proc.pid
    assert runs(tmp_path) == [(first, killed)]
    (tmp_path / "gate").touch()
    with server(cwd=project) as (url, proc):
        done = poll(url, first, "completed", "failed")
        assert done["status"] == "completed", done
        assert done["result"] == {"id": first, "payload": {"wait": True}, "query": {}, "agent": None}
        assert poll(url, queued, "completed", "failed")["result"]["payload"] == {"n": 1}
        restarted = proc.pid
    assert runs(tmp_path) == [(first, killed), (first, restarted), (queued, restarted)]
    assert f"job {first} runs again (attempt 2)" in output_of(proc)


@pytest.mark.parametrize("store", ["sqlite", pytest.param("redis", marks=needs_redis)])
def test_two_replicas_share_one_store_and_run_each_job_once(
    store: str, async_project: Callable[..., Path], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    project = async_project()
    flags = ["--replicas", "2"]
    if store == "redis":
        flags += ["--async-store", request.getfixturevalue("redis_url")]
    with server(*flags, cwd=project) as (url, proc):
        wait_loaded(proc, ["jobs"], 2)
        held = [submit(url, {"wait": True}), submit(url, {"wait": True})]
        for job_id in held:
            poll(url, job_id, "in_progress")
        # One thread per replica: two jobs in progress at once are in two different replicas.
        assert len({pid for _, pid in started(tmp_path, 2)}) == 2, output_of(proc)
        more = [submit(url, {"n": index}) for index in range(20)]
        (tmp_path / "gate").touch()
        for job_id in held + more:
            assert poll(url, job_id, "completed", "failed")["status"] == "completed"
        metrics = httpx.get(f"{url}/metrics", timeout=10).text
        assert 'localserve_async_job_duration_seconds_count{api="jobs",status="completed"} 22.0' in metrics
    counted = collections.Counter(job for job, _ in runs(tmp_path))
    assert counted == dict.fromkeys(held + more, 1)


@needs_redis
def test_a_front_without_workers_queues_and_a_worker_runs_what_it_took(
    async_project: Callable[..., Path], tmp_path: Path, redis_url: str
) -> None:
    """``--no-async-workers`` (the front ``export kubernetes`` writes): submits and polls, no job run there,
    no user code loaded; a worker process on the same Redis store runs the queued jobs."""
    import redis

    project = async_project()
    (project / "predictor.py").write_text(
        (project / "predictor.py").read_text() + "\nopen(__file__ + '.imported', 'w')\n"
    )
    with server("--async-store", redis_url, "--no-async-workers", cwd=project) as (front, proc):
        assert httpx.get(f"{front}/readyz", timeout=10).status_code == 200
        held = [submit(front, {"n": index}) for index in range(3)]
        queue = "localserve:" + project.resolve().name + ":jobs:queue"  # what KEDA's Redis list trigger reads
        assert redis.Redis.from_url(redis_url).llen(queue) == 3
        assert all(poll(front, job_id, "in_queue")["status"] == "in_queue" for job_id in held)
        assert not (project / "predictor.py.imported").exists(), output_of(proc)  # the front loads no user code
        with server("--async-store", redis_url, cwd=project):  # a worker
            for job_id in held:
                assert poll(front, job_id, "completed", "failed")["status"] == "completed"
        assert "submits and polls only (--no-async-workers)" in output_of(proc)
    assert {job for job, _ in runs(tmp_path)} == set(held)
    assert redis.Redis.from_url(redis_url).llen(queue) == 0


@pytest.mark.parametrize("damage", ["deleted", "shm truncated"])
def test_a_store_whose_files_change_under_the_server_refuses_jobs_and_the_server_keeps_answering(
    async_project: Callable[..., Path], tmp_path: Path, damage: str
) -> None:
    """The store's files deleted while serving (jobs would go into a file nobody finds again), or its -shm file
    truncated (the next touch of SQLite's mapping of it is a SIGBUS): submits answer 503, /readyz says why, the
    process lives and says once what became of the jobs."""
    store = tmp_path / "store" / "jobs.sqlite3"
    project = async_project(f"  async_store: sqlite://{store}\n")
    with server(cwd=project) as (url, proc):
        kept = submit(url, {"n": 1})
        assert poll(url, kept, "completed")["result"]["payload"] == {"n": 1}
        shm = Path(f"{store}-shm")
        assert shm.stat().st_size > 0
        if damage == "deleted":
            for file in store.parent.iterdir():
                file.unlink()
        else:
            with open(shm, "r+b") as file:
                file.truncate(0)
        refused = httpx.post(f"{url}/jobs", json={"n": 2}, timeout=10)
        ready = httpx.get(f"{url}/readyz", timeout=10)
        poll_answer = httpx.get(f"{url}/jobs/{kept}", timeout=10)
        alive = httpx.get(f"{url}/healthz", timeout=10).status_code
        assert proc.poll() is None, output_of(proc)
    public = (
        "the job store's files were deleted or changed while the server ran; new jobs cannot be kept until the "
        "server is restarted (the server log has the details)"
    )
    assert (refused.status_code, refused.json()["error"]) == (503, f"The job was not stored: {public}.")
    assert (ready.status_code, ready.json()["apis"]["jobs"]["store"]) == (503, public)
    assert poll_answer.status_code == 503
    assert alive == 200
    why = "its file was deleted" if damage == "deleted" else "its shared-memory file (-shm) was truncated"
    assert output_of(proc).count(f"The job store {store} is unusable: {why}") == 1, output_of(proc)
