"""The shared job store: Redis, for replicas on several machines (``--async-store redis://HOST:PORT/DB``).

Keys under ``localserve:<project>:<api>:``: ``job:<id>`` (a hash), ``queue`` (a list of queued ids), ``leases`` (a
sorted set: running id -> lease end), ``finished`` (id -> finish time, for the purge), ``latency`` (the histogram).
Claim, finish and requeue are Lua scripts, atomic on the server; jobs are as durable as its persistence (``appendonly
yes``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from localserve.protocols.asyncapi.jobs import LATENCY_BOUNDS, Counts, Job, JobState, StoreError, latency_bucket

CLAIM = """
local id = redis.call('RPOP', KEYS[1])
if not id then return false end
local key = ARGV[4] .. id
redis.call('HSET', key, 'status', 'in_progress', 'worker', ARGV[1], 'started', ARGV[2])
local attempts = redis.call('HINCRBY', key, 'attempts', 1)
redis.call('ZADD', KEYS[2], ARGV[3], id)
local v = redis.call('HMGET', key, 'payload', 'meta')
return {id, v[1], v[2], attempts}
"""
FINISH = """
local key = KEYS[1]
if redis.call('HGET', key, 'status') ~= 'in_progress' or redis.call('HGET', key, 'worker') ~= ARGV[1] then
  return 0
end
redis.call('HSET', key, 'status', ARGV[2], 'finished', ARGV[3], ARGV[4], ARGV[5])
redis.call('HDEL', key, 'payload')
redis.call('ZREM', KEYS[2], ARGV[6])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[6])
redis.call('HINCRBY', KEYS[4], ARGV[2] .. ':' .. ARGV[7], 1)
redis.call('HINCRBYFLOAT', KEYS[4], ARGV[2] .. ':sum', ARGV[8])
return 1
"""
REQUEUE = """
local key = KEYS[1]
if redis.call('HGET', key, 'status') ~= 'in_progress' or redis.call('HGET', key, 'worker') ~= ARGV[1] then
  return 0
end
redis.call('HSET', key, 'status', 'in_queue')
redis.call('HDEL', key, 'worker')
redis.call('ZREM', KEYS[2], ARGV[2])
redis.call('RPUSH', KEYS[3], ARGV[2])
return 1
"""


class RedisStore:
    """Jobs of one AsyncAPI in a Redis server shared by every replica on every machine."""

    def __init__(self, client: Any, url: str, namespace: str) -> None:
        self.client = client
        self.url = url
        self.ns = namespace
        self._claim = client.register_script(CLAIM)
        self._finish = client.register_script(FINISH)
        self._requeue = client.register_script(REQUEUE)

    @classmethod
    def from_url(cls, url: str, *, namespace: str) -> RedisStore:
        """Connect to the Redis server at ``url``; keys live under ``namespace``. StoreError if it does not answer."""
        try:
            import redis
        except ImportError:
            raise StoreError(
                f"The job store {url!r} needs the redis client: pip install 'localserve[redis]'."
            ) from None
        shown = _without_password(url)
        try:
            client = redis.Redis.from_url(url, socket_timeout=5.0, socket_connect_timeout=2.0)
        except ValueError as exc:
            raise StoreError(f"Invalid Redis store URL {shown!r}: {exc}; expected redis://HOST:PORT/DB.") from None
        return cls(client, shown, namespace)

    def _key(self, *parts: str) -> str:
        return ":".join((self.ns, *parts))

    @contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        import redis

        try:
            yield
        except redis.RedisError as exc:
            raise StoreError(
                f"The job store {self.url} could not be {doing}: {exc}.",
                public=f"the job store could not be {doing} (the server log has the details)",
            ) from exc

    # -- JobStore -------------------------------------------------------------------------------
    def submit(self, job_id: str, payload: bytes, meta: Mapping[str, Any], now: float) -> None:
        """As ``JobStore.submit``."""
        with self._errors("written"):
            pipe = self.client.pipeline(transaction=True)
            pipe.hset(
                self._key("job", job_id),
                mapping={"status": "in_queue", "payload": payload, "meta": json.dumps(meta), "submitted": repr(now)},
            )
            pipe.lpush(self._key("queue"), job_id)
            pipe.execute()

    def state(self, job_id: str) -> JobState | None:
        """As ``JobStore.state``."""
        with self._errors("read"):
            values = self.client.hmget(self._key("job", job_id), "status", "result", "error", "finished")
        status, result, error, finished = (v.decode() if v is not None else None for v in values)
        if status is None:
            return None
        return JobState(
            job_id, status, result=result, error=error, finished=None if finished is None else float(finished)
        )

    def claim(self, worker: str, now: float, lease: float) -> Job | None:
        """As ``JobStore.claim``."""
        with self._errors("written"):
            row = self._claim(
                keys=[self._key("queue"), self._key("leases")],
                args=[worker, repr(now), repr(now + lease), self._key("job", "")],
            )
        if not row:
            return None
        job_id, payload, meta, attempts = row
        return Job(job_id.decode(), bytes(payload or b""), json.loads(meta or b"{}"), attempts=int(attempts))

    def renew(self, job_ids: list[str], worker: str, until: float) -> None:
        """As ``JobStore.renew``."""
        if not job_ids:
            return
        with self._errors("written"):
            pipe = self.client.pipeline(transaction=False)
            for job_id in job_ids:
                pipe.hget(self._key("job", job_id), "worker")
            held = [j for j, w in zip(job_ids, pipe.execute(), strict=True) if w is not None and w.decode() == worker]
            if held:
                self.client.zadd(self._key("leases"), dict.fromkeys(held, until), xx=True)

    def finish(self, job_id: str, worker: str, now: float, *, result: str | None, error: str | None) -> bool:
        """As ``JobStore.finish``."""
        outcome = "completed" if error is None else "failed"
        with self._errors("written"):
            submitted = self.client.hget(self._key("job", job_id), "submitted")
            seconds = max(0.0, now - float(submitted)) if submitted is not None else 0.0
            done = self._finish(
                keys=[self._key("job", job_id), self._key("leases"), self._key("finished"), self._key("latency")],
                args=[
                    worker,
                    outcome,
                    repr(now),
                    "result" if error is None else "error",
                    result if error is None else error,
                    job_id,
                    str(latency_bucket(seconds)),
                    repr(seconds),
                ],
            )
        return bool(done)

    def recover(self, now: float, is_dead: Callable[[str], bool]) -> list[str]:
        """As ``JobStore.recover``."""
        with self._errors("read"):
            leases = self.client.zrange(self._key("leases"), 0, -1, withscores=True)
            pipe = self.client.pipeline(transaction=False)
            for job_id, _ in leases:
                pipe.hget(self._key("job", job_id.decode()), "worker")
            workers = pipe.execute()
        back = []
        for (raw_id, lease_until), raw_worker in zip(leases, workers, strict=True):
            job_id = raw_id.decode()
            worker = raw_worker.decode() if raw_worker is not None else ""
            if lease_until < now or is_dead(worker):
                with self._errors("written"):
                    moved = self._requeue(
                        keys=[self._key("job", job_id), self._key("leases"), self._key("queue")], args=[worker, job_id]
                    )
                if moved:
                    back.append(job_id)
        return back

    def purge(self, before: float) -> int:
        """As ``JobStore.purge``."""
        with self._errors("written"):
            old = self.client.zrangebyscore(self._key("finished"), "-inf", f"({before!r}")
            if not old:
                return 0
            pipe = self.client.pipeline(transaction=True)
            pipe.delete(*(self._key("job", job_id.decode()) for job_id in old))
            pipe.zrem(self._key("finished"), *old)
            pipe.execute()
        return len(old)

    def counts(self) -> Counts:
        """As ``JobStore.counts``."""
        with self._errors("read"):
            pipe = self.client.pipeline(transaction=False)
            pipe.llen(self._key("queue"))
            pipe.zcard(self._key("leases"))
            pipe.hgetall(self._key("latency"))
            queued, running, latency = pipe.execute()
        counts = Counts(in_queue=int(queued), in_progress=int(running))
        for raw_field, raw_value in latency.items():
            outcome, _, which = raw_field.decode().partition(":")
            buckets = counts.buckets.setdefault(outcome, [0] * (len(LATENCY_BOUNDS) + 1))
            if which == "sum":
                counts.sums[outcome] = float(raw_value)
            elif which.isdigit() and int(which) < len(buckets):
                buckets[int(which)] = int(raw_value)
        return counts

    def ping(self) -> None:
        """As ``JobStore.ping``."""
        with self._errors("reached"):
            self.client.ping()

    def close(self) -> None:
        """As ``JobStore.close``."""
        self.client.close()


def _without_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))
