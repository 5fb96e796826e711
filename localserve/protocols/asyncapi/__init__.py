"""Cortex AsyncAPIs: ``POST /<api>`` stores a job and answers its id, a worker runs it, ``GET /<api>/<id>`` polls.

Jobs live in a durable store (SQLite under the cache folder by default, Redis when replicas span
machines), survive ``kill -9`` (at-least-once), and are shared safely by the replicas.
"""

from __future__ import annotations

from localserve.protocols.asyncapi.oneshot import job_failed, one_shot_job, run_one_job
from localserve.protocols.asyncapi.routes import AsyncJobs
from localserve.protocols.asyncapi.store import Job, JobState, JobStore, StoreError, open_store

__all__ = [
    "AsyncJobs",
    "Job",
    "JobState",
    "JobStore",
    "StoreError",
    "job_failed",
    "one_shot_job",
    "open_store",
    "run_one_job",
]
